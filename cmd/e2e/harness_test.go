//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The harness: a lab per test, brought up with the built rflab, and the
// built rayform run in its client namespace.

// e2eLab is one lab brought up by the built rflab for a test.
type e2eLab struct {
	t    *testing.T
	bin  string // directory holding rayform, rflab and simnode
	name string
	dir  string
	up   string // lab up's output
}

// fastRay are the `rflab up` arguments of the fast mode, simnode's model of
// Ray (`-ray simnode`): only for tests whose subject is not Ray's behaviour
// (locks, secrets, state, formatting, vLLM's side), each saying why where
// it passes them. Every other test runs on the real Ray 2.53.0 (`-ray
// real`, what startLab passes when the test names no Ray).
var fastRay = []string{"-ray", "simnode"}

// startLab brings a lab up with `rflab up` and tears it down after
// the test. The lab runs the real Ray unless extra names one (fastRay);
// RAYFORM_E2E_RAY=real or =simnode overrides both for every test (for a
// quick local run on simnode's Ray, or to run the fast-mode tests on the
// real one).
//
// startLab makes the test a parallel test (t.Parallel) and holds one of
// labPool's slots until the lab is down (acquireLab): lab tests spend most of their time
// waiting on sshd, dockerd and Ray, so they run side by side, at most
// RAYFORM_E2E_LABS labs at once (labpool_test.go, cmd/rflab/labslots). Labs
// of one run never collide: each has its own name (the test's base name
// and the pid), so its own namespaces, addresses (inside them), registry
// and hub, cgroups, iptables rules (in its namespaces),
// /tmp/rayform-lab-NAME and projects (l.config puts the name in the
// project, which names the hosts' /var/tmp/rayform/PROJECT).
//
// How a new end-to-end test gets its lab:
//   - Its own lab (the default): call startLab first thing, with a base
//     name no other test uses. startLab calls t.Parallel (calling it
//     yourself before is harmless, but the test then queues for its slot
//     after those that did not); do not use t.Setenv or change
//     process-wide state (os.Setenv, os.Chdir): the test runs beside
//     others.
//   - A lab shared with other checks: when the checks need the same lab
//     flags and can run one after another, make them subtests (t.Run) of
//     one test that calls startLab once; each takes a fresh project on the
//     same nodes (l.config) and leaves the nodes as it found them (its
//     containers destroyed, cuts undone). Parallel tests never share a
//     lab: the clusters of two projects on one node would share Ray's
//     ports and container names.
//   - Independent cases, each from nothing (a long test whose subtests do
//     not build on each other): give each subtest its own lab, so the
//     cases run side by side. The test must call t.Parallel() itself
//     first (else, as a sequential test, its cases would wait in the
//     slot queue behind top-level lab tests that resume only after it
//     ended: a deadlock), and each subtest calls startLab with its own
//     base name (TestE2EInterruptedRunsConverge).
//   - No lab (parsing, formatting, golden files): a plain test, which runs
//     before the lab tests start.
func startLab(t *testing.T, name string, extra ...string) *e2eLab {
	t.Helper()
	requireLabHost(t)
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Skip("end-to-end tests need dockerd (Debian's docker.io)")
	}
	args := labRay(extra)
	bin := acquireLab(t, args) // t.Parallel, a lab slot (or the pool's heavy share)
	// A suffix from the pid keeps labs of concurrent test runs (other
	// checkouts on the same machine) apart, as cmd/rflab/lab's tests do.
	name = fmt.Sprintf("%s-%d", name, os.Getpid()%100000)
	l := &e2eLab{t: t, bin: bin, name: name, dir: filepath.Join(os.TempDir(), "rayform-lab-"+name)}
	args = append([]string{"up", "-name", name, "-timing", "weight_load=1s", "-timing", "graph_capture=500ms"}, args...)
	out, err := l.rflab(args...).CombinedOutput()
	l.up = string(out)
	t.Cleanup(func() {
		if out, err := l.rflab("down", "-name", name).CombinedOutput(); err != nil {
			t.Errorf("rflab down: %v\n%s", err, out)
		}
		removeHostDirs(t, name)
	})
	if err != nil {
		t.Fatalf("rflab up: %v\n%s", err, out)
	}
	return l
}

// rflab is the built rflab with args (up, down, exec, cut, ...), not yet
// started.
func (l *e2eLab) rflab(args ...string) *exec.Cmd {
	return exec.Command(filepath.Join(l.bin, "rflab"), args...)
}

// removeHostDirs removes what rayform left on the lab's hosts under
// /var/tmp/rayform (the nodes share this machine's filesystem there): the
// directories of the projects named after the lab (its generated config's
// "rayform-lab-NAME") or after a test's copy of it (NAME-001 ...).
func removeHostDirs(t *testing.T, name string) {
	t.Helper()
	for _, pattern := range []string{name + "*", "rayform-lab-" + name + "*"} {
		dirs, err := filepath.Glob(filepath.Join("/var/tmp/rayform", pattern))
		if err != nil {
			t.Errorf("removing the lab's host dirs: %v", err)
			continue
		}
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				t.Errorf("removing the lab's host dir: %v", err)
			}
		}
	}
}

// labRay returns a test's `rflab up` arguments with the Ray it runs on: the
// test's own -ray (fastRay), else -ray real; RAYFORM_E2E_RAY, when set,
// replaces either.
func labRay(extra []string) []string {
	mode := "real"
	var args []string
	for i := 0; i < len(extra); i++ {
		if extra[i] == "-ray" && i+1 < len(extra) {
			mode = extra[i+1]
			i++
			continue
		}
		args = append(args, extra[i])
	}
	if m := os.Getenv("RAYFORM_E2E_RAY"); m != "" {
		mode = m
	}
	return append(args, "-ray", mode)
}

// result is one run of the rayform binary.
type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout ---\n%s\n--- stderr ---\n%s", r.code, r.stdout, r.stderr)
}

// rayform runs the binary in the lab's client namespace with the lab's
// SSH settings (the client home's ~/.ssh is the lab's).
func (l *e2eLab) rayform(stdin string, args ...string) result {
	l.t.Helper()
	argv := append([]string{"netns", "exec", l.name + "-client", "env", "HOME=" + filepath.Join(l.dir, "client-home"), "NO_COLOR=1",
		filepath.Join(l.bin, "rayform")}, args...)
	cmd := exec.Command("ip", argv...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		l.t.Fatalf("running rayform %v: %v", args, err)
	}
	return r
}

// ssh runs a shell command on a lab node as a person would.
func (l *e2eLab) ssh(node, command string) (string, error) {
	l.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", l.name+"-client", "ssh", "-F", filepath.Join(l.dir, "ssh_config"), node, command)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// config writes a configuration directory for the lab: the lab's nodes
// plus body, and returns its path.
func (l *e2eLab) config(body string) string {
	l.t.Helper()
	// The directory's name is the project, which names the serve records'
	// directory on the hosts (/var/tmp/rayform/PROJECT/NODE/CONTAINER).
	// Every lab shares this machine's filesystem, so the lab's name is part
	// of it: labs of tests run at the same time never share records.
	tmp := l.t.TempDir()
	dir := filepath.Join(tmp, l.name+"-"+filepath.Base(tmp))
	if err := os.Mkdir(dir, 0o755); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { os.RemoveAll("/var/tmp/rayform/" + filepath.Base(dir)) })
	nodes := ""
	for i, name := range []string{"spark1", "spark2"} {
		nodes += fmt.Sprintf("node %q {\n  host          = \"10.1.230.%d\"\n  user          = \"root\"\n  identity_file = %q\n  gpus          = 1\n}\n\n",
			name, 180+i, filepath.Join(l.dir, "id_ed25519"))
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(nodes+body), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return dir
}

// start runs the binary in the background and returns a function that
// waits for it.
func (l *e2eLab) start(args ...string) (*exec.Cmd, *syncBuffer) {
	l.t.Helper()
	argv := append([]string{"netns", "exec", l.name + "-client", "env", "HOME=" + filepath.Join(l.dir, "client-home"), "NO_COLOR=1",
		filepath.Join(l.bin, "rayform")}, args...)
	cmd := exec.Command("ip", argv...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	return cmd, out
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rayTable reads Ray's own node table on the head, as a person would.
func (l *e2eLab) rayTable(t *testing.T) []map[string]any {
	t.Helper()
	out, err := l.ssh("spark1", "docker exec rayform-spark ray list nodes --format json")
	if err != nil {
		t.Fatalf("ray list nodes: %v\n%s", err, out)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &rows); err != nil {
		t.Fatalf("ray list nodes output is not JSON: %v\n%s", err, out)
	}
	return rows
}

func mustCode(t *testing.T, what string, r result, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("%s: exit %d, want %d\n%s", what, r.code, want, r)
	}
}

func mustContain(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q\n%s", what, w, out)
		}
	}
}

// mutations lists the mutating commands in a -log-level=debug stderr,
// leaving out the cluster lock (bookkeeping that changes no cluster).
func mutations(stderr string) []string {
	// A log entry starts with its timestamp; a command with newlines
	// continues on the following lines.
	var entries []string
	for _, line := range strings.Split(stderr, "\n") {
		if len(entries) == 0 || (line != "" && line[0] >= '0' && line[0] <= '9') {
			entries = append(entries, line)
			continue
		}
		entries[len(entries)-1] += "\n" + line
	}
	var out []string
	for _, e := range entries {
		if strings.Contains(e, "mutating=true") && !strings.Contains(e, "rayform-lock") {
			out = append(out, e)
		}
	}
	return out
}

// buildLabBinaries returns the directory where rayform, rflab and simnode
// are built side by side (rflab finds rayform and simnode next to itself),
// readable and executable by anyone: the binaries these tests drive, built
// from this checkout. They are built once per test process, by the first
// test that asks, and removed by TestMain.
func buildLabBinaries(t *testing.T) string {
	t.Helper()
	labBins.once.Do(func() { labBins.dir, labBins.err = buildBinaries() })
	if labBins.err != nil {
		t.Fatal(labBins.err)
	}
	return labBins.dir
}

// labBins are the binaries buildLabBinaries built for this test process.
var labBins struct {
	once sync.Once
	dir  string
	err  error
}

// binaries are the programs the tests drive, each built from cmd/NAME.
var binaries = []string{"rayform", "rflab", "simnode"}

// binEnv names a directory that already holds the binaries, built from
// this checkout (make test sets it to bin/ right after make build): the
// tests copy them instead of building them again.
const binEnv = "RAYFORM_E2E_BIN"

// buildBinaries puts rayform, rflab and simnode into a new directory that
// anyone may read and run (TestLabNeedsRoot runs rflab as nobody): copied
// from $RAYFORM_E2E_BIN when set, else built.
func buildBinaries() (string, error) {
	dir, err := os.MkdirTemp("", "rayform-labcli-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return dir, err
	}
	if from := os.Getenv(binEnv); from != "" {
		for _, name := range binaries {
			b, err := os.ReadFile(filepath.Join(from, name))
			if err != nil {
				return dir, fmt.Errorf("%s=%s: %w (run make build)", binEnv, from, err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
				return dir, err
			}
		}
		return dir, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// One go build links the three side by side.
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, name := range binaries {
		args = append(args, "github.com/rayform/rayform/cmd/"+name)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("build the binaries: %v\n%s", err, out)
	}
	return dir, nil
}

func requireLabHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("lab tests need root (network namespaces, sshd)")
	}
	for _, p := range []string{"ip", "nsenter", "ssh", "iptables-restore"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("lab tests need %s", p)
		}
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Skip("lab tests need /usr/sbin/sshd (openssh-server)")
	}
}
