//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

func TestLabUsageErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no subcommand", []string{"lab"}, exitError, "Usage: rayform lab <subcommand>"},
		{"help", []string{"lab", "-help"}, exitOK, "Subcommands:"},
		{"unknown subcommand", []string{"lab", "bogus"}, exitError, `unknown lab subcommand "bogus"`},
		{"exec without command", []string{"lab", "exec", "spark1"}, exitError, "usage: rayform lab exec NODE -- CMD"},
		{"run without command", []string{"lab", "run", "-name", "x"}, exitError, "usage: rayform lab run [-name NAME] COMMAND"},
		{"run on a lab that is not up", []string{"lab", "run", "-dir", "/nonexistent/lab", "plan"}, exitError, "is not up"},
		{"status of a lab that is not up", []string{"lab", "status", "-dir", "/nonexistent/lab"}, exitError, "is not up"},
		{"reboot without node", []string{"lab", "reboot"}, exitError, "usage: rayform lab reboot NODE"},
		{"up with a bad flag", []string{"lab", "up", "-nodes", "x"}, exitError, "invalid value"},
		{"up with extra arguments", []string{"lab", "up", "now"}, exitError, "unexpected arguments"},
		{"up with a bad timing", []string{"lab", "up", "-timing", "weight_load"}, exitError, "want KEY=DURATION"},
		{"up with a bad ray", []string{"lab", "up", "-ray", "fake"}, exitError, `-ray "fake": want real or simnode`},
		{"up with a bad model disk", []string{"lab", "up", "-model-disk", "3X"}, exitError, `-model-disk: size "3X": want a count of bytes, or a number with K, M, G or T (like 300M)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := realMain(tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.wantCode || !strings.Contains(stderr.String()+stdout.String(), tt.wantErr) {
				t.Errorf("rayform %v = %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
}

// buildLabBinaries returns the directory where rayform and simnode are
// built side by side (rayform finds simnode next to itself), readable and
// executable by anyone. They are built once per test process, by the first
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

func buildBinaries() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir, err := os.MkdirTemp("", "rayform-labcli-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return dir, err
	}
	for _, pkg := range []string{"rayform", "simnode"} {
		cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, pkg), "github.com/rayform/rayform/cmd/"+pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return dir, fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
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

// TestLabCommand drives `rayform lab` end to end with the built binary on an
// SSH-only lab.
func TestLabCommand(t *testing.T) {
	requireLabHost(t)
	dir := acquireLab(t, nil) // t.Parallel, a lab slot: its lab is its own, as startLab's are (SSH-only, simnode: light)
	rayform := filepath.Join(dir, "rayform")
	run := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, rayform, args...)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatalf("rayform %v: %v", args, err)
			}
			code = ee.ExitCode()
		}
		return string(out), code
	}
	// Unique per test process: engineers share the machine.
	name := fmt.Sprintf("rfc-cli-%d", os.Getpid()%100000)
	labDir := "/tmp/rayform-lab-" + name
	t.Cleanup(func() {
		if out, code := run(t, "lab", "down", "-name", name); code != 0 {
			t.Errorf("lab down: %d\n%s", code, out)
		}
		if _, err := os.Stat("/var/run/netns/" + name + "-client"); err == nil {
			t.Error("client namespace left after lab down")
		}
		if _, err := os.Stat(labDir); err == nil {
			t.Error("lab dir left after lab down")
		}
	})

	steps := []struct {
		args     []string
		wantCode int
		want     []string
	}{
		{[]string{"lab", "up", "-name", name, "-docker=false", "-nodes", "2", "-delay", "2ms"}, 0,
			[]string{"Lab " + name + " is up: 2 nodes", "spark1 (head)  10.1.230.180", rayform + " lab run -name " + name + " plan",
				"model caches:     /var/lib/rayform/huggingface/hub on every node, the node's own (spark1 no size limit, spark2 no size limit)",
				"seeded model:     rayform-lab/tiny@main (", "MiB) on spark1 only"}},
		// The seeded model is in the head's own cache only.
		{[]string{"lab", "exec", "-name", name, "spark1", "--", "ls", lab.ModelCacheDir}, 0, []string{"models--rayform-lab--tiny"}},
		{[]string{"lab", "exec", "-name", name, "spark2", "--", "ls", lab.ModelCacheDir + "/models--rayform-lab--tiny"}, 2, []string{"No such file or directory"}},
		// The printed hint works as printed: lab run runs this rayform in
		// the client namespace, in the lab's directory, with the lab's SSH
		// home (plan reaches both nodes over SSH; this lab has no docker,
		// so its configuration has nodes and the fabric only).
		{[]string{"lab", "run", "-name", name, "plan"}, 0, []string{"Observed 2 hosts", "No changes."}},
		{[]string{"lab", "run", "-name", name, "--", "-no-color", "validate"}, 0, []string{"Success! The configuration is valid."}},
		// status marks the GPUs simnode's nvidia-smi plays as simulated:
		// simnode says so on its --version's "Simulated by" line.
		{[]string{"lab", "run", "-name", name, "status"}, 0, []string{"spark1     10.1.230.180     reachable  1 GPU (NVIDIA GB10) (simulated)  memory 119.7 GiB"}},
		{[]string{"lab", "run", "-name", name, "status", "-json"}, 0, []string{`"gpu_simulator": "rayform simnode"`}},
		// The command's exit code is lab run's; a -chdir after "--" replaces the lab's directory.
		{[]string{"lab", "run", "-name", name, "--", "-chdir", "/nonexistent", "plan"}, 1, []string{"Error: -chdir: chdir /nonexistent"}},
		{[]string{"lab", "up", "-name", name, "-docker=false", "-nodes", "2", "-delay", "2ms"}, 0, []string{"already up"}},
		{[]string{"lab", "status", "-name", name}, 0, []string{"spark2  10.1.230.181  enp1s0f1np1 192.168.200.13  on", "All processes are up."}},
		{[]string{"lab", "exec", "-name", name, "spark2", "--", "hostname"}, 0, []string{"spark2"}},
		{[]string{"lab", "exec", "-name", name, "client", "--", "ssh", "-F", labDir + "/ssh_config", "spark1", "hostname"}, 0, []string{"spark1"}},
		{[]string{"lab", "exec", "-name", name, "client", "--", "sh", "-c", "readlink $HOME/.ssh/config $HOME/.ssh/known_hosts"}, 0,
			[]string{labDir + "/ssh_config", labDir + "/known_hosts"}},
		{[]string{"lab", "exec", "-name", name, "spark1", "--", "sh", "-c", "exit 7"}, 7, nil},
		{[]string{"lab", "env", "-name", name}, 0, []string{"RAYFORM_LAB_NETNS=" + name + "-client", "RAYFORM_LAB_CONFIG=" + labDir + "/rayform.hcl"}},
		{[]string{"lab", "poweroff", "-name", name, "spark2"}, 0, []string{"spark2: poweroff done"}},
		{[]string{"lab", "status", "-name", name}, 0, []string{"spark2  10.1.230.181  enp1s0f1np1 192.168.200.13  off"}},
		{[]string{"lab", "exec", "-name", name, "spark2", "--", "true"}, 1, []string{"node spark2 is powered off"}},
		{[]string{"lab", "poweron", "-name", name, "spark2"}, 0, []string{"spark2: poweron done"}},
		{[]string{"lab", "cut", "-name", name, "spark2"}, 0, []string{"spark2: cut done"}},
		{[]string{"lab", "status", "-name", name}, 0, []string{"on, fabric cut"}},
		{[]string{"lab", "reboot", "-name", name, "spark1"}, 0, []string{"spark1: reboot done"}},
		{[]string{"lab", "status", "-json", "-name", name}, 0, []string{`"client_netns": "` + name + `-client"`, `"cut": true`}},
	}
	for _, s := range steps {
		out, code := run(t, s.args...)
		if code != s.wantCode {
			t.Fatalf("rayform %v exited %d, want %d:\n%s", s.args, code, s.wantCode, out)
		}
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("rayform %v output lacks %q:\n%s", s.args, w, out)
			}
		}
	}
}

// TestLabNeedsRoot runs `rayform lab up` as nobody.
func TestLabNeedsRoot(t *testing.T) {
	requireLabHost(t)
	dir := buildLabBinaries(t)
	cmd := exec.Command(filepath.Join(dir, "rayform"), "lab", "up", "-name", "rfc-nobody")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the lab needs root") {
		t.Errorf("lab up as nobody: err=%v\n%s", err, out)
	}
}
