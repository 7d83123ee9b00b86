package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/imageref"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/stepenv"
)

// hasImage reports whether image is present on node.
func hasImage(ctx context.Context, e *stepenv.StepEnv, node, image string) (bool, error) {
	_, err := e.Read(ctx, node, "docker", "image", "inspect", "--format", "{{.Id}}", image)
	switch {
	case err == nil:
		return true, nil
	case stepenv.IsNoSuch(err):
		return false, nil
	}
	return false, fmt.Errorf("inspecting image %s on %s: %w", image, node, err)
}

// pull runs docker pull, turning its output into throttled progress lines;
// a failure is diagnosed from that output.
func pull(ctx context.Context, e *stepenv.StepEnv, node, image string, progress func(string), dctx diagnose.Context) error {
	p := &pullProgress{image: image, layers: map[string]bool{}, progress: progress,
		throttle: stepenv.NewThrottle(e.Now, e.ProgressInterval)}
	w := stepenv.NewLineWriter(p.line)
	res, err := e.Run(ctx, node, transport.Cmd{Argv: []string{"docker", "pull", image}, Mutating: true, Stdout: w, Stderr: w})
	if err != nil {
		if stepenv.ExitCode(err) < 0 || ctx.Err() != nil {
			return fmt.Errorf("docker pull %s on %s: %w", image, node, err)
		}
		text := append(append([]byte(nil), res.Stdout...), res.Stderr...)
		failure := fmt.Errorf("docker pull %s on %s failed: %w", image, node, err)
		if d, ok := mirrorVerdict(ctx, e, node, image, text, dctx); ok {
			return &stepenv.DiagnosedError{Err: failure, Diagnosis: d}
		}
		return stepenv.Diagnosed(failure, []diagnose.Log{{Host: node, Source: "docker pull", Text: text}}, dctx)
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
func mirrorVerdict(ctx context.Context, e *stepenv.StepEnv, node, image string, pullOut []byte, dctx diagnose.Context) (diagnose.Diagnosis, bool) {
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
		body, code := stepenv.HTTPAnswer(res.Stdout)
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
func mirrorTags(ctx context.Context, e *stepenv.StepEnv, node, m, repo string) string {
	url := m + "/v2/" + repo + "/tags/list"
	res, err := e.Read(ctx, node, "curl", "-sS", "-m", "10", "-w", "\n%{http_code}", url)
	if err != nil {
		return "a typo in the name or the tag?"
	}
	body, code := stepenv.HTTPAnswer(res.Stdout)
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
	throttle stepenv.Throttle
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
