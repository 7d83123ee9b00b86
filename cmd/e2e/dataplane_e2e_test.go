//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/resources/servefiles"
)

// requireTorch skips unless this machine has Debian's python3-torch, from
// which `lab up -torch` builds the Ray image's torch layer.
func requireTorch(t *testing.T) {
	t.Helper()
	if exec.Command("/usr/bin/python3", "-c", "import torch.distributed").Run() != nil {
		t.Skip("the data-plane end-to-end tests need Debian's python3-torch (apt-get install python3-torch)")
	}
}

// labProject copies the lab's own rayform.hcl (every node, the check on)
// into a project directory named after the lab, and returns it.
func (l *e2eLab) labProject() string {
	l.t.Helper()
	hcl, err := os.ReadFile(filepath.Join(l.dir, "rayform.hcl"))
	if err != nil {
		l.t.Fatal(err)
	}
	if strings.Contains(string(hcl), "dataplane_check") {
		l.t.Fatalf("the -torch lab's rayform.hcl turns the check off:\n%s", hcl)
	}
	tmp := l.t.TempDir()
	dir := filepath.Join(tmp, l.name+"-"+filepath.Base(tmp))
	if err := os.Mkdir(dir, 0o755); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { os.RemoveAll(servefiles.HostProject(filepath.Base(dir))) })
	// The lab declares its project (its directory's name); each copy
	// here is a project of its own, named after its directory.
	hcl = regexp.MustCompile(`(?m)^  project = ".*"$`).ReplaceAll(hcl, []byte(`  project = "`+filepath.Base(dir)+`"`))
	// The subject is the data-plane check: the lab's model block goes and
	// the serve names its model as before the lab had one, so no staging
	// (which crosses the fabric too) runs first and meets the faults these
	// tests inject.
	hcl = regexp.MustCompile(`(?ms)^(# [^\n]*\n)*model "[^"]*" \{\n.*?^\}\n`).ReplaceAll(hcl, nil)
	model := regexp.MustCompile(`(?m)^(  model += )model\.([a-z0-9_]+)\.source$`)
	if !model.Match(hcl) || strings.Contains(string(hcl), "model \"") {
		l.t.Fatalf("the lab's rayform.hcl changed: no model block to take out, or one left:\n%s", hcl)
	}
	hcl = model.ReplaceAll(hcl, []byte(`${1}"Qwen/Qwen3.5-122B-A10B-FP8"`))
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), hcl, 0o644); err != nil {
		l.t.Fatal(err)
	}
	return dir
}

// netns runs argv in one of the lab's namespaces (a node, or "fabric").
func (l *e2eLab) netns(t *testing.T, ns string, argv ...string) {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", l.name + "-" + ns}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %v\n%s", ns, argv, err, out)
	}
}

// serveStarted reports whether vllm serve qwen ever started on the head:
// its log exists in the serve record directory on the host.
func serveStarted(dir string) bool {
	_, err := os.Stat(filepath.Join(servefiles.Host(filepath.Base(dir), "spark1", "rayform-spark"), "serve-qwen.log"))
	return err == nil
}

// TestE2EDataplaneCheck runs the data-plane check with real PyTorch (the
// lab's -torch image) inside apply, before vllm serve starts, and as
// `rayform check`: each failure injected after Ray is up stops the apply
// before the serve with its cause; the healthy cluster passes and shows the
// rendezvous time, the interface Gloo used on each node and the bandwidth.
func TestE2EDataplaneCheck(t *testing.T) {
	requireTorch(t)
	// Fast mode: the subject is the data-plane check (real torch across
	// the namespaces, the -torch layer), not Ray; on the real Ray this test
	// alone runs past 10 minutes (BENCHMARKS.md).
	l := startLab(t, "rfdp", append([]string{"-torch"}, fastRay...)...)
	dir := l.labProject()
	r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve", "-target=ray_cluster.spark")
	mustCode(t, "apply -target=ray_cluster.spark", r, exitOK)

	stopped := func(t *testing.T, wants ...string) {
		t.Helper()
		r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
		mustCode(t, "apply", r, exitError)
		mustContain(t, "apply", r.stdout+r.stderr, append([]string{"data-plane check failed", "vllm serve qwen was not started", "Cause: ", "Fix: "}, wants...)...)
		if serveStarted(dir) || strings.Contains(r.stdout, "start vllm serve qwen") {
			t.Errorf("vllm serve started after a failed data-plane check:\n%s", r)
		}
	}

	t.Run("firewall on the head drops fabric ports other than Ray's", func(t *testing.T) {
		l.netns(t, "spark1", "iptables", "-N", "RFDP")
		defer func() {
			l.netns(t, "spark1", "iptables", "-D", "INPUT", "-i", "enp1s0f1np1", "-j", "RFDP")
			l.netns(t, "spark1", "iptables", "-F", "RFDP")
			l.netns(t, "spark1", "iptables", "-X", "RFDP")
		}()
		l.netns(t, "spark1", "iptables", "-A", "RFDP", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
		l.netns(t, "spark1", "iptables", "-A", "RFDP", "-p", "tcp", "-m", "multiport", "--dports", "6379,8265,10001:19999", "-j", "ACCEPT")
		l.netns(t, "spark1", "iptables", "-A", "RFDP", "-j", "DROP")
		l.netns(t, "spark1", "iptables", "-I", "INPUT", "-i", "enp1s0f1np1", "-j", "RFDP")
		stopped(t, "c10d", "192.168.200.12", "clients joined")
		l.noCheckLeft(t, "spark1", "spark2")
	})
	t.Run("fabric cut to spark2 at the switch after Ray is up", func(t *testing.T) {
		// The switch stops forwarding spark2's port; the node's link stays
		// up, so plan's link check cannot see it (lab cut takes the link
		// down, which plan already reports).
		l.netns(t, "fabric", "bridge", "link", "set", "dev", "spark2-f", "state", "0")
		defer l.netns(t, "fabric", "bridge", "link", "set", "dev", "spark2-f", "state", "3")
		stopped(t, "c10d", "spark2")
	})
	t.Run("fabric link of spark2 down after Ray is up (lab cut)", func(t *testing.T) {
		if out, err := l.rflab("cut", "-name", l.name, "spark2").CombinedOutput(); err != nil {
			t.Fatalf("lab cut: %v\n%s", err, out)
		}
		defer l.rflab("uncut", "-name", l.name, "spark2").Run()
		// apply's plan sees the link down and stops before any step;
		// rayform check, which does not stop at plan findings, fails the
		// rendezvous.
		r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
		mustCode(t, "apply", r, exitError)
		mustContain(t, "apply", r.stdout, "fabric interface enp1s0f1np1 is down on spark2")
		if serveStarted(dir) {
			t.Errorf("vllm serve started with spark2 cut off:\n%s", r)
		}
		r = l.rayform("", "-chdir="+dir, "check")
		mustCode(t, "check", r, exitError)
		mustContain(t, "check", r.stdout, "data-plane check failed", "spark2: the c10d rendezvous failed", "Cause: ")
	})
	t.Run("GLOO_SOCKET_IFNAME names no interface", func(t *testing.T) {
		r := l.rayform("", "-chdir="+dir, "check", "-env", "GLOO_SOCKET_IFNAME=rfnosuch0")
		mustCode(t, "check", r, exitError)
		mustContain(t, "check", r.stdout, "Unable to find address for: rfnosuch0", "Cause: GLOO_SOCKET_IFNAME=rfnosuch0 matches no interface", "Fix: ")

		r = l.rayform("", "-chdir="+dir, "check", "-json", "-env", "GLOO_SOCKET_IFNAME=rfnosuch0")
		mustCode(t, "check -json", r, exitError)
		var reps []struct {
			OK        bool `json:"ok"`
			Diagnosis struct {
				Cause    string `json:"cause"`
				Evidence []struct {
					Line string `json:"line"`
				} `json:"evidence"`
			} `json:"diagnosis"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &reps); err != nil || len(reps) != 1 {
			t.Fatalf("check -json: %v\n%s", err, r.stdout)
		}
		if d := reps[0].Diagnosis; reps[0].OK || d.Cause != "gloo-interface" || len(d.Evidence) == 0 || !strings.Contains(d.Evidence[0].Line, "rfnosuch0") {
			t.Errorf("check -json: %+v", reps[0])
		}
	})
	t.Run("spark2's fabric address moves while apply runs the check", func(t *testing.T) {
		// The plan saw 192.168.200.13 and Ray registered spark2 under it;
		// the address moves as the check step starts (its ranks import
		// torch for seconds before the rendezvous), so the check's Gloo
		// connections leave from the new one.
		cmd, out := l.start("-chdir="+dir, "apply", "-auto-approve")
		waitFor(t, "the data-plane check step", 3*time.Minute, func() bool { return strings.Contains(out.String(), ": data-plane check") })
		l.netns(t, "spark2", "ip", "addr", "del", "192.168.200.13/24", "dev", "enp1s0f1np1")
		l.netns(t, "spark2", "ip", "addr", "add", "192.168.200.23/24", "dev", "enp1s0f1np1")
		defer func() {
			l.netns(t, "spark2", "ip", "addr", "del", "192.168.200.23/24", "dev", "enp1s0f1np1")
			l.netns(t, "spark2", "ip", "addr", "add", "192.168.200.13/24", "dev", "enp1s0f1np1")
		}()
		if err := cmd.Wait(); err == nil {
			t.Fatalf("apply exited 0 with spark2's fabric address moved:\n%s", out)
		}
		mustContain(t, "apply", out.String(), "data-plane check failed", "vllm serve qwen was not started",
			"Gloo used 192.168.200.23", "not the node's fabric address 192.168.200.13", "Fix: Run rayform plan")
		if serveStarted(dir) || strings.Contains(out.String(), "start vllm serve qwen") {
			t.Errorf("vllm serve started after a failed data-plane check:\n%s", out)
		}
	})
	t.Run("healthy", func(t *testing.T) {
		r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
		mustCode(t, "apply", r, exitOK)
		mustContain(t, "apply", r.stdout, "RENDEZVOUS", "BUSBW", "data plane ok on 2 nodes", "start vllm serve qwen")
		checkRows(t, r.stdout, "spark1", "192.168.200.12", "spark2", "192.168.200.13")
		if !strings.Contains(r.stdout, "GB/s") || !strings.Contains(r.stdout, "10 Gb/s") {
			t.Errorf("no bandwidth next to the link speed:\n%s", r.stdout)
		}
		if i, j := strings.Index(r.stdout, "data plane ok"), strings.Index(r.stdout, "start vllm serve qwen"); i < 0 || j < i {
			t.Errorf("the check did not run before vllm serve:\n%s", r.stdout)
		}
	})
	t.Run("check -json", func(t *testing.T) {
		r := l.rayform("", "-chdir="+dir, "check", "-json")
		mustCode(t, "check -json", r, exitOK)
		var reps []struct {
			Cluster string `json:"cluster"`
			OK      bool   `json:"ok"`
			Nodes   []struct {
				Node   string `json:"node"`
				Result struct {
					RendezvousS float64 `json:"rendezvous_s"`
					Backends    map[string]struct {
						Addr, Iface string
						BusBW       float64 `json:"busbw_gbps"`
					} `json:"backends"`
				} `json:"result"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &reps); err != nil {
			t.Fatalf("check -json: %v\n%s", err, r.stdout)
		}
		if len(reps) != 1 || !reps[0].OK || len(reps[0].Nodes) != 2 {
			t.Fatalf("check -json: %+v", reps)
		}
		for _, n := range reps[0].Nodes {
			g := n.Result.Backends["gloo"]
			if g.Iface != "enp1s0f1np1" || g.BusBW <= 0 || n.Result.RendezvousS <= 0 {
				t.Errorf("%s: %+v", n.Node, n.Result)
			}
		}
	})
	t.Run("spark2's fabric address moved", func(t *testing.T) {
		l.netns(t, "spark2", "ip", "addr", "del", "192.168.200.13/24", "dev", "enp1s0f1np1")
		l.netns(t, "spark2", "ip", "addr", "add", "192.168.200.23/24", "dev", "enp1s0f1np1")
		defer func() {
			l.netns(t, "spark2", "ip", "addr", "del", "192.168.200.23/24", "dev", "enp1s0f1np1")
			l.netns(t, "spark2", "ip", "addr", "add", "192.168.200.13/24", "dev", "enp1s0f1np1")
		}()
		r := l.rayform("", "-chdir="+dir, "check")
		mustCode(t, "check", r, exitError)
		mustContain(t, "check", r.stdout, "Gloo used 192.168.200.23", "VLLM_HOST_IP=192.168.200.13", "the fabric address moved", "Fix: Run rayform plan")
	})
}

// TestE2EDataplaneCheckThreeNodes: a healthy 3-node cluster applied from
// nothing passes the check inside apply, every node on its fabric address;
// the check's ranks started with the containers. The nodes' own
// environment (an env file given to docker run that names an interface
// that does not exist for Gloo and NCCL) cannot take the data plane off
// the fabric: rayform's pins win, in real Docker.
func TestE2EDataplaneCheckThreeNodes(t *testing.T) {
	requireTorch(t)
	// Fast mode: the subject is the data-plane check and rayform's pins
	// against the nodes' env files, not Ray.
	l := startLab(t, "rfdp3", append([]string{"-torch", "-nodes", "3"}, fastRay...)...)
	dir := l.labProject()
	envFile := filepath.Join(t.TempDir(), "node.env")
	if err := os.WriteFile(envFile, []byte("GLOO_SOCKET_IFNAME=rfnosuch0\nNCCL_SOCKET_IFNAME=rfnosuch0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hcl, _ := os.ReadFile(filepath.Join(dir, "main.hcl"))
	forced := strings.Replace(string(hcl), "  memory_monitor = false\n", fmt.Sprintf("  memory_monitor = false\n  docker_args    = [\"--env-file\", %q]\n", envFile), 1)
	if forced == string(hcl) {
		t.Fatalf("no ray_cluster to add docker_args to:\n%s", hcl)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(forced), 0o644); err != nil {
		t.Fatal(err)
	}
	r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
	mustCode(t, "apply", r, exitOK)
	mustContain(t, "apply", r.stdout, "RENDEZVOUS", "data plane ok on 3 nodes", "ranks started with the containers", "start vllm serve qwen")
	checkRows(t, r.stdout, "spark1", "192.168.200.12", "spark2", "192.168.200.13", "spark3", "192.168.200.14")
	l.noCheckLeft(t, "spark1", "spark2", "spark3")
}

// noCheckLeft fails when a process of the data-plane check still runs in a
// node's Ray container (docker top lists the container's processes).
func (l *e2eLab) noCheckLeft(t *testing.T, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		out, err := l.ssh(n, "docker top rayform-spark -eo pid,args")
		if err != nil {
			t.Fatalf("docker top on %s: %v\n%s", n, err, out)
		}
		if strings.Contains(out, "--ready-go") {
			t.Errorf("a data-plane check process is left on %s:\n%s", n, out)
		}
	}
}

// checkRows checks that the check's table has a gloo row per node with the
// node's fabric address and interface, a rendezvous time and a bandwidth.
func checkRows(t *testing.T, out string, nodeAddrs ...string) {
	t.Helper()
	for i := 0; i < len(nodeAddrs); i += 2 {
		found := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			// vllm_serve.qwen: NODE BACKEND ADDRESS INTERFACE RENDEZVOUS s BUSBW GB/s LINK Gb/s STATUS
			if len(f) >= 12 && f[1] == nodeAddrs[i] && f[2] == "gloo" {
				found = true
				if f[3] != nodeAddrs[i+1] || f[4] != "enp1s0f1np1" || (f[11] != "ok" && f[11] != "slow") {
					t.Errorf("%s's row: %q", nodeAddrs[i], line)
				}
			}
		}
		if !found {
			t.Errorf("no gloo row for %s:\n%s", nodeAddrs[i], out)
		}
	}
}
