//go:build linux

package lab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/labslots"
)

// testLabName makes a lab name unique to this test process, so that test
// runs of several engineers on one machine do not share labs.
func testLabName(base string) string {
	return fmt.Sprintf("%s-%d", base, os.Getpid()%100000)
}

// requireLab skips the test unless this host can run a lab.
func requireLab(t testing.TB, docker bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("lab tests need root (network namespaces, sshd, dockerd)")
	}
	if _, err := hostTools(docker, false); err != nil {
		t.Skipf("lab tests need the lab's host programs: %v", err)
	}
	for _, p := range []string{"ssh", "go"} {
		if _, err := goOrLook(p); err != nil {
			t.Skipf("lab tests need %s: %v", p, err)
		}
	}
	if docker {
		if _, err := os.Stat("/usr/bin/busybox"); err != nil {
			t.Skip("lab tests with Docker need a static /usr/bin/busybox (Debian package busybox-static)")
		}
		if _, err := exec.LookPath("docker"); err != nil {
			t.Skip("lab tests with Docker need the docker client")
		}
	}
}

func goOrLook(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil || name != "go" {
		return p, err
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	_, err := os.Stat(p)
	return p, err
}

// simnodeBinary returns cmd/simnode (static), built once per test process
// by the first test that asks (TestMain removes it), or
// $RAYFORM_LAB_SIMNODE when set.
func simnodeBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("RAYFORM_LAB_SIMNODE"); p != "" {
		return p
	}
	testSimnode.once.Do(func() { testSimnode.path, testSimnode.err = buildSimnode() })
	if testSimnode.err != nil {
		t.Fatal(testSimnode.err)
	}
	return testSimnode.path
}

// testSimnode is the simnode simnodeBinary built for this test process.
var testSimnode struct {
	once sync.Once
	path string
	err  error
}

func buildSimnode() (string, error) {
	goBin, err := goOrLook("go")
	if err != nil {
		return "", fmt.Errorf("find go: %w", err)
	}
	dir, err := os.MkdirTemp("", "rayform-labtest-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "simnode")
	cmd := exec.Command(goBin, "build", "-o", out, "github.com/rayform/rayform/cmd/simnode")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return out, fmt.Errorf("build simnode: %v\n%s", err, b)
	}
	return out, nil
}

// upLab brings a lab up for the test and tears it down (checking that
// nothing is left) when the test ends.
//
// A test that calls upLab is a parallel test (upLab calls t.Parallel; a
// benchmark is not) and holds one of labPool's slots until its lab is
// down, so at most RAYFORM_E2E_LABS labs are up at once (lab_test.go,
// cmd/rflab/labslots). Labs of one run never collide as long as their names
// differ
// (testLabName of a base name no other test uses): the name prefixes the
// lab's namespaces, cgroups and processes and names its directory, and
// its addresses, registry and hub live in its own namespaces. A check
// that needs the same lab as an existing test and can run after it is a
// subtest of that test, sharing its lab; do not call t.Parallel yourself
// in a test that calls upLab. A test whose subtests call upLab (a lab per
// case) must call t.Parallel itself first: the queue grants the heaviest
// joined test first, and a sequential parent's subtests would wait behind
// top-level tests that only resume once the parent ended.
func upLab(t testing.TB, cfg Config) *Lab {
	t.Helper()
	requireLab(t, !cfg.NoDocker)
	// Queued before t.Parallel: go test resumes the parallel tests only
	// once every top-level test has run up to its t.Parallel, so every lab
	// test is in the queue before the first slot is granted, and the
	// heaviest labs go first.
	tk := labPool.Join(t, labWeight(cfg), cfg.RealRay) // the real Ray is CPU-bound: heavy
	if tt, ok := t.(*testing.T); ok {
		labslots.Parallel(tt) // t.Parallel, unless the test called it itself
	}
	if cfg.Simnode == "" {
		cfg.Simnode = simnodeBinary(t)
	}
	labPool.Open()
	tk.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A lab left by an interrupted earlier run is cleared by Up itself.
	t.Cleanup(func() { downAndCheck(t, cfg) })
	l, err := Up(ctx, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	return l
}

// labWeight ranks a lab by how long its test tends to run: the real Ray
// (its start and every ray CLI call are Python processes) counts most,
// then Docker (the containers' Ray and vLLM), so that the longest tests
// start first.
func labWeight(cfg Config) int {
	switch {
	case cfg.RealRay:
		return 2
	case !cfg.NoDocker:
		return 1
	}
	return 0
}

// downAndCheck runs Down and fails the test if any namespace, process,
// mount, cgroup or file of the lab is left.
func downAndCheck(t testing.TB, cfg Config) {
	t.Helper()
	c, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Down(ctx, c); err != nil {
		t.Errorf("Down: %v", err)
	}
	if ns := labNetns(c.Name); len(ns) > 0 {
		t.Errorf("namespaces left after Down: %v", ns)
	}
	self := ancestors()
	procs := listProcs(func(pid int, cmdline string) bool {
		return !self[pid] && (strings.Contains(cmdline, c.Dir) || strings.Contains(cmdline, c.Name+"-"))
	})
	for _, p := range procs {
		t.Errorf("process left after Down: %d %s", p.PID, p.Cmdline)
	}
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil && bytes.Contains(b, []byte(c.Dir)) {
		mps, _ := mountsUnder(c.Dir)
		t.Errorf("mounts left after Down: %v", mps)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("lab dir %s left after Down (stat: %v)", c.Dir, err)
	}
	if cgs, _ := filepath.Glob("/sys/fs/cgroup/*/" + c.Name + "-spark*"); len(cgs) > 0 {
		t.Errorf("cgroups left after Down: %v", cgs)
	}
}

// run runs argv in node's namespace (or "client") and returns combined output.
func labRun(t testing.TB, l *Lab, node string, argv ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, err := l.Command(ctx, node, argv...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ssh runs a command on node over SSH from the client namespace with the
// lab's ssh_config (strict host key checking), failing the test on error.
func sshOK(t testing.TB, l *Lab, node, command string) string {
	t.Helper()
	out, err := sshErr(t, l, node, command)
	if err != nil {
		t.Fatalf("ssh %s %q: %v\n%s", node, command, err, out)
	}
	return out
}

func sshErr(t testing.TB, l *Lab, node, command string, opts ...string) (string, error) {
	t.Helper()
	argv := append([]string{"ssh", "-F", l.SSHConfig}, opts...)
	return labRun(t, l, ClientName, append(argv, node, command)...)
}

// dialFrom connects to addr from the network namespace of node.
func dialFrom(l *Lab, node, addr string) error {
	ns := netnsPath(l.ClientNetns)
	if node != ClientName {
		n, err := l.Node(node)
		if err != nil {
			return err
		}
		ns = n.NetnsPath()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	c, err := dialIn(ctx, ns, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// listenIn listens on addr inside node's namespace and accepts (and closes)
// connections until the test ends.
func listenIn(t testing.TB, n *Node, addr string) string {
	t.Helper()
	var ln net.Listener
	if err := inNetns(n.NetnsPath(), func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, n.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}
