//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EDayTwo operates one applied cluster the way its users live with
// it, in one lab: outputs without the hosts, status and logs over SSH,
// the project found from another checkout, -replace, plan -destroy and
// show, destroy -target keeping the cluster, and a saved destroy plan.
// The subtests run in order and share the cluster.
func TestE2EDayTwo(t *testing.T) {
	l := startLab(t, "rfe2eday2")
	project := l.name + "-day2"
	t.Cleanup(func() { os.RemoveAll("/var/tmp/rayform/" + project) })
	// Pipeline parallel across the two nodes: the serve spans the worker.
	pp := strings.Replace(clusterConfig("enp1s0f1np1", seedImage, false, 0.85),
		"tensor_parallel_size   = 2", "tensor_parallel_size   = 1\n  pipeline_parallel_size = 2", 1)
	if !strings.Contains(pp, "pipeline_parallel_size = 2") {
		t.Fatal("the e2e configuration changed: no tensor_parallel_size = 2 to turn into PP=2")
	}
	body := "rayform {\n  project = \"" + project + "\"\n}\n\n" + pp
	dir := l.config(body)
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }
	headID := func(t *testing.T) string {
		out, err := l.ssh("spark1", "docker inspect -f '{{.Id}}' rayform-spark")
		if err != nil {
			t.Fatalf("inspecting the head: %v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	r := run("apply", "-auto-approve")
	mustCode(t, "apply", r, exitOK)
	if st, err := os.ReadFile(filepath.Join(dir, ".rayform", "state.json")); err != nil || !strings.Contains(string(st), `"project": "`+project+`"`) {
		t.Fatalf("the state does not record the declared project (%v):\n%s", err, st)
	}
	if out, err := l.ssh("spark1", "docker inspect -f '{{index .Config.Labels \"rayform.project\"}}' rayform-spark"); err != nil || strings.TrimSpace(out) != project {
		t.Fatalf("the head's project label is %q (%v), want the declared %q", out, err, project)
	}
	// One completion (apply's own test made another), so the serve's
	// metrics have something to count.
	if out, err := l.ssh("spark1", `curl -sS -m 10 http://192.168.200.12:8000/v1/completions -H 'Content-Type: application/json' -d '{"model":"qwen3.5-122b","prompt":"Hello","max_tokens":4}'`); err != nil || !strings.Contains(out, `"text"`) {
		t.Fatalf("completion: %v\n%s", err, out)
	}

	t.Run("output", func(t *testing.T) {
		// The lab's hosts are cut off from the client's view: output must
		// not need them. A state path relative to the directory is enough.
		r := run("output", "-raw", "endpoint")
		mustCode(t, "output -raw", r, exitOK)
		if r.stdout != "http://192.168.200.12:8000/v1" {
			t.Errorf("output -raw endpoint = %q", r.stdout)
		}
		r = run("output", "-json")
		mustCode(t, "output -json", r, exitOK)
		var doc map[string]struct {
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || string(doc["endpoint"].Value) != `"http://192.168.200.12:8000/v1"` {
			t.Errorf("output -json: %v\n%s", err, r.stdout)
		}
	})

	t.Run("status", func(t *testing.T) {
		r := run("status")
		mustCode(t, "status", r, exitOK)
		mustContain(t, "status", r.stdout, "Project "+project+": healthy", "spark1", "reachable", "rayform-spark",
			"192.168.200.12   ALIVE  head", "192.168.200.13   ALIVE", "health    ok (/health 200)", "model     qwen3.5-122b",
			"finished, 0 running, 0 waiting", "endpoint  http://192.168.200.12:8000/v1")
		r = run("status", "-json")
		mustCode(t, "status -json", r, exitOK)
		var rep statusJSON
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("status -json is not JSON: %v\n%s", err, r.stdout)
		}
		if !rep.Healthy || len(rep.Serves) != 1 || rep.Serves[0].Metrics == nil || rep.Serves[0].Metrics.GenerationTokens < 4 || rep.Serves[0].Metrics.RequestsFinished < 2 || rep.Serves[0].UptimeSeconds < 0 {
			t.Errorf("status -json: %+v\n%s", rep, r.stdout)
		}
	})

	t.Run("logs", func(t *testing.T) {
		r := run("logs", "vllm_serve.qwen", "-tail", "3") // flags after the address, as people type them
		mustCode(t, "logs of the serve", r, exitOK)
		lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
		if len(lines) != 3 {
			t.Errorf("logs -tail 3 printed %d lines:\n%s", len(lines), r.stdout)
		}
		for _, line := range lines {
			if !strings.HasPrefix(line, "spark1 | ") {
				t.Errorf("serve log line without its node: %q", line)
			}
		}
		r = run("logs", "ray_cluster.spark")
		mustCode(t, "logs of the cluster", r, exitOK)
		mustContain(t, "logs of the cluster", r.stdout+r.stderr, "spark1 | ", "spark2 | ")
		r = run("logs", "-node", "spark2", "ray_cluster.spark")
		mustCode(t, "logs -node", r, exitOK)
		if strings.Contains(r.stdout+r.stderr, "spark1 | ") {
			t.Errorf("logs -node spark2 printed spark1's lines:\n%s", r)
		}

		// -f follows the serve's log as it grows, until interrupted.
		cmd, out := l.start("-chdir="+dir, "logs", "-f", "-tail", "1", "vllm_serve.qwen")
		waitFor(t, "logs -f to print the last line", 30*time.Second, func() bool { return strings.Contains(out.String(), "spark1 | ") })
		hostLog := "/var/tmp/rayform/" + project + "/spark1/rayform-spark/serve-qwen.log"
		if o, err := l.ssh("spark1", "echo day-two-marker >> "+hostLog); err != nil {
			t.Fatalf("appending to the serve log: %v\n%s", err, o)
		}
		waitFor(t, "logs -f to follow the new line", 30*time.Second, func() bool { return strings.Contains(out.String(), "spark1 | day-two-marker") })
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("logs -f interrupted: %v\n%s", err, out.String())
		}
	})

	t.Run("another checkout", func(t *testing.T) {
		// The same configuration cloned elsewhere, without a state:
		// the declared project finds the running cluster.
		other := l.config(body)
		r := l.rayform("", "-chdir="+other, "plan", "-detailed-exitcode")
		mustCode(t, "plan from another checkout", r, exitOK)
		mustContain(t, "plan from another checkout", r.stdout, "No changes.")
		// Without the declaration the project is the directory's name:
		// the running containers are recognised as rayform's, of the
		// other project, and never offered for removal.
		undeclared := l.config(pp)
		r = l.rayform("", "-chdir="+undeclared, "plan")
		mustCode(t, "plan of the undeclared copy", r, exitError)
		mustContain(t, "plan of the undeclared copy", r.stdout, `belongs to rayform project "`+project+`"`, `declare rayform { project = "`+project+`" }`)
		if strings.Contains(r.stdout, "docker rm") {
			t.Errorf("the plan suggests removing a rayform container:\n%s", r.stdout)
		}
		// A second deployment on the same nodes, under its own name: it
		// would fail to bind the ports the first one holds. Plan says so,
		// naming what holds them.
		second := strings.Replace(body, `project = "`+project+`"`, `project = "`+project+`-b"`, 1)
		second = strings.Replace(second, "memory_monitor = false", "memory_monitor = false\n  container_name = \"rayform-second\"", 1)
		t.Cleanup(func() { os.RemoveAll("/var/tmp/rayform/" + project + "-b") })
		r = l.rayform("", "-chdir="+l.config(second), "plan")
		mustCode(t, "plan of a second deployment", r, exitError)
		mustContain(t, "plan of a second deployment", r.stdout, "port 6379 on spark1 is already in use", "port 8265 on spark1 is already in use",
			"port 8000 on spark1 is already in use")
		// The holder is named: the real Ray's gcs_server, or simnode with
		// RAYFORM_E2E_RAY=simnode.
		if !regexp.MustCompile(`listens on \S+:6379 by (simnode|gcs_server) \(pid \d+\)`).MatchString(r.stdout) {
			t.Errorf("plan of a second deployment does not name what holds port 6379:\n%s", r.stdout)
		}
	})

	t.Run("replace", func(t *testing.T) {
		before := headID(t)
		r := run("apply", "-auto-approve", "-replace=vllm_serve.qwen")
		mustCode(t, "apply -replace", r, exitOK)
		mustContain(t, "apply -replace", r.stdout, "replacement requested with -replace", "Apply complete! Resources: 1 added, 0 changed, 1 destroyed.")
		if headID(t) != before {
			t.Error("-replace of the serve recreated the head container")
		}
		mustCode(t, "plan after -replace", run("plan", "-detailed-exitcode"), exitOK)
	})

	t.Run("hung serve", func(t *testing.T) {
		// SIGSTOP: the process lives and its port accepts connections,
		// but nothing answers. Unhealthy, drift, repaired by apply.
		if out, err := l.ssh("spark1", "docker exec rayform-spark sh -c 'kill -STOP $(cat /tmp/rayform/serve/serve-qwen.pid)'"); err != nil {
			t.Fatalf("stopping vllm serve: %v\n%s", err, out)
		}
		r := run("status")
		mustCode(t, "status of a hung serve", r, exitUnhealthy)
		mustContain(t, "status of a hung serve", r.stdout, "NOT HEALTHY", "health    hung")
		r = run("plan", "-detailed-exitcode")
		mustCode(t, "plan of a hung serve", r, exitChanges)
		mustContain(t, "plan of a hung serve", r.stdout, "the vllm serve process runs but is hung", "# vllm_serve.qwen must be replaced")
		r = run("apply", "-auto-approve")
		mustCode(t, "apply repairing the hung serve", r, exitOK)
		mustContain(t, "apply repairing the hung serve", r.stdout, "Apply complete! Resources: 1 added, 0 changed, 1 destroyed.")
		mustCode(t, "status after the repair", run("status"), exitOK)
	})

	t.Run("worker restart", func(t *testing.T) {
		// The serve spans both nodes (pipeline_parallel_size = 2): a worker
		// that went away takes the serve with it on real vLLM. apply
		// stops the serve before the cluster changes, and starts it
		// again after.
		if out, err := l.ssh("spark2", "docker stop rayform-spark"); err != nil {
			t.Fatalf("stopping the worker: %v\n%s", err, out)
		}
		r := run("plan", "-detailed-exitcode")
		mustCode(t, "plan after the worker stopped", r, exitChanges)
		mustContain(t, "plan after the worker stopped", r.stdout, "# ray_cluster.spark will be updated in-place",
			"# vllm_serve.qwen must be replaced", "its Ray cluster restarts or removes a node it spans (spark2)")
		r = run("apply", "-auto-approve")
		mustCode(t, "apply after the worker stopped", r, exitOK)
		stop := strings.Index(r.stdout, "vllm_serve.qwen: stop vllm serve qwen")
		worker := strings.Index(r.stdout, "ray_cluster.spark: Modifying")
		start := strings.Index(r.stdout, "vllm_serve.qwen: start vllm serve qwen")
		if stop < 0 || worker < 0 || start < 0 || !(stop < worker && worker < start) {
			t.Errorf("apply did not stop the serve (at %d), then restart the worker (at %d), then start the serve (at %d):\n%s", stop, worker, start, r.stdout)
		}
		mustCode(t, "plan after the repair", run("plan", "-detailed-exitcode"), exitOK)
	})

	planFile := filepath.Join(t.TempDir(), "destroy.plan")
	t.Run("plan -destroy and show", func(t *testing.T) {
		r := run("plan", "-destroy", "-target=vllm_serve.qwen", "-detailed-exitcode")
		mustCode(t, "plan -destroy -target", r, exitChanges)
		mustContain(t, "plan -destroy -target", r.stdout, "Plan: 0 to add, 0 to change, 1 to destroy.")
		r = run("plan", "-destroy", "-out", planFile)
		mustCode(t, "plan -destroy -out", r, exitOK)
		mustContain(t, "plan -destroy -out", r.stdout, "# ray_cluster.spark will be destroyed", "# vllm_serve.qwen will be destroyed", "Plan: 0 to add, 0 to change, 2 to destroy.")
		r = run("show", planFile)
		mustCode(t, "show", r, exitOK)
		mustContain(t, "show", r.stdout, "Options: -destroy", "# vllm_serve.qwen will be destroyed", "Plan: 0 to add, 0 to change, 2 to destroy.")
		r = run("show", "-json", planFile)
		mustCode(t, "show -json", r, exitOK)
		mustContain(t, "show -json", r.stdout, `"type":"planned_change"`, `"operation":"plan"`)
	})

	t.Run("destroy -target keeps the cluster", func(t *testing.T) {
		before := headID(t)
		r := run("destroy", "-auto-approve", "-target=vllm_serve.qwen")
		mustCode(t, "destroy -target", r, exitOK)
		mustContain(t, "destroy -target", r.stdout, "Destroy complete! Resources: 0 added, 0 changed, 1 destroyed.")
		if strings.Contains(r.stdout, "ray_cluster.spark: Destroying") {
			t.Errorf("destroy -target of the serve destroyed its cluster:\n%s", r.stdout)
		}
		if headID(t) != before {
			t.Error("destroy -target of the serve removed the head container")
		}
		r = run("plan")
		mustContain(t, "plan after destroy -target", r.stdout, "# vllm_serve.qwen will be created", "Plan: 1 to add, 0 to change, 0 to destroy.")
		// The saved destroy plan was made before: it is stale now.
		r = run("apply", planFile)
		mustCode(t, "apply of the stale destroy plan", r, exitError)
	})

	t.Run("saved destroy plan", func(t *testing.T) {
		mustCode(t, "plan -destroy -out", run("plan", "-destroy", "-out", planFile), exitOK)
		r := run("apply", planFile)
		mustCode(t, "apply of the destroy plan", r, exitOK)
		mustContain(t, "apply of the destroy plan", r.stdout, "Destroy complete! Resources: 0 added, 0 changed, 1 destroyed.")
		for _, node := range []string{"spark1", "spark2"} {
			out, err := l.ssh(node, "docker ps -a --filter label=rayform.managed=true --format '{{.Names}}'; echo end")
			if err != nil || strings.TrimSpace(out) != "end" {
				t.Errorf("rayform containers left on %s: %v\n%s", node, err, out)
			}
		}
		r = run("status")
		mustCode(t, "status after destroy", r, exitUnhealthy)
	})
}
