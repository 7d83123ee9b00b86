//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// End-to-end tests: the built rayform binary against a lab (network
// namespaces with real sshd and dockerd, simnode playing Ray and vLLM),
// run from the lab's client namespace, which has no route out of the lab.

// e2eLab is one lab brought up by the built binary for a test.
type e2eLab struct {
	t    *testing.T
	bin  string // directory holding rayform and simnode
	name string
	dir  string
}

// startLab brings a lab up with `rayform lab up` and tears it down after
// the test.
func startLab(t *testing.T, name string, extra ...string) *e2eLab {
	t.Helper()
	requireLabHost(t)
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Skip("end-to-end tests need dockerd (Debian's docker.io)")
	}
	bin := buildLabBinaries(t)
	l := &e2eLab{t: t, bin: bin, name: name, dir: filepath.Join(os.TempDir(), "rayform-lab-"+name)}
	args := append([]string{"lab", "up", "-name", name, "-timing", "weight_load=1s", "-timing", "graph_capture=500ms"}, extra...)
	out, err := exec.Command(filepath.Join(bin, "rayform"), args...).CombinedOutput()
	t.Cleanup(func() {
		if out, err := exec.Command(filepath.Join(bin, "rayform"), "lab", "down", "-name", name).CombinedOutput(); err != nil {
			t.Errorf("lab down: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	return l
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
	dir := l.t.TempDir()
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

const e2eCluster = `
network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = %q
}

ray_cluster "spark" {
  image          = %q
  head           = node.spark1
  workers        = [node.spark2]
  network        = network.fabric
  memory_monitor = %v
}

vllm_serve "qwen" {
  cluster                = ray_cluster.spark
  model                  = "Qwen/Qwen3.5-122B-A10B-FP8"
  served_model_name      = "qwen3.5-122b"
  tensor_parallel_size   = 2
  gpu_memory_utilization = %v
  max_model_len          = 32768
  ready_timeout          = "2m"
}

output "endpoint" {
  value = vllm_serve.qwen.endpoint
}
`

func clusterConfig(iface, image string, monitor bool, util float64) string {
	return fmt.Sprintf(e2eCluster, iface, image, monitor, util)
}

const seedImage = "hellohal2064/vllm-qwen3.5-gb10"

var roundTripsRE = regexp.MustCompile(`Observed 2 hosts in \S+ \((\d+) SSH connections, at most (\d+) round trips per host\)`)

// TestE2EPlanFindsTheSeedsMistakes plans against the seeds' topology with
// the binding wrong in each of the ways the seeds went wrong, before
// anything is touched.
func TestE2EPlanFindsTheSeedsMistakes(t *testing.T) {
	l := startLab(t, "rfe2eplan")
	tests := []struct {
		name     string
		config   string
		wantCode int
		want     []string
	}{
		{"empty cluster plans a create", clusterConfig("enp1s0f1np1", seedImage, false, 0.85), exitChanges,
			[]string{"# ray_cluster.spark will be created", `+ head_node_ip   = "192.168.200.12"`, "Plan: 2 to add, 0 to change, 0 to destroy."}},
		{"fabric interface that does not exist", clusterConfig("eth9", seedImage, false, 0.85), exitError,
			[]string{"Error: interface eth9 does not exist on spark1", "enp1s0f1np1"}},
		{"memory monitor on unified memory", clusterConfig("enp1s0f1np1", seedImage, true, 0.90), exitError,
			[]string{"Error: Ray's memory monitor is on for unified memory", "119.70 GiB", "memory_monitor = false"}},
		{"no network binding", strings.Replace(clusterConfig("enp1s0f1np1", seedImage, false, 0.85), "  network        = network.fabric\n", "", 1), exitError,
			[]string{"without a network binding", "failed to connect to any network address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := l.config(tt.config)
			r := l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode")
			if r.code != tt.wantCode {
				t.Fatalf("plan exit %d, want %d\n%s", r.code, tt.wantCode, r)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout+r.stderr, w) {
					t.Errorf("plan output lacks %q\n%s", w, r)
				}
			}
			if strings.Contains(r.stderr, "on main.hcl line") {
				return // a configuration error: nothing was observed
			}
			m := roundTripsRE.FindStringSubmatch(r.stdout)
			if m == nil {
				t.Fatalf("plan did not report its SSH cost\n%s", r)
			}
			if m[1] != "2" || m[2] > "2" {
				t.Errorf("plan used %s connections and up to %s round trips per host; want 2 and at most 2", m[1], m[2])
			}
			t.Logf("plan took %s", r.elapsed)
		})
	}
}
