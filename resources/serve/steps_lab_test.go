package serve_test

import (
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/internal/steplab"
	"github.com/rayform/rayform/resources/serve"
	"github.com/rayform/rayform/resources/stepenv"
)

// The -update flag rewrites the steps' golden files (steplab.Golden).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// walkWork walks the steps of w (the serve kind's) in the fake lab.
func walkWork(t *testing.T, env *stepenv.StepEnv, w *kind.Work) ([]string, error) {
	t.Helper()
	return steplab.Walk(t, w, serve.StepsWith(env.WithDefaults(), w))
}

func TestServeSteps(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *steplab.Host)
		work  *kind.Work
	}{
		{"serve-create", func(h *steplab.Host) {}, steplab.QwenWork(plan.Create, steplab.QwenServe(), false)},
		{"serve-replace", func(h *steplab.Host) {
			h.Serve = steplab.Serve{Exists: true, Alive: true, IgnoreTerm: true, Log: []byte("old log\n")}
		}, steplab.QwenWork(plan.Replace, steplab.QwenServe(), true)},
		{"serve-delete", func(h *steplab.Host) {
			h.Serve = steplab.Serve{Exists: true, Alive: true}
		}, steplab.QwenWork(plan.Delete, steplab.QwenServe(), true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := steplab.New(t, "spark1", "spark2")
			l.Run(steplab.PairSpecs("192.168.200.12")...)
			h := l.Hosts["spark1"]
			tt.setup(h)
			if serve.WorkOf(tt.work).Start {
				h.Serve.Chunks = steplab.QwenStartupLog()
			}
			h.Models = steplab.QwenModels
			lines, err := walkWork(t, l.Env(), tt.work)
			if err != nil {
				t.Fatalf("walk: %v\n%s", err, strings.Join(lines, "\n"))
			}
			steplab.Golden(t, tt.name, steplab.Render(lines, nil, l))
			if want := serve.WorkOf(tt.work).Start; h.Serve.Alive != want {
				t.Errorf("serve alive = %v, want %v", h.Serve.Alive, want)
			}
			if len(l.Hosts["spark2"].Fake.Calls()) != 0 {
				t.Errorf("a serve that works touched spark2: %s", l.Hosts["spark2"].Fake.Transcript())
			}
		})
	}
}

// TestServeFailureDiagnosed: the seeds' c10d failure in the serve log makes
// the step fail with the classified cause and its evidence.
func TestServeFailureDiagnosed(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "diagnose", "c10d-unreachable.log"))
	if err != nil {
		t.Fatal(err)
	}
	var c10d []byte
	for _, line := range strings.SplitAfter(string(raw), "\n") {
		if !strings.HasPrefix(line, "# ") {
			c10d = append(c10d, line...)
		}
	}
	tests := []struct {
		name  string
		tail  []byte
		die   bool
		cause string
	}{
		{"process exits", nil, true, "vllm serve qwen (pid 4242) exited on spark1 before it was ready"},
		{"engine core wrapper", []byte("(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"), false,
			"vllm serve qwen failed on spark1: RuntimeError: Engine core initialization failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := steplab.New(t, "spark1", "spark2")
			l.Run(steplab.PairSpecs("192.168.200.12")...)
			h := l.Hosts["spark1"]
			h.Serve.Chunks = [][]byte{steplab.QwenStartupLog()[0], c10d, tt.tail}
			h.Serve.Die = tt.die
			l.Hosts["spark2"].Containers["rayform-main"].Logs = "(RayWorkerWrapper pid=249, ip=192.168.200.13) INFO worker started\n"
			env := l.Env()
			env.Diagnose = diagnose.Context{
				FabricCIDR: netip.MustParsePrefix("192.168.200.0/24"), FabricInterface: "enp1s0f1np1",
				NodeAddrs: map[string]string{"spark1": "192.168.200.12", "spark2": "192.168.200.13"},
				MgmtAddrs: map[string]string{"spark1": "10.1.230.180", "spark2": "10.1.230.181"},
				Cluster:   steplab.Cluster, Network: "network.fabric",
			}
			w := steplab.QwenWork(plan.Create, steplab.QwenServe(), false)
			serve.WorkOf(w).ClusterNodes = []string{"spark1", "spark2"}
			lines, err := walkWork(t, env, w)
			if err == nil {
				t.Fatal("no error for a failed serve")
			}
			msg := err.Error()
			for _, want := range []string{tt.cause, "Cause: vLLM's c10d master 10.1.230.180:55053 is unreachable from spark2",
				"(10.1.230.180, 55053)", "Fix: ", "network = network.fabric"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q:\n%s", want, msg)
				}
			}
			var de *stepenv.DiagnosedError
			if !errors.As(err, &de) || de.Diagnosis.Cause != diagnose.C10dUnreachable {
				t.Errorf("diagnosis = %+v, want %s", de, diagnose.C10dUnreachable)
			}
			// The c10d line showed up as a warning while it was starting.
			if got := strings.Join(lines, "\n"); !strings.Contains(got, "warning: [E408") {
				t.Errorf("no c10d warning among the progress lines:\n%s", got)
			}
			// The worker's container log was read for the diagnosis.
			if tr := l.Hosts["spark2"].Fake.Transcript(); !strings.Contains(tr, "docker logs --tail 400 rayform-main") {
				t.Errorf("worker log not read:\n%s", tr)
			}
		})
	}
}

func TestServeReadyTimeout(t *testing.T) {
	l := steplab.New(t, "spark1")
	l.Run(steplab.PairSpecs("192.168.200.12")[0])
	h := l.Hosts["spark1"]
	h.Serve.Chunks = steplab.QwenStartupLog()[:2] // loads forever
	w := steplab.QwenWork(plan.Create, steplab.QwenServe(), false)
	serve.WorkOf(w).ReadyTimeout = time.Minute
	_, err := walkWork(t, l.Env(), w)
	if err == nil || !strings.Contains(err.Error(), "vllm serve qwen on spark1 is not ready after 1m0s") {
		t.Fatalf("err = %v", err)
	}
}

// A failed start asks the host what the log cannot say: who holds the
// serve's port (ss on the head: the containers share its network), and
// the image's vLLM version when vLLM refused its command line.
func TestServeFailureProbesTheHost(t *testing.T) {
	tests := []struct {
		name, log   string
		ss, version string
		cause       diagnose.Cause
		wants       []string
	}{
		{"port held", "error while attempting to bind on address ('0.0.0.0', 8000): address already in use\n",
			`LISTEN 0      2048         0.0.0.0:8000      0.0.0.0:*    users:(("python3",pid=4121,fd=20))` + "\n", "",
			diagnose.AddrInUse, []string{"port 8000 is already in use on spark1", "held by pid 4121 (python3)"}},
		{"image's vLLM lacks an option", "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\nvllm: error: unrecognized arguments: --kv-cache-memory-bytes 4G\n",
			"", "0.10.1",
			diagnose.VLLMArgs, []string{"vLLM 0.10.1 in", "does not know --kv-cache-memory-bytes", "vLLM 0.17.1 has --kv-cache-memory-bytes; the image's 0.10.1 does not."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := steplab.New(t, "spark1", "spark2")
			l.Run(steplab.PairSpecs("192.168.200.12")...)
			h := l.Hosts["spark1"]
			h.Serve.Chunks = [][]byte{[]byte(tt.log)}
			h.Serve.Die = true
			h.SS, h.VLLMVersion = tt.ss, tt.version
			env := l.Env()
			w := steplab.QwenWork(plan.Create, steplab.QwenServe(), false)
			serve.WorkOf(w).ClusterNodes = []string{"spark1", "spark2"}
			_, err := walkWork(t, env, w)
			var de *stepenv.DiagnosedError
			if !errors.As(err, &de) || de.Diagnosis.Cause != tt.cause {
				t.Fatalf("err = %v, want a %s diagnosis", err, tt.cause)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%s", w, err)
				}
			}
		})
	}
}
