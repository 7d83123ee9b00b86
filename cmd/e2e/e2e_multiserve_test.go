//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// e2eSparkCluster is the lab's cluster, head spark1 and worker spark2
// (the image a %q verb), for tests of the serves on it.
const e2eSparkCluster = `
network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = "enp1s0f1np1"
}

ray_cluster "spark" {
  image           = %q
  head            = node.spark1
  workers         = [node.spark2]
  network         = network.fabric
  memory_monitor  = false
  dataplane_check = false
}
`

// e2eTwoServes is the lab's cluster (2 GPUs a node) with two serves of
// one GPU each on ports 8000 and 8001: issue 20's shape
// (testdata/config/valid/two-clusters declares it too).
const e2eTwoServes = e2eSparkCluster + `
vllm_serve "a" {
  cluster                = ray_cluster.spark
  model                  = "Qwen/Qwen3-0.6B"
  served_model_name      = "model-a"
  gpu_memory_utilization = 0.4
  port                   = 8000
  ready_timeout          = "2m"
}

vllm_serve "b" {
  cluster                = ray_cluster.spark
  model                  = "facebook/opt-125m"
  served_model_name      = "model-b"
  gpu_memory_utilization = 0.4
  port                   = %d
  ready_timeout          = "2m"
}
`

// TestE2ETwoServesOnOneCluster is issue 20's bug in the lab: two serves on
// one cluster never converged (observe probed only the last serve's port
// and judged both against its models). Now apply, then plan
// -detailed-exitcode exits 0, and status shows each serve with its own
// health and model. Then issue 22 item 9: a foreign listener on a serve's
// port gets no request from plan, which names it.
func TestE2ETwoServesOnOneCluster(t *testing.T) {
	// Fast mode: the subject is observing two serves of one cluster
	// (their ports, models and health) and a foreign listener, not Ray.
	l := startLab(t, "rfe2e2srv", append([]string{"-gpus", "2"}, fastRay...)...)
	dir := l.config(fmt.Sprintf(e2eTwoServes, seedImage, 8001))
	twoGPUs(t, dir)
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }

	mustCode(t, "apply", run("apply", "-auto-approve"), exitOK)
	mustCode(t, "plan after apply", run("plan", "-detailed-exitcode"), exitOK)
	mustCode(t, "second plan", run("plan", "-detailed-exitcode"), exitOK)

	r := run("status")
	mustCode(t, "status", r, exitOK)
	mustContain(t, "status", r.stdout, "Serve vllm_serve.a on spark1:", "Serve vllm_serve.b on spark1:", "model     model-a", "model     model-b")
	r = run("status", "-json")
	mustCode(t, "status -json", r, exitOK)
	var rep statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status -json: %v\n%s", err, r.stdout)
	}
	if len(rep.Serves) != 2 {
		t.Fatalf("status shows %d serves:\n%s", len(rep.Serves), r.stdout)
	}
	for i, want := range []string{"model-a", "model-b"} {
		if s := rep.Serves[i]; s.Health != "ok" || len(s.Models) != 1 || s.Models[0] != want {
			t.Errorf("%s: %s (%s), models %v; want ok serving %s", s.Address, s.Health, s.HealthDetail, s.Models, want)
		}
	}

	t.Run("a third serve is refused at plan", func(t *testing.T) {
		// Issue 22 item 3: each serve's engine takes one of the head's 2
		// GPUs; a third serve would never start. plan refuses it, and apply
		// changes nothing.
		main := filepath.Join(dir, "main.hcl")
		before := mustRead(t, main)
		t.Cleanup(func() { _ = os.WriteFile(main, []byte(before), 0o644) })
		third := "\nvllm_serve \"c\" {\n  cluster                = ray_cluster.spark\n  model                  = \"facebook/opt-125m\"\n  served_model_name      = \"model-c\"\n  gpu_memory_utilization = 0.1\n  port                   = 8003\n}\n"
		if err := os.WriteFile(main, []byte(before+third), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run("plan")
		mustCode(t, "plan with a third serve", r, exitError)
		mustContain(t, "plan with a third serve", r.stdout+r.stderr, "3 serves on ray_cluster.spark, but its head spark1 has 2 GPUs",
			"vllm_serve.a needs 1 (1 × 1)", "vllm_serve.c needs 1 (1 × 1)")
		r = run("apply", "-auto-approve")
		mustCode(t, "apply with a third serve", r, exitError)
		if err := os.WriteFile(main, []byte(before), 0o644); err != nil {
			t.Fatal(err)
		}
		mustCode(t, "plan without the third serve", run("plan", "-detailed-exitcode"), exitOK)
	})

	t.Run("foreign listener on a serve's port", func(t *testing.T) {
		// Move serve b to port 8002, where something else listens.
		log := filepath.Join(t.TempDir(), "requests")
		startForeignListener(t, l.name+"-spark1", 8002, log)
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(strings.Replace(mustRead(t, filepath.Join(dir, "main.hcl")), "port                   = 8001", "port                   = 8002", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run("plan")
		mustContain(t, "plan", r.stdout+r.stderr, "port 8002 on spark1 is already in use")
		if b, _ := os.ReadFile(log); len(b) > 0 {
			t.Errorf("plan sent the foreign listener:\n%s", b)
		}
		// Serve a, untouched, still reads ok.
		r = run("status", "-json")
		var rep statusJSON
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("status -json: %v\n%s", err, r.stdout)
		}
		if rep.Serves[0].Health != "ok" {
			t.Errorf("serve a: %+v", rep.Serves[0])
		}
		if b, _ := os.ReadFile(log); len(b) > 0 {
			t.Errorf("status sent the foreign listener:\n%s", b)
		}
	})
}

// twoGPUs declares 2 GPUs on the lab's nodes (the lab was started with
// -gpus 2; l.config declares 1).
func twoGPUs(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "main.hcl")
	src := strings.ReplaceAll(mustRead(t, p), "gpus          = 1\n", "gpus          = 2\n")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHelperForeignListener is not a test: started by
// startForeignListener inside a lab node's network namespace, it listens
// on RF_FOREIGN_PORT (a process that is none of rayform's), says
// "listening", and logs every request it gets to RF_FOREIGN_LOG.
func TestHelperForeignListener(t *testing.T) {
	port, log := os.Getenv("RF_FOREIGN_PORT"), os.Getenv("RF_FOREIGN_LOG")
	if port == "" {
		t.Skip("helper process")
	}
	ln, err := net.Listen("tcp", "0.0.0.0:"+port)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	fmt.Println("listening")
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, r.Method, r.URL.Path)
			f.Close()
		}
	}))
	os.Exit(0)
}

// startForeignListener runs TestHelperForeignListener in netns on port.
func startForeignListener(t *testing.T, netns string, port int, log string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", netns, os.Args[0], "-test.run=^TestHelperForeignListener$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("RF_FOREIGN_PORT=%d", port), "RF_FOREIGN_LOG="+log)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "listening" {
		t.Fatalf("foreign listener: %q %v", line, err)
	}
}
