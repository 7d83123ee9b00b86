//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// TestLabCommand drives rflab end to end with the built binary on an
// SSH-only lab.
func TestLabCommand(t *testing.T) {
	requireLabHost(t)
	dir := acquireLab(t, nil) // t.Parallel, a lab slot: its lab is its own, as startLab's are (SSH-only, simnode: light)
	rflab, rayform := filepath.Join(dir, "rflab"), filepath.Join(dir, "rayform")
	run := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, rflab, args...)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatalf("rflab %v: %v", args, err)
			}
			code = ee.ExitCode()
		}
		return string(out), code
	}
	// Unique per test process: engineers share the machine.
	name := fmt.Sprintf("rfc-cli-%d", os.Getpid()%100000)
	labDir := "/tmp/rayform-lab-" + name
	t.Cleanup(func() {
		if out, code := run(t, "down", "-name", name); code != 0 {
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
		{[]string{"up", "-name", name, "-docker=false", "-nodes", "2", "-delay", "2ms"}, 0,
			[]string{"Lab " + name + " is up: 2 nodes", "spark1 (head)  10.1.230.180", rflab + " run -name " + name + " plan",
				"(= ip netns exec " + name + "-client env HOME=" + labDir + "/client-home " + rayform + " -chdir " + labDir + " plan)",
				"model caches:     /var/lib/rayform/huggingface/hub on every node, the node's own (spark1 no size limit, spark2 no size limit)",
				"seeded model:     rayform-lab/tiny@main (", "MiB) on spark1 only"}},
		// The seeded model is in the head's own cache only.
		{[]string{"exec", "-name", name, "spark1", "--", "ls", lab.ModelCacheDir}, 0, []string{"models--rayform-lab--tiny"}},
		{[]string{"exec", "-name", name, "spark2", "--", "ls", lab.ModelCacheDir + "/models--rayform-lab--tiny"}, 2, []string{"No such file or directory"}},
		// The printed hint works as printed: rflab run runs the rayform beside it in
		// the client namespace, in the lab's directory, with the lab's SSH
		// home (plan reaches both nodes over SSH; this lab has no docker,
		// so its configuration has nodes and the fabric only).
		{[]string{"run", "-name", name, "plan"}, 0, []string{"Observed 2 hosts", "No changes."}},
		{[]string{"run", "-name", name, "--", "-no-color", "validate"}, 0, []string{"Success! The configuration is valid."}},
		// status marks the GPUs simnode's nvidia-smi plays as simulated:
		// simnode says so on its --version's "Simulated by" line.
		{[]string{"run", "-name", name, "status"}, 0, []string{"spark1     10.1.230.180     reachable  1 GPU (NVIDIA GB10) (simulated)  memory 119.7 GiB"}},
		{[]string{"run", "-name", name, "status", "-json"}, 0, []string{`"gpu_simulator": "rayform simnode"`}},
		// The command's exit code is rflab run's; a -chdir after "--" replaces the lab's directory.
		{[]string{"run", "-name", name, "--", "-chdir", "/nonexistent", "plan"}, 1, []string{"Error: -chdir: chdir /nonexistent"}},
		// -rayform names the rayform to run instead of the one beside rflab.
		{[]string{"run", "-name", name, "-rayform", rayform, "version"}, 0, []string{"rayform v"}},
		{[]string{"run", "-name", name, "-rayform", "/nonexistent/rayform", "version"}, 1, []string{"/nonexistent/rayform"}},
		{[]string{"up", "-name", name, "-docker=false", "-nodes", "2", "-delay", "2ms"}, 0, []string{"already up"}},
		{[]string{"status", "-name", name}, 0, []string{"spark2  10.1.230.181  enp1s0f1np1 192.168.200.13  on", "All processes are up."}},
		{[]string{"exec", "-name", name, "spark2", "--", "hostname"}, 0, []string{"spark2"}},
		{[]string{"exec", "-name", name, "client", "--", "ssh", "-F", labDir + "/ssh_config", "spark1", "hostname"}, 0, []string{"spark1"}},
		{[]string{"exec", "-name", name, "client", "--", "sh", "-c", "readlink $HOME/.ssh/config $HOME/.ssh/known_hosts"}, 0,
			[]string{labDir + "/ssh_config", labDir + "/known_hosts"}},
		{[]string{"exec", "-name", name, "spark1", "--", "sh", "-c", "exit 7"}, 7, nil},
		{[]string{"env", "-name", name}, 0, []string{"RAYFORM_LAB_NETNS=" + name + "-client", "RAYFORM_LAB_CONFIG=" + labDir + "/rayform.hcl"}},
		{[]string{"poweroff", "-name", name, "spark2"}, 0, []string{"spark2: poweroff done"}},
		{[]string{"status", "-name", name}, 0, []string{"spark2  10.1.230.181  enp1s0f1np1 192.168.200.13  off"}},
		{[]string{"exec", "-name", name, "spark2", "--", "true"}, 1, []string{"node spark2 is powered off"}},
		{[]string{"poweron", "-name", name, "spark2"}, 0, []string{"spark2: poweron done"}},
		{[]string{"cut", "-name", name, "spark2"}, 0, []string{"spark2: cut done"}},
		{[]string{"status", "-name", name}, 0, []string{"on, fabric cut"}},
		{[]string{"reboot", "-name", name, "spark1"}, 0, []string{"spark1: reboot done"}},
		{[]string{"status", "-json", "-name", name}, 0, []string{`"client_netns": "` + name + `-client"`, `"cut": true`}},
	}
	for _, s := range steps {
		out, code := run(t, s.args...)
		if code != s.wantCode {
			t.Fatalf("rflab %v exited %d, want %d:\n%s", s.args, code, s.wantCode, out)
		}
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("rflab %v output lacks %q:\n%s", s.args, w, out)
			}
		}
	}
}

// TestLabNeedsRoot runs `rflab up` as nobody.
func TestLabNeedsRoot(t *testing.T) {
	requireLabHost(t)
	dir := buildLabBinaries(t)
	cmd := exec.Command(filepath.Join(dir, "rflab"), "up", "-name", "rfc-nobody")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the lab needs root") {
		t.Errorf("rflab up as nobody: err=%v\n%s", err, out)
	}
}
