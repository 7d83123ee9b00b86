//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// e2eCluster is the seeds' topology on the lab's two nodes: a network, a
// Ray cluster on it and one serve (clusterConfig fills in the fabric
// interface, the image, the memory monitor and gpu_memory_utilization).
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
  # The lab image of these tests has no torch (see dataplane_e2e_test.go).
  dataplane_check = false
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

var roundTripsRE = regexp.MustCompile(`Observed 2 hosts in \S+ \((\d+) SSH connections?, at most (\d+) round trips? per host\)`)

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
			[]string{"# ray_cluster.spark will be created", `+ address   = "192.168.200.12"`, `+ "NCCL_SOCKET_IFNAME" = "enp1s0f1np1"`, "Plan: 2 to add, 0 to change, 0 to destroy."}},
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

// TestE2EApplyLifecycle takes the seed topology from nothing to a served
// completion with one apply, proves the second apply changes nothing,
// repairs drift made by hand (a Ray head restarted by hand:
// TestE2EApplyRepairsAHandRestartedHead, on its own lab so the two run side
// by side), serialises concurrent applies with the lock, and destroys only
// what rayform created.
func TestE2EApplyLifecycle(t *testing.T) {
	l := startLab(t, "rfe2eapp")
	dir := l.config(clusterConfig("enp1s0f1np1", seedImage, false, 0.85))
	plan := func() result { return l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode") }

	// From nothing to a served completion.
	r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
	mustCode(t, "first apply", r, exitOK)
	mustContain(t, "first apply", r.stdout, "Apply complete! Resources: 2 added, 0 changed, 0 destroyed.",
		"Loading weights: shards", "tokens/s", `endpoint = "http://192.168.200.12:8000/v1"`)
	rows := l.rayTable(t)
	alive := map[string]float64{}
	for _, row := range rows {
		if row["state"] == "ALIVE" {
			res, _ := row["resources_total"].(map[string]any)
			gpu, _ := res["GPU"].(float64)
			alive[fmt.Sprint(row["node_ip"])] = gpu
		}
	}
	if len(alive) != 2 || alive["192.168.200.12"] != 1 || alive["192.168.200.13"] != 1 {
		t.Fatalf("Ray's node table: ALIVE nodes and GPUs %v, want 192.168.200.12 and .13 with 1 GPU each", alive)
	}
	out, err := l.ssh("spark1", `curl -sS -m 10 http://192.168.200.12:8000/v1/completions -H 'Content-Type: application/json' -d '{"model":"qwen3.5-122b","prompt":"Hello","max_tokens":4}'`)
	if err != nil || !strings.Contains(out, `"text"`) {
		t.Fatalf("completion through the endpoint: %v\n%s", err, out)
	}

	// A second apply changes nothing, and plan agrees.
	r = l.rayform("", "-chdir="+dir, "-log-level=debug", "apply", "-auto-approve")
	mustCode(t, "second apply", r, exitOK)
	mustContain(t, "second apply", r.stdout, "No changes.", "Apply complete! Resources: 0 added, 0 changed, 0 destroyed.")
	if m := mutations(r.stderr); len(m) > 0 {
		t.Fatalf("second apply issued mutating commands:\n%s", strings.Join(m, "\n"))
	}
	if !strings.Contains(r.stderr, "mutating=false") {
		t.Fatal("the debug log shows no commands at all: the mutation check proves nothing")
	}
	// Apply recorded each node's fabric address: the converged cluster is
	// observed in one round trip per host, peers' routes included.
	r = plan()
	mustCode(t, "plan after apply", r, exitOK)
	if m := roundTripsRE.FindStringSubmatch(r.stdout); m == nil || m[1] != "2" || m[2] != "1" {
		t.Errorf("plan of the converged cluster: %v, want 2 SSH connections and 1 round trip per host\n%s", m, r)
	}
	if st, err := os.ReadFile(filepath.Join(dir, ".rayform", "state.json")); err != nil || !strings.Contains(string(st), `"fabric_address": "192.168.200.13"`) {
		t.Errorf("state after apply lacks spark2's fabric address (%v):\n%s", err, st)
	}

	// The serve's record is on the host, and its lock (held by vllm serve
	// in the container) tells the host whether it runs.
	hostLock := "flock -n -s -E 75 9 9</var/tmp/rayform/" + filepath.Base(dir) + "/spark1/rayform-spark/serve-qwen.lock; echo $?"
	if out, err := l.ssh("spark1", hostLock); err != nil || strings.TrimSpace(out) != "75" {
		t.Fatalf("the host's flock test of the running serve: %q, %v; want 75", out, err)
	}

	// Drift: the serve process dies.
	if out, err := l.ssh("spark1", "docker exec rayform-spark sh -c 'kill $(cat /tmp/rayform/serve/serve-qwen.pid)'"); err != nil {
		t.Fatalf("killing vllm serve: %v\n%s", err, out)
	}
	waitFor(t, "vllm serve to exit", 30*time.Second, func() bool {
		out, _ := l.ssh("spark1", "docker exec rayform-spark sh -c 'kill -0 $(cat /tmp/rayform/serve/serve-qwen.pid) 2>/dev/null || echo gone'")
		return strings.Contains(out, "gone")
	})
	waitFor(t, "the host's flock test to see the serve gone", 30*time.Second, func() bool {
		out, err := l.ssh("spark1", hostLock)
		return err == nil && strings.TrimSpace(out) == "0"
	})
	r = plan()
	mustCode(t, "plan after the serve died", r, exitChanges)
	mustContain(t, "plan after the serve died", r.stdout, "the vllm serve process is not running", "# vllm_serve.qwen must be replaced")
	r = l.rayform("", "-chdir="+dir, "plan", "-refresh-only", "-detailed-exitcode")
	mustCode(t, "refresh-only plan", r, exitChanges)
	mustContain(t, "refresh-only plan", r.stdout, "# vllm_serve.qwen has changed", "This is a refresh-only plan")
	r = l.rayform("", "-chdir="+dir, "plan", "-target=ray_cluster.spark", "-detailed-exitcode")
	mustCode(t, "plan targeting the healthy cluster", r, exitOK)

	// A saved plan applies only while the hosts are as they were.
	planFile := filepath.Join(t.TempDir(), "serve.plan")
	mustCode(t, "plan -out", l.rayform("", "-chdir="+dir, "plan", "-out", planFile), exitOK)
	if out, err := l.rflab("exec", "-name", l.name, "spark2", "--", "ip", "addr", "add", "10.99.0.1/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("changing spark2: %v\n%s", err, out)
	}
	r = l.rayform("", "-chdir="+dir, "apply", planFile)
	mustCode(t, "apply of a stale plan", r, exitError)
	mustContain(t, "apply of a stale plan", r.stderr, "Saved plan is stale", "spark2")
	mustCode(t, "plan -out again", l.rayform("", "-chdir="+dir, "plan", "-out", planFile), exitOK)
	r = l.rayform("", "-chdir="+dir, "apply", planFile)
	mustCode(t, "apply of the saved plan", r, exitOK)
	mustContain(t, "apply of the saved plan", r.stdout, "Apply complete! Resources: 1 added, 0 changed, 1 destroyed.")
	mustCode(t, "plan after repairing the serve", plan(), exitOK)

	// Two applies at once: the second fails fast naming the first.
	if out, err := l.ssh("spark1", "docker exec rayform-spark sh -c 'kill $(cat /tmp/rayform/serve/serve-qwen.pid)'"); err != nil {
		t.Fatalf("killing vllm serve: %v\n%s", err, out)
	}
	first, firstOut := l.start("-chdir="+dir, "apply", "-auto-approve")
	waitFor(t, "the first apply to start working", 60*time.Second, func() bool {
		return strings.Contains(firstOut.String(), "vllm_serve.qwen: ") || strings.Contains(firstOut.String(), "No changes.")
	})
	r = l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
	mustCode(t, "concurrent apply", r, exitError)
	mustContain(t, "concurrent apply", r.stderr, "is held by", "rayform apply since")
	if err := first.Wait(); err != nil {
		t.Fatalf("the first apply failed: %v\n%s", err, firstOut.String())
	}
	mustCode(t, "plan after the concurrent applies", plan(), exitOK)

	// Changing the serve's arguments restarts the serve only, and only
	// after a "yes".
	headID := func() string {
		out, err := l.ssh("spark1", "docker inspect -f '{{.Id}}' rayform-spark")
		if err != nil {
			t.Fatalf("inspecting the head: %v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	before := headID()
	src, err := os.ReadFile(filepath.Join(dir, "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(strings.Replace(string(src), "max_model_len          = 32768", "max_model_len          = 16384", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = l.rayform("no\n", "-chdir="+dir, "apply")
	mustCode(t, "apply answered no", r, exitError)
	mustContain(t, "apply answered no", r.stdout+r.stderr, "Do you want to perform these actions?", "Apply cancelled.")
	r = l.rayform("yes\n", "-chdir="+dir, "apply")
	mustCode(t, "apply answered yes", r, exitOK)
	mustContain(t, "apply answered yes", r.stdout, "~ max_model_len", "Apply complete! Resources: 1 added, 0 changed, 1 destroyed.")
	if strings.Contains(r.stdout, "ray_cluster.spark: Replacing") || headID() != before {
		t.Errorf("changing the serve's arguments replaced the Ray cluster\n%s", r)
	}
	mustCode(t, "plan after the serve update", plan(), exitOK)

	// Ctrl-C once: the running step finishes, no new step starts.
	if out, err := l.ssh("spark1", "docker exec rayform-spark sh -c 'kill $(cat /tmp/rayform/serve/serve-qwen.pid)'"); err != nil {
		t.Fatalf("killing vllm serve: %v\n%s", err, out)
	}
	waitFor(t, "vllm serve to exit", 30*time.Second, func() bool {
		out, _ := l.ssh("spark1", "docker exec rayform-spark sh -c 'kill -0 $(cat /tmp/rayform/serve/serve-qwen.pid) 2>/dev/null || echo gone'")
		return strings.Contains(out, "gone")
	})
	interrupted, intOut := l.start("-chdir="+dir, "apply", "-auto-approve")
	waitFor(t, "the serve to start loading", 60*time.Second, func() bool {
		return strings.Contains(intOut.String(), "start vllm serve qwen")
	})
	if err := interrupted.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := interrupted.Wait(); err == nil {
		t.Fatalf("an interrupted apply exited 0\n%s", intOut.String())
	}
	mustContain(t, "interrupted apply", intOut.String(), "Interrupt received.", "Gracefully shutting down...", "interrupted: not started")
	if strings.Contains(intOut.String(), "tokens/s") {
		t.Errorf("a step started after the interrupt\n%s", intOut.String())
	}
	mustCode(t, "apply after the interrupt", l.rayform("", "-chdir="+dir, "apply", "-auto-approve"), exitOK)
	mustCode(t, "plan after the interrupted apply", plan(), exitOK)

	// destroy removes rayform's containers and nothing else.
	if out, err := l.ssh("spark2", "docker run -d --name bystander "+seedImage+" sleep 100000"); err != nil {
		t.Fatalf("starting a bystander container: %v\n%s", err, out)
	}
	r = l.rayform("", "-chdir="+dir, "destroy", "-auto-approve")
	mustCode(t, "destroy", r, exitOK)
	mustContain(t, "destroy", r.stdout, "Destroy complete! Resources: 0 added, 0 changed, 2 destroyed.")
	for _, node := range []string{"spark1", "spark2"} {
		out, err := l.ssh(node, "docker ps -a --filter label=rayform.managed=true --format '{{.Names}}'; echo end")
		if err != nil || strings.TrimSpace(out) != "end" {
			t.Errorf("rayform containers left on %s after destroy: %v\n%s", node, err, out)
		}
		// Their serve record directories went with them (the lab's SSH
		// user is root, so the host may remove the container's files).
		hostDir := "/var/tmp/rayform/" + filepath.Base(dir) + "/" + node + "/rayform-spark"
		if _, err := os.Stat(hostDir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after destroy (stat: %v)", hostDir, err)
		}
	}
	out, err = l.ssh("spark2", "docker inspect -f '{{.State.Running}}' bystander")
	if err != nil || strings.TrimSpace(out) != "true" {
		t.Errorf("destroy touched a container rayform did not create: %v %q", err, out)
	}
	mustContain(t, "plan after destroy", plan().stdout, "Plan: 2 to add")
}

// TestE2EApplyRepairsAHandRestartedHead: after an apply from nothing,
// someone restarts the Ray head by hand without --node-ip-address; plan
// sees the head registered under the wrong address and apply repairs it.
func TestE2EApplyRepairsAHandRestartedHead(t *testing.T) {
	l := startLab(t, "rfe2ehead")
	dir := l.config(clusterConfig("enp1s0f1np1", seedImage, false, 0.85))
	plan := func() result { return l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode") }
	mustCode(t, "apply from nothing", l.rayform("", "-chdir="+dir, "apply", "-auto-approve"), exitOK)
	mustCode(t, "plan after the apply", plan(), exitOK)

	// Drift: someone restarts the Ray head by hand without --node-ip-address.
	restart := "docker rm -f rayform-spark >/dev/null && docker run -d --name rayform-spark --network host --gpus all " +
		"--label rayform.managed=true --label rayform.project=" + filepath.Base(dir) + " --label rayform.resource=ray_cluster.spark " +
		seedImage + " ray start --head --port=6379 --dashboard-host=0.0.0.0 --block"
	if out, err := l.ssh("spark1", restart); err != nil {
		t.Fatalf("restarting the head by hand: %v\n%s", err, out)
	}
	waitFor(t, "the hand-started head to register", 2*time.Minute, func() bool {
		out, _ := l.ssh("spark1", "docker exec rayform-spark ray list nodes --format json")
		return strings.Contains(out, `"10.1.230.180"`)
	})
	r := plan()
	mustCode(t, "plan after the hand restart", r, exitChanges)
	mustContain(t, "plan after the hand restart", r.stdout, "ray head registered as 10.1.230.180; want 192.168.200.12",
		"Objects have changed outside of rayform", "# ray_cluster.spark must be replaced")
	mustCode(t, "apply repairing the head", l.rayform("", "-chdir="+dir, "apply", "-auto-approve"), exitOK)
	mustCode(t, "plan after repairing the head", plan(), exitOK)
}

// TestE2EApplyStopsAtTheRightStep provokes the seeds' other failures and
// checks that apply stops before or at the layer that is wrong, with the
// cause and the fix.
func TestE2EApplyStopsAtTheRightStep(t *testing.T) {
	l := startLab(t, "rfe2efail")
	noContainers := func(t *testing.T) {
		t.Helper()
		for _, node := range []string{"spark1", "spark2"} {
			out, err := l.ssh(node, "docker ps -a --filter label=rayform.managed=true --format '{{.Names}}'; echo end")
			if err != nil || strings.TrimSpace(out) != "end" {
				t.Errorf("containers left on %s: %v\n%s", node, err, out)
			}
		}
	}

	t.Run("image without Ray", func(t *testing.T) {
		dir := l.config(clusterConfig("enp1s0f1np1", "vllm/vllm-openai:v0.19.0", false, 0.85))
		r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
		mustCode(t, "apply", r, exitError)
		mustContain(t, "apply", r.stdout+r.stderr, "Ray missing from the image vllm/vllm-openai:v0.19.0", "pip install 'ray[default]'")
		noContainers(t)

		// The same failure as NDJSON events, one per line.
		r = l.rayform("", "-chdir="+dir, "apply", "-auto-approve", "-json")
		mustCode(t, "apply -json", r, exitError)
		types := map[string]bool{}
		for i, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var ev map[string]any
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("apply -json line %d is not JSON: %v\n%s", i+1, err, line)
			}
			if i == 0 && ev["type"] != "version" {
				t.Errorf("first event %v, want version", ev["type"])
			}
			types[fmt.Sprint(ev["type"])] = true
		}
		// The image is checked before anything starts (issue 22): its
		// failure is reported with no apply_start before it.
		for _, want := range []string{"planned_change", "change_summary", "apply_progress", "apply_errored"} {
			if !types[want] {
				t.Errorf("apply -json emitted no %s event; got %v", want, types)
			}
		}
	})
	t.Run("memory monitor on unified memory", func(t *testing.T) {
		dir := l.config(clusterConfig("enp1s0f1np1", seedImage, true, 0.90))
		r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
		mustCode(t, "apply", r, exitError)
		mustContain(t, "apply", r.stdout, "Error: Ray's memory monitor is on for unified memory", "memory_monitor = false")
		noContainers(t)
	})
	t.Run("worker cut off from the fabric", func(t *testing.T) {
		if out, err := l.rflab("cut", "-name", l.name, "spark2").CombinedOutput(); err != nil {
			t.Fatalf("lab cut: %v\n%s", err, out)
		}
		defer l.rflab("uncut", "-name", l.name, "spark2").Run()
		dir := l.config(clusterConfig("enp1s0f1np1", seedImage, false, 0.85))
		r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
		mustCode(t, "apply", r, exitError)
		mustContain(t, "apply", r.stdout, "fabric interface enp1s0f1np1 is down on spark2", "no carrier on enp1s0f1np1: check the cable and the switch port")
		noContainers(t)
	})
}

// The lab's Ray for a test: real unless the test asks for the fast mode;
// RAYFORM_E2E_RAY overrides both.
func TestLabRay(t *testing.T) {
	tests := []struct {
		env   string
		extra []string
		want  string
	}{
		{"", nil, "-ray real"},
		{"", []string{"-nodes", "3"}, "-nodes 3 -ray real"},
		{"", append([]string{"-torch"}, fastRay...), "-torch -ray simnode"},
		{"simnode", []string{"-nodes", "3"}, "-nodes 3 -ray simnode"},
		{"real", fastRay, "-ray real"},
	}
	for _, tt := range tests {
		t.Setenv("RAYFORM_E2E_RAY", tt.env)
		if got := strings.Join(labRay(tt.extra), " "); got != tt.want {
			t.Errorf("RAYFORM_E2E_RAY=%q, extra %q: %q, want %q", tt.env, tt.extra, got, tt.want)
		}
	}
}
