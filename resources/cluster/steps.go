package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/observe"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/imageref"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/hostenv"
	"github.com/rayform/rayform/resources/kit"
	"github.com/rayform/rayform/resources/servedir"
)

// stopGrace is how long `docker stop` lets Ray shut down (and deregister
// from the GCS) before killing the container.
const stopGrace = 15

// rayListTimeout bounds one `ray list nodes`, a Python process.
const rayListTimeout = 60 * time.Second

// clusterRun is what the steps of one ray_cluster share.
type clusterRun struct {
	e    *hostenv.StepEnv
	w    *kind.Work
	c    *ClusterWork
	spec map[string]ContainerSpec
	head ContainerSpec
	// started are the nodes whose container the steps start, head first.
	started []string
}

// newClusterRun prepares what the steps of w share.
func newClusterRun(e *hostenv.StepEnv, w *kind.Work) *clusterRun {
	c := WorkOf(w)
	r := &clusterRun{e: e, w: w, c: c, spec: map[string]ContainerSpec{}}
	for _, s := range c.Specs {
		r.spec[s.Node] = s
		if c.Start[s.Node] {
			r.started = append(r.started, s.Node)
		}
	}
	if len(c.Specs) > 0 {
		r.head = c.Specs[0]
	}
	return r
}

func clusterSteps(e *hostenv.StepEnv, w *kind.Work) []apply.Step {
	c := WorkOf(w)
	r := newClusterRun(e, w)
	var steps []apply.Step
	if len(c.Remove) > 0 {
		steps = append(steps, r.removeStep(c.Remove))
	}
	if w.Action == plan.Delete || len(c.Specs) == 0 {
		return steps
	}
	if len(r.started) > 0 && !e.Prepared {
		steps = append(steps, r.imageStep(r.started), r.rayStep(r.started))
	}
	var workers []string
	for _, n := range r.started {
		if n == r.head.Node {
			steps = append(steps, r.startStep([]string{n}))
		} else {
			workers = append(workers, n)
		}
	}
	if len(workers) > 0 {
		steps = append(steps, r.gcsStep(workers), r.startStep(workers))
	}
	return append(steps, r.verifyStep())
}

// removalsByNode groups removals by node, nodes sorted.
func removalsByNode(rems []Removal) ([]string, map[string][]Removal) {
	m := map[string][]Removal{}
	for _, rm := range rems {
		m[rm.Node] = append(m[rm.Node], rm)
	}
	return slices.Sorted(maps.Keys(m)), m
}

// removeStep stops and removes the containers that must go. It re-reads
// each container's labels on the host first and refuses, before removing
// anything, when one was not created by rayform for this project and
// resource.
func (r *clusterRun) removeStep(rems []Removal) apply.Step {
	nodes, byNode := removalsByNode(rems)
	var (
		mu      sync.Mutex
		present map[Removal]map[string]string
	)
	names := map[string]bool{}
	for _, rm := range rems {
		names[rm.Container] = true
	}
	inspect := func(ctx context.Context) error {
		mu.Lock()
		present = map[Removal]map[string]string{}
		mu.Unlock()
		return r.e.ForEach(ctx, nodes, func(ctx context.Context, node string) error {
			for _, rm := range byNode[node] {
				labels, found, err := containerLabels(ctx, r.e, node, rm.Container)
				if err != nil {
					return err
				}
				if found {
					mu.Lock()
					present[rm] = labels
					mu.Unlock()
				}
			}
			return nil
		})
	}
	return apply.Step{
		Name: fmt.Sprintf("remove container %s on %s", strings.Join(hostenv.SortedSet(names), ", "), hostenv.DescribeNodes(nodes)),
		Check: func(ctx context.Context) (bool, error) {
			if err := inspect(ctx); err != nil {
				return false, err
			}
			return len(present) == 0, nil
		},
		Run: func(ctx context.Context, progress func(string)) error {
			if present == nil {
				if err := inspect(ctx); err != nil {
					return err
				}
			}
			var refused []error
			for _, rm := range rems {
				if labels, ok := present[rm]; ok && !ownedBy(labels, r.e.Project, r.w.Address) {
					refused = append(refused, foreignError(rm, labels, r.e.Project, r.w.Address))
				}
			}
			if len(refused) > 0 {
				return errors.Join(refused...)
			}
			done := hostenv.NewDoneSet()
			err := r.e.ForEach(ctx, nodes, func(ctx context.Context, node string) error {
				for _, rm := range byNode[node] {
					if _, ok := present[rm]; !ok {
						continue
					}
					if err := removeContainer(ctx, r.e, rm); err != nil {
						return err
					}
					done.Add(node, fmt.Sprintf("removed %s on %s", rm.Container, node))
				}
				return nil
			})
			done.Report(progress)
			return err
		},
		Verify: func(ctx context.Context) error {
			return r.e.ForEach(ctx, nodes, func(ctx context.Context, node string) error {
				for _, rm := range byNode[node] {
					_, found, err := containerLabels(ctx, r.e, node, rm.Container)
					if err != nil {
						return err
					}
					if found {
						return fmt.Errorf("container %s still exists on %s after docker rm", rm.Container, node)
					}
				}
				return nil
			})
		},
	}
}

// removeContainer stops a container, letting Ray shut down, and removes it.
func removeContainer(ctx context.Context, e *hostenv.StepEnv, rm Removal) error {
	if _, err := e.Mutate(ctx, rm.Node, "docker", "stop", "-t", strconv.Itoa(stopGrace), rm.Container); err != nil && !hostenv.IsNoSuch(err) {
		return fmt.Errorf("stopping %s on %s: %w", rm.Container, rm.Node, err)
	}
	if _, err := e.Mutate(ctx, rm.Node, "docker", "rm", rm.Container); err != nil && !hostenv.IsNoSuch(err) {
		return fmt.Errorf("removing %s on %s: %w", rm.Container, rm.Node, err)
	}
	// The serve records the container bind-mounted from the host go with
	// it. Best effort: the files belong to the container's user, so an SSH
	// user other than root may not remove them; a container of the same
	// name started later clears them at its start anyway.
	_, _ = e.Mutate(ctx, rm.Node, "rm", "-rf", "--", servedir.Host(e.Project, rm.Node, rm.Container))
	return nil
}

// containerLabels reads a container's labels; found is false when there is
// no container of that name.
func containerLabels(ctx context.Context, e *hostenv.StepEnv, node, container string) (map[string]string, bool, error) {
	res, err := e.Read(ctx, node, "docker", "inspect", "--type", "container", "--format", "{{json .Config.Labels}}", container)
	if err != nil {
		if hostenv.IsNoSuch(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("inspecting %s on %s: %w", container, node, err)
	}
	labels := map[string]string{}
	if out := strings.TrimSpace(string(res.Stdout)); out != "" && out != "null" {
		if err := json.Unmarshal([]byte(out), &labels); err != nil {
			return nil, false, fmt.Errorf("inspecting %s on %s: labels %q: %w", container, node, out, err)
		}
	}
	return labels, true, nil
}

// ownedBy reports whether labels mark a container rayform created for
// resource in project.
func ownedBy(labels map[string]string, project, resource string) bool {
	return labels[LabelManaged] == "true" && labels[LabelProject] == project && labels[LabelResource] == resource
}

// foreignError refuses to touch a container rayform did not create.
func foreignError(rm Removal, labels map[string]string, project, resource string) error {
	show := func(k string) string {
		if v, ok := labels[k]; ok {
			return strconv.Quote(v)
		}
		return "(unset)"
	}
	return fmt.Errorf("refusing to remove container %s on %s: it is not rayform's container of %s in project %q "+
		"(labels %s=%s, %s=%s, %s=%s); rayform never touches a container it did not create. "+
		"Fix: remove it yourself if it is a leftover (ssh %s docker rm -f %s), or set container_name on the cluster",
		rm.Container, rm.Node, resource, project, LabelManaged, show(LabelManaged), LabelProject, show(LabelProject),
		LabelResource, show(LabelResource), rm.Node, rm.Container)
}

// imageStep makes the image present on every node, pulling where missing
// with docker's progress as progress lines.
func (r *clusterRun) imageStep(nodes []string) apply.Step {
	var (
		mu      sync.Mutex
		missing map[string]bool
	)
	image := r.head.Image
	check := func(ctx context.Context) error {
		mu.Lock()
		missing = map[string]bool{}
		mu.Unlock()
		return r.e.ForEach(ctx, nodes, func(ctx context.Context, node string) error {
			ok, err := hasImage(ctx, r.e, node, r.spec[node].Image)
			if err == nil && !ok {
				mu.Lock()
				missing[node] = true
				mu.Unlock()
			}
			return err
		})
	}
	return apply.Step{
		Name: fmt.Sprintf("image %s on %s", image, hostenv.DescribeNodes(nodes)),
		Check: func(ctx context.Context) (bool, error) {
			if err := check(ctx); err != nil {
				return false, err
			}
			return len(missing) == 0, nil
		},
		Run: func(ctx context.Context, progress func(string)) error {
			if missing == nil {
				if err := check(ctx); err != nil {
					return err
				}
			}
			toPull := hostenv.SortedSet(missing)
			report := hostenv.SyncProgress(progress, len(toPull) > 1)
			return r.e.ForEach(ctx, toPull, func(ctx context.Context, node string) error {
				return pull(ctx, r.e, node, r.spec[node].Image, func(msg string) { report(node, msg) }, r.dctx())
			})
		},
		Verify: func(ctx context.Context) error {
			return r.e.ForEach(ctx, hostenv.SortedSet(missing), func(ctx context.Context, node string) error {
				ok, err := hasImage(ctx, r.e, node, r.spec[node].Image)
				if err == nil && !ok {
					err = fmt.Errorf("image %s is still missing on %s after docker pull", r.spec[node].Image, node)
				}
				return err
			})
		},
	}
}

// hasImage reports whether image is present on node.
func hasImage(ctx context.Context, e *hostenv.StepEnv, node, image string) (bool, error) {
	_, err := e.Read(ctx, node, "docker", "image", "inspect", "--format", "{{.Id}}", image)
	switch {
	case err == nil:
		return true, nil
	case hostenv.IsNoSuch(err):
		return false, nil
	}
	return false, fmt.Errorf("inspecting image %s on %s: %w", image, node, err)
}

// pull runs docker pull, turning its output into throttled progress lines;
// a failure is diagnosed from that output.
func pull(ctx context.Context, e *hostenv.StepEnv, node, image string, progress func(string), dctx diagnose.Context) error {
	p := &pullProgress{image: image, layers: map[string]bool{}, progress: progress,
		throttle: hostenv.NewThrottle(e.Now, e.ProgressInterval)}
	w := hostenv.NewLineWriter(p.line)
	res, err := e.Run(ctx, node, transport.Cmd{Argv: []string{"docker", "pull", image}, Mutating: true, Stdout: w, Stderr: w})
	if err != nil {
		if hostenv.ExitCode(err) < 0 || ctx.Err() != nil {
			return fmt.Errorf("docker pull %s on %s: %w", image, node, err)
		}
		text := append(append([]byte(nil), res.Stdout...), res.Stderr...)
		failure := fmt.Errorf("docker pull %s on %s failed: %w", image, node, err)
		if d, ok := mirrorVerdict(ctx, e, node, image, text, dctx); ok {
			return &hostenv.DiagnosedError{Err: failure, Diagnosis: d}
		}
		return hostenv.Diagnosed(failure, []diagnose.Log{{Host: node, Source: "docker pull", Text: text}}, dctx)
	}
	return nil
}

// registryVerdictRE matches a pull failure in which a registry itself
// answered (the image or the repository does not exist, or access was
// denied): that answer is the cause, and no mirror needs asking.
var registryVerdictRE = regexp.MustCompile(`manifest unknown|not found|pull access denied|denied|unauthorized|toomanyrequests|no matching manifest`)

// manifestAccept is what docker pull accepts from a manifest endpoint.
const manifestAccept = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, " +
	"application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"

// mirrorVerdict asks the registry mirrors of node's dockerd for image's
// manifest when docker pull of a Docker Hub image failed without a
// registry's verdict. docker tries its mirrors first and then Docker Hub,
// and reports only the last try: on a host that cannot reach Docker Hub a
// mistyped name reads "registry-1.docker.io is unreachable" although the
// mirror answered that the image does not exist. ok is true when a mirror
// said so; the diagnosis then quotes its answer.
func mirrorVerdict(ctx context.Context, e *hostenv.StepEnv, node, image string, pullOut []byte, dctx diagnose.Context) (diagnose.Diagnosis, bool) {
	ref, err := imageref.Parse(image)
	if err != nil || ref.Domain != imageref.DockerHub || registryVerdictRE.Match(pullOut) {
		return diagnose.Diagnosis{}, false
	}
	res, err := e.Read(ctx, node, "docker", "info", "--format", "{{json .RegistryConfig.Mirrors}}")
	if err != nil {
		return diagnose.Diagnosis{}, false
	}
	var mirrors []string
	if json.Unmarshal(bytes.TrimSpace(res.Stdout), &mirrors) != nil {
		return diagnose.Diagnosis{}, false
	}
	for _, m := range mirrors {
		m = strings.TrimRight(m, "/")
		if !strings.HasPrefix(m, "http://") && !strings.HasPrefix(m, "https://") {
			continue
		}
		url := m + "/v2/" + ref.Path + "/manifests/" + ref.ManifestRef()
		res, err := e.Read(ctx, node, "curl", "-sS", "-m", "10", "-H", "Accept: "+manifestAccept, "-w", "\n%{http_code}", url)
		if err != nil {
			continue
		}
		body, code := hostenv.HTTPAnswer(res.Stdout)
		if code != "404" {
			continue
		}
		var answer struct {
			Errors []struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"errors"`
		}
		what := "HTTP 404"
		if json.Unmarshal(body, &answer) == nil && len(answer.Errors) > 0 {
			what = "HTTP 404 " + answer.Errors[0].Code + ": " + answer.Errors[0].Message
		}
		cluster := dctx.Cluster
		if cluster == "" {
			cluster = "the ray_cluster"
		}
		missing := ref.Path + ":" + ref.ManifestRef()
		if ref.Digest != "" {
			missing = ref.Path + "@" + ref.Digest
		}
		pullLine := strings.TrimSpace(string(pullOut))
		if i := strings.LastIndexByte(pullLine, '\n'); i >= 0 {
			pullLine = pullLine[i+1:]
		}
		return diagnose.Diagnosis{
			Cause: diagnose.ImagePull,
			Title: fmt.Sprintf("image %s does not exist: the registry mirror %s answered %s", image, m, what),
			Evidence: []diagnose.Evidence{
				{Host: node, Source: "GET " + url, Line: strings.TrimSpace(string(body)), LineNo: 1},
				{Host: node, Source: "docker pull", Line: pullLine, LineNo: 1},
			},
			Explanation: fmt.Sprintf("docker on %s asks its registry mirror %s first: it has no %s. docker then tried Docker Hub, which %s cannot reach, and reported only that last try.", node, m, missing, node),
			Fix:         fmt.Sprintf("Check image on %s: %s", cluster, mirrorTags(ctx, e, node, m, ref.Path)),
		}, true
	}
	return diagnose.Diagnosis{}, false
}

// mirrorTags says what the mirror m has of repository repo, for the fix of
// an image it does not have: the repository's tags (some of them), or that
// it has no such repository (a typo in the name, not in the tag).
func mirrorTags(ctx context.Context, e *hostenv.StepEnv, node, m, repo string) string {
	url := m + "/v2/" + repo + "/tags/list"
	res, err := e.Read(ctx, node, "curl", "-sS", "-m", "10", "-w", "\n%{http_code}", url)
	if err != nil {
		return "a typo in the name or the tag?"
	}
	body, code := hostenv.HTTPAnswer(res.Stdout)
	var list struct {
		Tags []string `json:"tags"`
	}
	switch {
	case code == "404":
		return fmt.Sprintf("the mirror %s has no repository %s at all (a typo in the name?).", m, repo)
	case code != "200" || json.Unmarshal(body, &list) != nil || len(list.Tags) == 0:
		return "a typo in the name or the tag?"
	}
	tags := slices.Sorted(slices.Values(list.Tags))
	shown := tags[:min(len(tags), 10)]
	more := ""
	if len(tags) > len(shown) {
		more = fmt.Sprintf(" (and %d more)", len(tags)-len(shown))
	}
	return fmt.Sprintf("the mirror %s has %s with the tags %s%s (a typo in the tag?).", m, repo, strings.Join(shown, ", "), more)
}

// layerRE matches docker's per-layer status lines ("2d473b07cdd5: Pull
// complete").
var layerRE = regexp.MustCompile(`^([0-9a-f]{12}): (.+)$`)

// pullProgress turns docker pull's non-TTY output into "pulling IMAGE: 3/7
// layers" lines, throttled, plus its final Status line.
type pullProgress struct {
	image    string
	layers   map[string]bool // layer id → done
	progress func(string)
	throttle hostenv.Throttle
}

func (p *pullProgress) line(l string) {
	if m := layerRE.FindStringSubmatch(l); m != nil {
		complete := m[2] == "Pull complete" || m[2] == "Already exists"
		p.layers[m[1]] = p.layers[m[1]] || complete
		if !complete {
			return
		}
		done := 0
		for _, d := range p.layers {
			if d {
				done++
			}
		}
		if p.throttle.Allow("layers", done == len(p.layers)) {
			p.progress(fmt.Sprintf("pulling %s: %d/%d layers", p.image, done, len(p.layers)))
		}
		return
	}
	if strings.HasPrefix(l, "Status: ") {
		p.progress(l)
	}
}

// rayStep checks that the image has a ray executable, in a throwaway
// container labelled as rayform's.
func (r *clusterRun) rayStep(nodes []string) apply.Step {
	return apply.Step{
		Name: fmt.Sprintf("check that %s has ray on %s", r.head.Image, hostenv.DescribeNodes(nodes)),
		Run: func(ctx context.Context, progress func(string)) error {
			return r.e.ForEach(ctx, nodes, func(ctx context.Context, node string) error {
				return checkRay(ctx, r.e, node, r.spec[node].Image, r.dctx())
			})
		},
	}
}

// checkRay runs `command -v ray` in image on node.
func checkRay(ctx context.Context, e *hostenv.StepEnv, node, image string, dctx diagnose.Context) error {
	res, err := e.Mutate(ctx, node, "docker", "run", "--rm",
		"--label", LabelManaged+"=true", "--label", LabelProject+"="+e.Project,
		"--entrypoint", "sh", image, "-c", "command -v ray")
	if err == nil && strings.TrimSpace(string(res.Stdout)) != "" {
		return nil
	}
	code := hostenv.ExitCode(err)
	if err == nil || ((code == 1 || code == 127) && !strings.Contains(string(res.Stderr), "docker:") &&
		!strings.Contains(string(res.Stderr), "Error response from daemon")) {
		return rayMissingError(node, image, dctx.Cluster)
	}
	if code < 0 {
		return fmt.Errorf("checking for ray in %s on %s: %w", image, node, err)
	}
	text := append(append([]byte(nil), res.Stdout...), res.Stderr...)
	return hostenv.Diagnosed(fmt.Errorf("checking for ray in %s on %s: %w", image, node, err),
		[]diagnose.Log{{Host: node, Source: "docker run " + image, Text: text}}, dctx)
}

// rayMissingError says that the image has no ray, and how to get one.
func rayMissingError(node, image, cluster string) error {
	return fmt.Errorf("Ray missing from the image %s (on %s): `command -v ray` finds no ray executable, so `ray start` cannot run in it. "+
		"Recent vLLM images no longer ship Ray.\n"+
		"Fix: use an image that ships Ray, or extend this one and set image on %s to the result (the same image on every node):\n"+
		"  FROM %s\n  RUN pip install 'ray[default]'", image, node, cluster, image)
}

// startStep starts the containers of nodes (the head alone, or the
// workers in parallel). A container already running the declared spec
// is left alone. The head's start is verified from Ray's node table.
func (r *clusterRun) startStep(nodes []string) apply.Step {
	head := len(nodes) == 1 && nodes[0] == r.head.Node
	name := "start ray head on " + r.head.Node
	if !head {
		name = "start ray workers on " + hostenv.DescribeNodes(nodes)
	}
	var (
		mu      sync.Mutex
		pending map[string]bool
	)
	check := func(ctx context.Context) error {
		mu.Lock()
		pending = map[string]bool{}
		mu.Unlock()
		return r.e.ForEach(ctx, nodes, func(ctx context.Context, node string) error {
			ok, err := r.running(ctx, node)
			if err == nil && !ok {
				mu.Lock()
				pending[node] = true
				mu.Unlock()
			}
			return err
		})
	}
	step := apply.Step{
		Name: name,
		Check: func(ctx context.Context) (bool, error) {
			if err := check(ctx); err != nil {
				return false, err
			}
			return len(pending) == 0, nil
		},
		Run: func(ctx context.Context, progress func(string)) error {
			if pending == nil {
				if err := check(ctx); err != nil {
					return err
				}
			}
			done := hostenv.NewDoneSet()
			err := r.e.ForEach(ctx, hostenv.SortedSet(pending), func(ctx context.Context, node string) error {
				id, err := r.start(ctx, node)
				if err != nil {
					return err
				}
				r.e.Checks.ContainerStarted(node, r.spec[node].Name)
				done.Add(node, fmt.Sprintf("started %s on %s (%s)", r.spec[node].Name, node, shortID(id)))
				return nil
			})
			done.Report(progress)
			return err
		},
	}
	if head {
		step.Verify = r.waitHead
	}
	return step
}

// running reports whether node already runs the declared container; an
// existing container that is not it is an error (the plan should have
// removed it).
func (r *clusterRun) running(ctx context.Context, node string) (bool, error) {
	spec := r.spec[node]
	res, err := r.e.Read(ctx, node, "docker", "inspect", "--type", "container", "--format", "{{.State.Running}} {{json .Config.Labels}}", spec.Name)
	if err != nil {
		if hostenv.IsNoSuch(err) {
			return false, nil
		}
		return false, fmt.Errorf("inspecting %s on %s: %w", spec.Name, node, err)
	}
	state, raw, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	labels := map[string]string{}
	_ = json.Unmarshal([]byte(raw), &labels)
	rm := Removal{Node: node, Container: spec.Name}
	if !ownedBy(labels, r.e.Project, r.w.Address) {
		return false, foreignError(rm, labels, r.e.Project, r.w.Address)
	}
	if current, _ := spec.Current(labels[LabelSpecHash]); state == "true" && current {
		return true, nil
	}
	return false, fmt.Errorf("container %s already exists on %s (running=%s, spec hash %s, want %s) though the plan did not remove it; run rayform plan again",
		spec.Name, node, state, kit.OrNone(labels[LabelSpecHash]), spec.Hash())
}

// start runs the container and returns its id. The secret env, if any,
// reaches the container through its own tmpfs (see RunCmd): no file on the
// host's disk and no Docker configuration ever holds it, so no path
// (failure, interrupt, kill -9) can leave one behind.
func (r *clusterRun) start(ctx context.Context, node string) (string, error) {
	spec := r.spec[node]
	if spec.AuthOn() && spec.AuthToken == "" {
		// The lock holder makes the token before anything is observed
		// for apply: a head that did not answer with it cannot be given
		// a container that would start Ray without it.
		return "", fmt.Errorf("%s on %s: Ray's token authentication is on, but the deployment's token (~/.rayform/locks/%s on the head) was not read; run rayform apply again", r.w.Address, node, observe.BearerFile(secretKeyName(r.e.Project, r.c.Name)))
	}
	cmd := spec.RunCmd(r.e.Project)
	cmd.Mutating = true
	res, err := r.e.Run(ctx, node, cmd)
	if err != nil {
		if hostenv.ExitCode(err) < 0 || ctx.Err() != nil {
			return "", fmt.Errorf("docker run %s on %s: %w", spec.Name, node, err)
		}
		text := append(append([]byte(nil), res.Stdout...), res.Stderr...)
		return "", hostenv.Diagnosed(fmt.Errorf("docker run %s on %s failed: %w", spec.Name, node, err),
			[]diagnose.Log{{Host: node, Source: "docker run", Text: text}}, r.dctx())
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// waitHead polls Ray's node table until the head is ALIVE; registered
// under another address than its fabric one is an error naming both.
func (r *clusterRun) waitHead(ctx context.Context) error {
	want := r.head.NodeIP
	last := "no answer yet"
	err := r.e.PollUntil(ctx, r.e.RayReadyTimeout, func(ctx context.Context) (bool, error) {
		rows, err := r.rayNodes(ctx)
		if err != nil {
			if hostenv.IsNoSuch(err) {
				return false, fmt.Errorf("the ray head container %s on %s stopped: %w", r.head.Name, r.head.Node, err)
			}
			last = err.Error()
			return false, nil
		}
		for _, n := range rows {
			if n.IsHead && n.State == "ALIVE" {
				if want != "" && n.NodeIP != want {
					return true, fmt.Errorf("the ray head on %s registered in Ray's node table as %s, not its fabric address %s: "+
						"vLLM's c10d master and the workers would use %s", r.head.Node, n.NodeIP, want, n.NodeIP)
				}
				return true, nil
			}
		}
		last = "Ray's node table has no ALIVE head"
		return false, nil
	})
	if errors.Is(err, hostenv.ErrTimedOut) {
		err = fmt.Errorf("the ray head on %s is not ALIVE in Ray's node table after %s (last: %s)", r.head.Node, r.e.RayReadyTimeout, last)
	}
	if err != nil {
		return r.diagnose(ctx, err)
	}
	return nil
}

// gcsStep checks that each worker opens a TCP connection to the head's GCS
// on its fabric address before the worker starts.
func (r *clusterRun) gcsStep(workers []string) apply.Step {
	addr := r.c.HeadAddr
	if addr == "" {
		addr = r.head.HeadAddr
	}
	return apply.Step{
		Name: fmt.Sprintf("reach the GCS at %s from %s", addr, hostenv.DescribeNodes(workers)),
		Run: func(ctx context.Context, progress func(string)) error {
			host, port, ok := splitHostPort(addr)
			if !ok {
				return fmt.Errorf("the head's GCS address %q is not ip:port", addr)
			}
			return r.e.ForEach(ctx, workers, func(ctx context.Context, node string) error {
				res, err := r.e.Run(ctx, node, transport.Cmd{Script: tcpScript(host, port)})
				if err != nil {
					msg := strings.TrimSpace(string(res.Stderr))
					if msg == "" {
						msg = err.Error()
					}
					return fmt.Errorf("%s cannot open a TCP connection to the ray head's GCS at %s (%s): %s\n"+
						"Fix: check that %s reaches %s over the fabric (ip route get %s on %s) and that no firewall on %s blocks port %s",
						node, addr, r.head.Node, msg, node, host, host, node, r.head.Node, port)
				}
				return nil
			})
		},
	}
}

// tcpScript opens and closes a TCP connection to host:port within 3
// seconds: bash's /dev/tcp under timeout(1), else nc -z.
func tcpScript(host, port string) string {
	h, p := shell.Quote(host), shell.Quote(port)
	return "if command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then " +
		"timeout 3 bash -c 'exec 3<>\"/dev/tcp/$1/$2\"' rayform " + h + " " + p + "; " +
		"elif command -v nc >/dev/null 2>&1; then nc -z -w 3 " + h + " " + p + "; " +
		"else echo 'rayform: no way to test TCP (need bash and timeout, or nc)' >&2; exit 127; fi"
}

func splitHostPort(addr string) (string, string, bool) {
	i := strings.LastIndex(addr, ":")
	if i <= 0 || i == len(addr)-1 {
		return "", "", false
	}
	return strings.Trim(addr[:i], "[]"), addr[i+1:], true
}

// verifyStep reads Ray's node table until exactly the declared nodes are
// ALIVE, each under its fabric address with its GPUs.
func (r *clusterRun) verifyStep() apply.Step {
	return apply.Step{
		Name:   "verify Ray's node table on " + r.head.Node,
		Verify: r.verifyTable,
	}
}

func (r *clusterRun) verifyTable(ctx context.Context) error {
	var last []string
	lastErr := ""
	err := r.e.PollUntil(ctx, r.e.RayReadyTimeout, func(ctx context.Context) (bool, error) {
		rows, err := r.rayNodes(ctx)
		if err != nil {
			if hostenv.IsNoSuch(err) {
				return false, fmt.Errorf("the ray head container %s on %s is not running: %w", r.head.Name, r.head.Node, err)
			}
			lastErr = err.Error()
			return false, nil
		}
		lastErr = ""
		last = reasons(judgeRayTable(r.c.Specs, rows))
		if len(last) == 0 {
			return true, nil
		}
		// A started worker missing from the table may have exited: fail now.
		alive := map[string]bool{}
		for _, n := range rows {
			if n.State == "ALIVE" {
				alive[n.NodeIP] = true
			}
		}
		for _, node := range r.started {
			s := r.spec[node]
			if node == r.head.Node || s.NodeIP == "" || alive[s.NodeIP] {
				continue
			}
			if err := containerRunning(ctx, r.e, node, s.Name); err != nil {
				return false, err
			}
		}
		return false, nil
	})
	if errors.Is(err, hostenv.ErrTimedOut) {
		msg := fmt.Sprintf("Ray's node table on %s does not match the declaration after %s:", r.head.Node, r.e.RayReadyTimeout)
		for _, d := range last {
			msg += "\n  - " + d
		}
		if lastErr != "" {
			msg += "\n  - ray list nodes: " + lastErr
		}
		err = errors.New(msg)
	}
	if err != nil {
		return r.diagnose(ctx, err)
	}
	return nil
}

// containerRunning returns an error when the container does not run.
func containerRunning(ctx context.Context, e *hostenv.StepEnv, node, container string) error {
	res, err := e.Read(ctx, node, "docker", "inspect", "--type", "container", "--format", "{{.State.Running}} {{.State.ExitCode}}", container)
	if err != nil {
		if hostenv.IsNoSuch(err) {
			return fmt.Errorf("container %s on %s is gone", container, node)
		}
		return fmt.Errorf("inspecting %s on %s: %w", container, node, err)
	}
	running, code, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	if running != "true" {
		return fmt.Errorf("container %s on %s exited (exit code %s)", container, node, code)
	}
	return nil
}

// rayNodes reads Ray's node table inside the head container.
func (r *clusterRun) rayNodes(ctx context.Context) ([]RayNode, error) {
	res, err := r.e.Run(ctx, r.head.Node, transport.Cmd{
		Argv:    []string{"docker", "exec", r.head.Name, "ray", "list", "nodes", "--format", "json", "--limit", "1000"},
		Timeout: rayListTimeout,
	})
	if err != nil {
		return nil, err
	}
	return ParseRayNodeList(res.Stdout)
}

// diagnose reads the head's and the started workers' container logs and
// returns err with the classified root cause.
func (r *clusterRun) diagnose(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		// Cancelled (an interrupt, a lost lock): no failure to classify.
		return err
	}
	srcs := []hostenv.LogSource{{Node: r.head.Node, Container: r.head.Name, Source: "ray head container"}}
	for _, node := range r.started {
		if node != r.head.Node {
			srcs = append(srcs, hostenv.LogSource{Node: node, Container: r.spec[node].Name, Source: "ray worker container"})
		}
	}
	logs := r.e.ContainerLogs(ctx, srcs)
	d := r.dctx()
	for _, l := range logs {
		// Ray's GCS could not bind its port on the head: ask who holds it.
		if l.Host == r.head.Node && (bytes.Contains(l.Text, []byte("Failed to bind to address")) || bytes.Contains(l.Text, []byte("already in use"))) {
			if holder := hostenv.PortHolder(ctx, r.e, r.head.Node, r.head.Port); holder != "" {
				d.PortHolders = map[int]string{r.head.Port: holder}
			}
			break
		}
	}
	return hostenv.Diagnosed(err, logs, d)
}

// dctx is the diagnose context with this cluster's own facts filled in.
func (r *clusterRun) dctx() diagnose.Context {
	d := r.e.Diagnose
	if d.Cluster == "" {
		d.Cluster = r.w.Address
	}
	if d.Image == "" {
		d.Image = r.head.Image
	}
	if d.HeadNode == "" {
		d.HeadNode = r.head.Node
	}
	if d.RayPort == 0 {
		d.RayPort = r.head.Port
	}
	if d.NodeAddrs == nil {
		d.NodeAddrs = map[string]string{}
		for _, s := range r.c.Specs {
			if s.NodeIP != "" {
				d.NodeAddrs[s.Node] = s.NodeIP
			}
		}
	}
	return d
}
