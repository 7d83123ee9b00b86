// Package steplab is a fake lab for the tests of the kinds' apply steps:
// hosts that answer docker, Ray's CLI, curl and the serve process as the
// steps expect (Lab), a clock that advances only when something sleeps,
// the walk of a resource's steps through engine/apply with its hook lines
// (Walk), and the golden files of the walks (Golden). Tests only.
package steplab

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
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/stepenv"
)

// Updating reports whether the test binary runs with -update (which the
// test package declares).
func Updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// Golden compares got with testdata/steps/<name>.golden (from the module
// root), rewriting it with -update.
func Golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(moduleRoot(t), "testdata", "steps", name+".golden")
	if Updating() {
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

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Clock advances only when something sleeps.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a clock at 2026-04-08 23:30 UTC.
func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 4, 8, 23, 30, 0, 0, time.UTC)}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep advances the clock by d at once.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// Container is one container on a fake host.
type Container struct {
	Labels   map[string]string
	Running  bool
	ExitCode int
	Logs     string
	// JoinPolls is how many node-table reads miss this node after start.
	JoinPolls int
}

// Serve is the vllm serve process in a fake head container.
type Serve struct {
	Exists bool // pid file present
	Alive  bool
	// Chunks are appended to the log, one per follow poll; Die makes the
	// process exit once they are all out.
	Chunks [][]byte
	Log    []byte
	Die    bool
	// IgnoreTerm keeps the process alive after SIGTERM.
	IgnoreTerm bool
	EnvFile    []byte
}

// Host simulates docker, Ray's CLI and curl on one node.
type Host struct {
	Name       string
	Fake       *transporttest.Fake
	Images     map[string]bool
	Containers map[string]*Container
	NoRay      bool
	GCSClosed  bool
	GPUs       float64
	// RayIP overrides the address Ray registers the node under.
	RayIP string
	Serve Serve
	// Models is /v1/models' body.
	Models string
	// SS is what `ss -Hltnp` prints; VLLMVersion what `vllm --version` does.
	SS, VLLMVersion string
	// HeadExits, when set, is the log of a head container that exits at once.
	HeadExits string
}

// Lab is a set of fake hosts sharing one Ray cluster.
type Lab struct {
	t     *testing.T
	mu    sync.Mutex
	Hosts map[string]*Host
	Clock *Clock
}

// The lab's project, the image its containers run, and what docker pull
// prints of it.
const (
	Project = "lab"
	Image   = "registry.lab:5000/vllm-ray:0.17"
	Pull    = `0.17: Pulling from vllm-ray
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

// New is a lab of fake hosts named nodes, each with the image and one
// GPU.
func New(t *testing.T, nodes ...string) *Lab {
	l := &Lab{t: t, Hosts: map[string]*Host{}, Clock: NewClock()}
	for _, n := range nodes {
		h := &Host{Name: n, Fake: transporttest.NewFake(t, n), Images: map[string]bool{Image: true},
			Containers: map[string]*Container{}, GPUs: 1}
		h.Fake.Expect(transporttest.Any()).Do(func(ctx context.Context, cmd transport.Cmd, stdin []byte) (transport.Result, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.handle(h, cmd, stdin), nil
		})
		l.Hosts[n] = h
	}
	return l
}

// Env returns a StepEnv over the lab's hosts with a fake clock.
func (l *Lab) Env() *stepenv.StepEnv {
	conns := map[string]transport.Conn{}
	for n, h := range l.Hosts {
		conns[n] = h.Fake
	}
	return &stepenv.StepEnv{Conns: conns, Project: Project, Poll: time.Second, RayReadyTimeout: 30 * time.Second,
		StopTimeout: 5 * time.Second, HTTPReadyTimeout: 10 * time.Second, Now: l.Clock.Now, Sleep: l.Clock.Sleep}
}

// Run puts containers of specs on their hosts as if a previous apply had.
func (l *Lab) Run(specs ...cluster.ContainerSpec) {
	for _, s := range specs {
		l.Hosts[s.Node].Containers[s.Name] = &Container{Labels: s.Labels(Project), Running: true}
	}
}

// shellWords splits a command line as shell.Join writes it: words
// separated by spaces, each bare (a backslash escaping one byte) or in
// single quotes.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	in, started := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case in && c == '\'':
			in = false
		case in:
			w.WriteByte(c)
		case c == '\'':
			in, started = true, true
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			started = true
		case c == ' ':
			if started {
				words = append(words, w.String())
			}
			w.Reset()
			started = false
		default:
			w.WriteByte(c)
			started = true
		}
	}
	if started {
		words = append(words, w.String())
	}
	return words
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
func (l *Lab) handle(h *Host, cmd transport.Cmd, stdin []byte) transport.Result {
	a := cmd.Argv
	if cmd.Script != "" {
		return l.script(h, cmd)
	}
	at := argAt(a)
	switch {
	case at(0) == "rm":
		return fakeOK("")
	case at(0) == "id" && at(1) == "-u":
		return fakeOK("1000\n")
	case at(0) == "curl":
		return l.curl(h, a)
	case at(0) == "ss":
		return fakeOK(h.SS)
	case at(0) != "docker":
		return fakeFail(127, a[0]+": not found")
	}
	if res, ok := l.docker(h, a, stdin); ok {
		return res
	}
	l.t.Errorf("%s: fake host cannot answer %q", h.Name, cmd.String())
	return fakeFail(2, "unexpected")
}

// argAt reads the words of a: at(i) is the i-th, "" past the end.
func argAt(a []string) func(i int) string {
	return func(i int) string {
		if i < len(a) {
			return a[i]
		}
		return ""
	}
}

// docker answers the docker command a as dockerd on h would; ok is false
// for a command the fake does not know.
func (l *Lab) docker(h *Host, a []string, stdin []byte) (res transport.Result, ok bool) {
	at := argAt(a)
	switch {
	case at(1) == "inspect":
		return h.inspect(a)
	case at(1) == "stop":
		if c := h.Containers[at(4)]; c != nil {
			c.Running = false
			return fakeOK(at(4) + "\n"), true
		}
		return fakeFail(1, "Error response from daemon: No such container: "+at(4)), true
	case at(1) == "rm":
		delete(h.Containers, at(2))
		return fakeOK(at(2) + "\n"), true
	case at(1) == "image" && at(2) == "inspect":
		if h.Images[a[len(a)-1]] {
			return fakeOK("sha256:1b2c3d4e5f60\n"), true
		}
		return fakeFail(1, "Error response from daemon: No such image: "+a[len(a)-1]), true
	case at(1) == "pull":
		h.Images[at(2)] = true
		return fakeOK(Pull), true
	case at(1) == "run" && at(2) == "--rm":
		if h.NoRay {
			return fakeFail(1, ""), true
		}
		return fakeOK("/usr/local/bin/ray\n"), true
	case at(1) == "run" && at(2) == "-d":
		return h.runDetached(a), true
	case at(1) == "exec":
		return l.exec(h, a[2:], stdin), true
	}
	return transport.Result{}, false
}

// inspect answers docker inspect in the formats the steps ask for.
func (h *Host) inspect(a []string) (transport.Result, bool) {
	name := a[len(a)-1]
	c := h.Containers[name]
	if c == nil {
		return fakeFail(1, "Error: No such container: "+name), true
	}
	labels, _ := json.Marshal(c.Labels)
	switch a[5] {
	case "{{json .Config.Labels}}":
		return fakeOK(string(labels) + "\n"), true
	case "{{.State.Running}} {{json .Config.Labels}}":
		return fakeOK(fmt.Sprintf("%v %s\n", c.Running, labels)), true
	case "{{.State.Running}} {{.State.ExitCode}}":
		return fakeOK(fmt.Sprintf("%v %d\n", c.Running, c.ExitCode)), true
	}
	return transport.Result{}, false
}

// runDetached starts the container of docker run -d a: Ray up at once on
// the head, a worker after one poll of the node table, the head exiting
// with HeadExits when set.
func (h *Host) runDetached(a []string) transport.Result {
	name := argAt(a)(4)
	if h.Containers[name] != nil {
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
	h.Containers[name] = &Container{Labels: labels, Running: true, JoinPolls: join,
		Logs: "Local node IP: " + labels[cluster.LabelNodeIP] + "\n--------------------\nRay runtime started.\n--------------------\n"}
	if h.HeadExits != "" && labels[cluster.LabelRole] == "head" {
		c := h.Containers[name]
		c.Running, c.ExitCode, c.Logs = false, 1, h.HeadExits
	}
	return fakeOK("4f1c2b3a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a\n")
}

// script answers a shell script run on the host.
func (l *Lab) script(h *Host, cmd transport.Cmd) transport.Result {
	s := cmd.Script
	switch {
	case strings.HasPrefix(s, "id=$(docker run -d "):
		// A container with secret env (cluster.RunCmd): docker run, then
		// the secrets from the command's environment into the container.
		line, rest, _ := strings.Cut(strings.TrimPrefix(s, "id=$("), ") || exit $?\n")
		res := l.handle(h, transport.Cmd{Argv: shellWords(line)}, nil)
		if res.ExitCode == 0 && strings.Contains(rest, "| docker exec -i \"$id\" sh -c ") {
			for k := range cmd.Env {
				if !strings.Contains(rest, "printf '%s=%s\\n' "+k+" \"$"+k+"\"") {
					l.t.Errorf("%s: the secret %s is not handed to the container", h.Name, k)
				}
			}
		}
		return res
	case strings.HasPrefix(s, "docker logs --tail 400 "):
		name := strings.TrimSuffix(strings.TrimPrefix(s, "docker logs --tail 400 "), " 2>&1")
		if c := h.Containers[name]; c != nil {
			return fakeOK(c.Logs)
		}
		return fakeFail(1, "Error response from daemon: No such container: "+name)
	case strings.Contains(s, "/dev/tcp/"):
		if h.GCSClosed {
			return fakeFail(124, "")
		}
		return fakeOK("")
	}
	l.t.Errorf("%s: fake host cannot answer script %q", h.Name, s)
	return fakeFail(2, "unexpected")
}

// exec answers docker exec: Ray's CLI and the serve process.
func (l *Lab) exec(h *Host, a []string, stdin []byte) transport.Result {
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
	c := h.Containers[name]
	if c == nil {
		return fakeFail(1, "Error response from daemon: No such container: "+name)
	}
	if !c.Running {
		return fakeFail(1, "Error response from daemon: container "+name+" is not running")
	}
	sv := &h.Serve
	switch {
	case a[0] == "ray":
		return l.rayList()
	case a[0] == "rm":
		sv.Exists = false
		return fakeOK("")
	case a[0] == "tail":
		return fakeOK(string(sv.Log))
	case a[0] == "vllm" && len(a) > 1 && a[1] == "--version":
		return fakeOK(h.VLLMVersion + "\n")
	case detach:
		sv.Exists, sv.Alive, sv.Log = true, true, nil
		return fakeOK("")
	case interactive:
		sv.EnvFile = stdin
		return fakeOK("")
	}
	script := a[len(a)-1]
	if strings.HasPrefix(script, "python3 ") {
		// The fake image has no python3 (so no front: front.go).
		return fakeFail(127, "sh: 1: python3: not found")
	}
	if m := killRE.FindStringSubmatch(script); m != nil {
		if sv.Alive && (m[1] == "KILL" || !sv.IgnoreTerm) {
			sv.Alive = false
		}
		return fakeOK("")
	}
	status := "none"
	switch {
	case !sv.Exists && strings.Contains(script, "echo starting"):
		status = "starting"
	case sv.Exists && sv.Alive:
		status = "alive 4242"
	case sv.Exists:
		status = "dead 4242"
	}
	m := tailOffsetRE.FindStringSubmatch(script)
	if m == nil {
		return fakeOK(status + "\n")
	}
	if sv.Exists && sv.Alive && len(sv.Chunks) == 0 && sv.Die {
		sv.Alive = false
	}
	if len(sv.Chunks) > 0 && sv.Exists {
		sv.Log = append(sv.Log, sv.Chunks[0]...)
		sv.Chunks = sv.Chunks[1:]
	}
	off, _ := strconv.Atoi(m[1])
	out := []byte(status + "\n")
	if off-1 <= len(sv.Log) {
		out = append(out, sv.Log[off-1:]...)
	}
	return fakeOK(string(out))
}

// rayList renders Ray's node table from the running containers.
func (l *Lab) rayList() transport.Result {
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
	for _, n := range slices.Sorted(maps.Keys(l.Hosts)) {
		h := l.Hosts[n]
		for _, cn := range slices.Sorted(maps.Keys(h.Containers)) {
			c := h.Containers[cn]
			if !c.Running || c.Labels[cluster.LabelManaged] != "true" {
				continue
			}
			if c.JoinPolls > 0 {
				c.JoinPolls--
				continue
			}
			ip := c.Labels[cluster.LabelNodeIP]
			if h.RayIP != "" {
				ip = h.RayIP
			}
			res := map[string]any{"CPU": 20.0, "memory": "85.123 GiB", "node:" + ip: 1.0}
			if h.GPUs > 0 {
				res["GPU"] = h.GPUs
			}
			rows = append(rows, row{NodeID: fmt.Sprintf("%056x", len(rows)+1), NodeIP: ip, IsHead: c.Labels[cluster.LabelRole] == "head",
				State: "ALIVE", NodeName: ip, Resources: res, Labels: map[string]string{}})
		}
	}
	b, _ := json.Marshal(rows)
	return fakeOK(string(b) + "\n")
}

// curl answers the serve's HTTP endpoints.
func (l *Lab) curl(h *Host, a []string) transport.Result {
	url := a[len(a)-1]
	switch {
	case !h.Serve.Alive:
		return transport.Result{ExitCode: 7, Stdout: []byte("000"), Stderr: []byte("curl: (7) Failed to connect to 127.0.0.1 port 8000 after 0 ms: Couldn't connect to server\n")}
	case strings.HasSuffix(url, "/health"):
		return fakeOK("200")
	case strings.HasSuffix(url, "/v1/models"):
		return fakeOK(h.Models + "\n200")
	case strings.HasSuffix(url, "/v1/completions"):
		return fakeOK(`{"id":"cmpl-1","object":"text_completion","model":"qwen","choices":[{"index":0,"text":" Paris."}],"usage":{"prompt_tokens":5,"total_tokens":21,"completion_tokens":16}}` + "\n200 0.400000")
	}
	l.t.Errorf("%s: fake curl cannot answer %v", h.Name, a)
	return fakeFail(22, "")
}

// Transcript renders every host's calls, hosts sorted.
func (l *Lab) Transcript() string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(l.Hosts)) {
		fmt.Fprintf(&b, "== %s\n%s", n, l.Hosts[n].Fake.Transcript())
	}
	return b.String()
}

// Calls returns every call of every host.
func (l *Lab) Calls() []transporttest.Call {
	var out []transporttest.Call
	for _, n := range slices.Sorted(maps.Keys(l.Hosts)) {
		out = append(out, l.Hosts[n].Fake.Calls()...)
	}
	return out
}

// hooks records what a walk reports.
type hooks struct {
	mu    sync.Mutex
	lines []string
}

func (h *hooks) add(s string) {
	h.mu.Lock()
	h.lines = append(h.lines, s)
	h.mu.Unlock()
}

func (h *hooks) ResourceStart(addr string, a plan.Action) {
	h.add(fmt.Sprintf("start %s (%s)", addr, a))
}
func (h *hooks) StepStart(addr, step string)   { h.add("step: " + step) }
func (h *hooks) StepSkipped(addr, step string) { h.add("skipped: " + step) }
func (h *hooks) Progress(addr, msg string)     { h.add("  " + msg) }
func (h *hooks) ResourceComplete(addr string, a plan.Action, _ time.Duration) {
	h.add(fmt.Sprintf("complete %s", addr))
}
func (h *hooks) ResourceErrored(addr string, a plan.Action, _ time.Duration, err error) {
	h.add(fmt.Sprintf("errored %s", addr))
}

// Walk runs steps, those of w, through apply.Walk and returns the hook
// lines and the error.
func Walk(t *testing.T, w *kind.Work, steps []apply.Step) ([]string, error) {
	t.Helper()
	g := dag.New()
	g.Add(w.Address)
	h := &hooks{}
	err := apply.Walk(context.Background(), g, map[string]*apply.Resource{
		w.Address: {Address: w.Address, Action: w.Action, Steps: steps},
	}, h, apply.Options{})
	return h.lines, err
}

// Render is the golden text of a walk: its hook lines, then each host's
// command transcript.
func Render(lines []string, err error, l *Lab) string {
	var b strings.Builder
	for _, s := range lines {
		b.WriteString(s + "\n")
	}
	if err != nil {
		b.WriteString("error: " + err.Error() + "\n")
	}
	b.WriteString(l.Transcript())
	return b.String()
}
