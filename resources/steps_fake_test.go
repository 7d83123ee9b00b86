package resources

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/hostenv"
)

// The -update flag may also be declared by another test file of the
// package; register it only once.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// golden compares got with testdata/steps/<name>.golden (from the module
// root), rewriting it with -update.
func goldenSteps(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("..", "testdata", "steps", name+".golden")
	if updatingGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// stepsClock advances only when something sleeps.
type stepsClock struct {
	mu  sync.Mutex
	now time.Time
}

func newStepsClock() *stepsClock {
	return &stepsClock{now: time.Date(2026, 4, 8, 23, 30, 0, 0, time.UTC)}
}

func (c *stepsClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepsClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// fakeContainer is one container on a fake host.
type fakeContainer struct {
	labels   map[string]string
	running  bool
	exitCode int
	logs     string
	// joinPolls is how many node-table reads miss this node after start.
	joinPolls int
}

// fakeServe is the vllm serve process in a fake head container.
type fakeServe struct {
	exists bool // pid file present
	alive  bool
	// chunks are appended to the log, one per follow poll; die makes the
	// process exit once they are all out.
	chunks [][]byte
	log    []byte
	die    bool
	// ignoreTerm keeps the process alive after SIGTERM.
	ignoreTerm bool
	envFile    []byte
}

// fakeHost simulates docker, Ray's CLI and curl on one node.
type fakeHost struct {
	name       string
	fake       *transporttest.Fake
	images     map[string]bool
	containers map[string]*fakeContainer
	noRay      bool
	gcsClosed  bool
	gpus       float64
	// rayIP overrides the address Ray registers the node under.
	rayIP string
	serve fakeServe
	// models is /v1/models' body.
	models string
	// ss is what `ss -Hltnp` prints; vllmVersion what `vllm --version` does.
	ss, vllmVersion string
	// headExits, when set, is the log of a head container that exits at once.
	headExits string
}

// fakeLab is a set of fake hosts sharing one Ray cluster.
type fakeLab struct {
	t     *testing.T
	mu    sync.Mutex
	hosts map[string]*fakeHost
	clock *stepsClock
}

const (
	stepsProject = "lab"
	stepsImage   = "registry.lab:5000/vllm-ray:0.17"
	stepsPull    = `0.17: Pulling from vllm-ray
2d473b07cdd5: Pulling fs layer
5a3ea8efae5d: Pulling fs layer
2d473b07cdd5: Verifying Checksum
2d473b07cdd5: Download complete
5a3ea8efae5d: Download complete
2d473b07cdd5: Pull complete
5a3ea8efae5d: Pull complete
Digest: sha256:1b2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff001
Status: Downloaded newer image for registry.lab:5000/vllm-ray:0.17
registry.lab:5000/vllm-ray:0.17
`
)

func newFakeLab(t *testing.T, nodes ...string) *fakeLab {
	l := &fakeLab{t: t, hosts: map[string]*fakeHost{}, clock: newStepsClock()}
	for _, n := range nodes {
		h := &fakeHost{name: n, fake: transporttest.NewFake(t, n), images: map[string]bool{stepsImage: true},
			containers: map[string]*fakeContainer{}, gpus: 1}
		h.fake.Expect(transporttest.Any()).Do(func(ctx context.Context, cmd transport.Cmd, stdin []byte) (transport.Result, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.handle(h, cmd, stdin), nil
		})
		l.hosts[n] = h
	}
	return l
}

// env returns a StepEnv over the lab's hosts with a fake clock.
func (l *fakeLab) env() *hostenv.StepEnv {
	conns := map[string]transport.Conn{}
	for n, h := range l.hosts {
		conns[n] = h.fake
	}
	return &hostenv.StepEnv{Conns: conns, Project: stepsProject, Poll: time.Second, RayReadyTimeout: 30 * time.Second,
		StopTimeout: 5 * time.Second, HTTPReadyTimeout: 10 * time.Second, Now: l.clock.Now, Sleep: l.clock.Sleep}
}

// run puts containers of specs on their hosts as if a previous apply had.
func (l *fakeLab) run(specs ...cluster.ContainerSpec) {
	for _, s := range specs {
		l.hosts[s.Node].containers[s.Name] = &fakeContainer{labels: s.Labels(stepsProject), running: true}
	}
}

func fakeOK(out string) transport.Result { return transport.Result{Stdout: []byte(out)} }

func fakeFail(code int, stderr string) transport.Result {
	return transport.Result{ExitCode: code, Stderr: []byte(stderr)}
}

var (
	tailOffsetRE = regexp.MustCompile(`tail -c \+(\d+)`)
	killRE       = regexp.MustCompile(`^kill -(TERM|KILL) `)
)

// handle answers one command as the host would.
func (l *fakeLab) handle(h *fakeHost, cmd transport.Cmd, stdin []byte) transport.Result {
	a := cmd.Argv
	if cmd.Script != "" {
		return l.script(h, cmd.Script)
	}
	at := func(i int) string {
		if i < len(a) {
			return a[i]
		}
		return ""
	}
	switch {
	case at(0) == "rm":
		return fakeOK("")
	case at(0) == "id" && at(1) == "-u":
		return fakeOK("1000\n")
	case at(0) == "curl":
		return l.curl(h, a)
	case at(0) == "ss":
		return fakeOK(h.ss)
	case at(0) != "docker":
		return fakeFail(127, a[0]+": not found")
	case at(1) == "inspect":
		name := a[len(a)-1]
		c := h.containers[name]
		if c == nil {
			return fakeFail(1, "Error: No such container: "+name)
		}
		labels, _ := json.Marshal(c.labels)
		switch a[5] {
		case "{{json .Config.Labels}}":
			return fakeOK(string(labels) + "\n")
		case "{{.State.Running}} {{json .Config.Labels}}":
			return fakeOK(fmt.Sprintf("%v %s\n", c.running, labels))
		case "{{.State.Running}} {{.State.ExitCode}}":
			return fakeOK(fmt.Sprintf("%v %d\n", c.running, c.exitCode))
		}
	case at(1) == "stop":
		if c := h.containers[at(4)]; c != nil {
			c.running = false
			return fakeOK(at(4) + "\n")
		}
		return fakeFail(1, "Error response from daemon: No such container: "+at(4))
	case at(1) == "rm":
		delete(h.containers, at(2))
		return fakeOK(at(2) + "\n")
	case at(1) == "image" && at(2) == "inspect":
		if h.images[a[len(a)-1]] {
			return fakeOK("sha256:1b2c3d4e5f60\n")
		}
		return fakeFail(1, "Error response from daemon: No such image: "+a[len(a)-1])
	case at(1) == "pull":
		h.images[at(2)] = true
		return fakeOK(stepsPull)
	case at(1) == "run" && at(2) == "--rm":
		if h.noRay {
			return fakeFail(1, "")
		}
		return fakeOK("/usr/local/bin/ray\n")
	case at(1) == "run" && at(2) == "-d":
		name := at(4)
		if h.containers[name] != nil {
			return fakeFail(125, "docker: Error response from daemon: Conflict. The container name \"/"+name+"\" is already in use.")
		}
		labels := map[string]string{}
		for i := range a {
			if a[i] == "--label" {
				k, v, _ := strings.Cut(a[i+1], "=")
				labels[k] = v
			}
		}
		join := 0
		if labels[cluster.LabelRole] == "worker" {
			join = 1
		}
		h.containers[name] = &fakeContainer{labels: labels, running: true, joinPolls: join,
			logs: "Local node IP: " + labels[cluster.LabelNodeIP] + "\n--------------------\nRay runtime started.\n--------------------\n"}
		if h.headExits != "" && labels[cluster.LabelRole] == "head" {
			c := h.containers[name]
			c.running, c.exitCode, c.logs = false, 1, h.headExits
		}
		return fakeOK("4f1c2b3a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a\n")
	case at(1) == "exec":
		return l.exec(h, a[2:], stdin)
	}
	l.t.Errorf("%s: fake host cannot answer %q", h.name, cmd.String())
	return fakeFail(2, "unexpected")
}

// script answers a shell script run on the host.
func (l *fakeLab) script(h *fakeHost, s string) transport.Result {
	switch {
	case strings.HasPrefix(s, "docker logs --tail 400 "):
		name := strings.TrimSuffix(strings.TrimPrefix(s, "docker logs --tail 400 "), " 2>&1")
		if c := h.containers[name]; c != nil {
			return fakeOK(c.logs)
		}
		return fakeFail(1, "Error response from daemon: No such container: "+name)
	case strings.Contains(s, "/dev/tcp/"):
		if h.gcsClosed {
			return fakeFail(124, "")
		}
		return fakeOK("")
	}
	l.t.Errorf("%s: fake host cannot answer script %q", h.name, s)
	return fakeFail(2, "unexpected")
}

// exec answers docker exec: Ray's CLI and the serve process.
func (l *fakeLab) exec(h *fakeHost, a []string, stdin []byte) transport.Result {
	detach, interactive := false, false
	for len(a) > 0 && strings.HasPrefix(a[0], "-") {
		switch a[0] {
		case "-d":
			detach = true
		case "-i":
			interactive = true
		case "-e":
			a = a[1:]
		}
		a = a[1:]
	}
	name, a := a[0], a[1:]
	c := h.containers[name]
	if c == nil {
		return fakeFail(1, "Error response from daemon: No such container: "+name)
	}
	if !c.running {
		return fakeFail(1, "Error response from daemon: container "+name+" is not running")
	}
	sv := &h.serve
	switch {
	case a[0] == "ray":
		return l.rayList()
	case a[0] == "rm":
		sv.exists = false
		return fakeOK("")
	case a[0] == "tail":
		return fakeOK(string(sv.log))
	case a[0] == "vllm" && len(a) > 1 && a[1] == "--version":
		return fakeOK(h.vllmVersion + "\n")
	case detach:
		sv.exists, sv.alive, sv.log = true, true, nil
		return fakeOK("")
	case interactive:
		sv.envFile = stdin
		return fakeOK("")
	}
	script := a[len(a)-1]
	if m := killRE.FindStringSubmatch(script); m != nil {
		if sv.alive && (m[1] == "KILL" || !sv.ignoreTerm) {
			sv.alive = false
		}
		return fakeOK("")
	}
	status := "none"
	switch {
	case !sv.exists && strings.Contains(script, "echo starting"):
		status = "starting"
	case sv.exists && sv.alive:
		status = "alive 4242"
	case sv.exists:
		status = "dead 4242"
	}
	m := tailOffsetRE.FindStringSubmatch(script)
	if m == nil {
		return fakeOK(status + "\n")
	}
	if sv.exists && sv.alive && len(sv.chunks) == 0 && sv.die {
		sv.alive = false
	}
	if len(sv.chunks) > 0 && sv.exists {
		sv.log = append(sv.log, sv.chunks[0]...)
		sv.chunks = sv.chunks[1:]
	}
	off, _ := strconv.Atoi(m[1])
	out := []byte(status + "\n")
	if off-1 <= len(sv.log) {
		out = append(out, sv.log[off-1:]...)
	}
	return fakeOK(string(out))
}

// rayList renders Ray's node table from the running containers.
func (l *fakeLab) rayList() transport.Result {
	type row struct {
		NodeID    string            `json:"node_id"`
		NodeIP    string            `json:"node_ip"`
		IsHead    bool              `json:"is_head_node"`
		State     string            `json:"state"`
		NodeName  string            `json:"node_name"`
		Resources map[string]any    `json:"resources_total"`
		Labels    map[string]string `json:"labels"`
	}
	rows := []row{}
	for _, n := range slices.Sorted(maps.Keys(l.hosts)) {
		h := l.hosts[n]
		for _, cn := range slices.Sorted(maps.Keys(h.containers)) {
			c := h.containers[cn]
			if !c.running || c.labels[cluster.LabelManaged] != "true" {
				continue
			}
			if c.joinPolls > 0 {
				c.joinPolls--
				continue
			}
			ip := c.labels[cluster.LabelNodeIP]
			if h.rayIP != "" {
				ip = h.rayIP
			}
			res := map[string]any{"CPU": 20.0, "memory": "85.123 GiB", "node:" + ip: 1.0}
			if h.gpus > 0 {
				res["GPU"] = h.gpus
			}
			rows = append(rows, row{NodeID: fmt.Sprintf("%056x", len(rows)+1), NodeIP: ip, IsHead: c.labels[cluster.LabelRole] == "head",
				State: "ALIVE", NodeName: ip, Resources: res, Labels: map[string]string{}})
		}
	}
	b, _ := json.Marshal(rows)
	return fakeOK(string(b) + "\n")
}

// curl answers the serve's HTTP endpoints.
func (l *fakeLab) curl(h *fakeHost, a []string) transport.Result {
	url := a[len(a)-1]
	switch {
	case !h.serve.alive:
		return transport.Result{ExitCode: 7, Stdout: []byte("000"), Stderr: []byte("curl: (7) Failed to connect to 127.0.0.1 port 8000 after 0 ms: Couldn't connect to server\n")}
	case strings.HasSuffix(url, "/health"):
		return fakeOK("200")
	case strings.HasSuffix(url, "/v1/models"):
		return fakeOK(h.models + "\n200")
	case strings.HasSuffix(url, "/v1/completions"):
		return fakeOK(`{"id":"cmpl-1","object":"text_completion","model":"qwen","choices":[{"index":0,"text":" Paris."}],"usage":{"prompt_tokens":5,"total_tokens":21,"completion_tokens":16}}` + "\n200 0.400000")
	}
	l.t.Errorf("%s: fake curl cannot answer %v", h.name, a)
	return fakeFail(22, "")
}

// transcript renders every host's calls, hosts sorted.
func (l *fakeLab) transcript() string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(l.hosts)) {
		fmt.Fprintf(&b, "== %s\n%s", n, l.hosts[n].fake.Transcript())
	}
	return b.String()
}

// calls returns every call of every host.
func (l *fakeLab) calls() []transporttest.Call {
	var out []transporttest.Call
	for _, n := range slices.Sorted(maps.Keys(l.hosts)) {
		out = append(out, l.hosts[n].fake.Calls()...)
	}
	return out
}

// stepHooks records what a walk reports.
type stepHooks struct {
	mu    sync.Mutex
	lines []string
}

func (h *stepHooks) add(s string) {
	h.mu.Lock()
	h.lines = append(h.lines, s)
	h.mu.Unlock()
}

func (h *stepHooks) ResourceStart(addr string, a plan.Action) {
	h.add(fmt.Sprintf("start %s (%s)", addr, a))
}
func (h *stepHooks) StepStart(addr, step string)   { h.add("step: " + step) }
func (h *stepHooks) StepSkipped(addr, step string) { h.add("skipped: " + step) }
func (h *stepHooks) Progress(addr, msg string)     { h.add("  " + msg) }
func (h *stepHooks) ResourceComplete(addr string, a plan.Action, _ time.Duration) {
	h.add(fmt.Sprintf("complete %s", addr))
}
func (h *stepHooks) ResourceErrored(addr string, a plan.Action, _ time.Duration, err error) {
	h.add(fmt.Sprintf("errored %s", addr))
}

// walk runs the steps of w through apply.Walk and returns the hook lines
// and the error.
func walkWork(t *testing.T, env *hostenv.StepEnv, w *Work) ([]string, error) {
	t.Helper()
	g := dag.New()
	g.Add(w.Address)
	h := &stepHooks{}
	err := apply.Walk(context.Background(), g, map[string]*apply.Resource{
		w.Address: {Address: w.Address, Action: w.Action, Steps: Steps(env, w)},
	}, h, apply.Options{})
	return h.lines, err
}
