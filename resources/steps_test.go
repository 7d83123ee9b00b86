package resources

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/dag"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/hostenv"
	"github.com/rayform/rayform/resources/internal/steplab"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/serve"
	"github.com/rayform/rayform/resources/servedir"
)

const stepsCluster = "ray_cluster.main"

// pairSpecs is the seeds' pair: spark1 (head, 192.168.200.12) and spark2
// (worker, 192.168.200.13), one GPU each, pinned to the fabric.
func pairSpecs(ip1 string) []cluster.ContainerSpec {
	mk := func(node, role, ip string) cluster.ContainerSpec {
		return cluster.ContainerSpec{Resource: stepsCluster, Node: node, Role: role, Name: "rayform-main", Image: steplab.Image,
			NodeIP: ip, HeadAddr: "192.168.200.12:6379", GPUs: 1, Port: 6379, DashboardPort: 8265,
			Env: map[string]string{"VLLM_HOST_IP": ip, "NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
				"RAY_memory_monitor_refresh_ms": "0", "VLLM_CONFIG_ROOT": cluster.VLLMConfigRoot},
			NonCarryOver: network.EnvKeys(), ServeDir: servedir.Dir}
	}
	return []cluster.ContainerSpec{mk("spark1", "head", ip1), mk("spark2", "worker", "192.168.200.13")}
}

func pairWork(action plan.Action, specs []cluster.ContainerSpec, start []string, remove ...string) *Work {
	w := &Work{Address: stepsCluster, Type: "ray_cluster", Action: action, Hosts: []string{"spark1", "spark2"},
		Do: &cluster.ClusterWork{Name: "main", Specs: specs, Start: map[string]bool{}, HeadAddr: "192.168.200.12:6379"}}
	for _, n := range start {
		cluster.WorkOf(w).Start[n] = true
	}
	for _, n := range remove {
		cluster.WorkOf(w).Remove = append(cluster.WorkOf(w).Remove, cluster.Removal{Node: n, Container: "rayform-main"})
	}
	return w
}

// walkWork walks the steps of w (Steps) in the fake lab.
func walkWork(t *testing.T, env *hostenv.StepEnv, w *Work) ([]string, error) {
	t.Helper()
	return steplab.Walk(t, w, Steps(env, w))
}

func TestClusterSteps(t *testing.T) {
	old := pairSpecs("10.1.230.180") // the head as the seeds first ran it
	tests := []struct {
		name  string
		setup func(l *steplab.Lab)
		work  *Work
	}{
		{
			name:  "cluster-create",
			setup: func(l *steplab.Lab) { delete(l.Hosts["spark2"].Images, steplab.Image) },
			work:  pairWork(plan.Create, pairSpecs("192.168.200.12"), []string{"spark1", "spark2"}),
		},
		{
			name:  "cluster-replace",
			setup: func(l *steplab.Lab) { l.Run(old...) },
			work:  pairWork(plan.Replace, pairSpecs("192.168.200.12"), []string{"spark1", "spark2"}, "spark1", "spark2"),
		},
		{
			name: "cluster-update-worker",
			setup: func(l *steplab.Lab) {
				l.Run(pairSpecs("192.168.200.12")[0])
				stale := pairSpecs("192.168.200.12")[1]
				stale.Volumes = []string{"/old:/old"}
				l.Run(stale)
			},
			work: pairWork(plan.Update, pairSpecs("192.168.200.12"), []string{"spark2"}, "spark2"),
		},
		{
			name: "cluster-delete",
			setup: func(l *steplab.Lab) {
				l.Run(pairSpecs("192.168.200.12")...)
			},
			work: &Work{Address: stepsCluster, Type: "ray_cluster", Action: plan.Delete, Hosts: []string{"spark1", "spark2"},
				Do: &cluster.ClusterWork{Name: "main", Start: map[string]bool{},
					Remove: []cluster.Removal{{Node: "spark1", Container: "rayform-main"}, {Node: "spark2", Container: "rayform-main"}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := steplab.New(t, "spark1", "spark2")
			tt.setup(l)
			lines, err := walkWork(t, l.Env(), tt.work)
			if err != nil {
				t.Fatalf("walk: %v\n%s", err, strings.Join(lines, "\n"))
			}
			steplab.Golden(t, tt.name, steplab.Render(lines, nil, l))
			// The hosts end as declared: the spec's containers run, nothing else.
			for _, n := range []string{"spark1", "spark2"} {
				c := l.Hosts[n].Containers["rayform-main"]
				if tt.work.Action == plan.Delete {
					if c != nil {
						t.Errorf("%s: container left after delete", n)
					}
					continue
				}
				if c == nil || !c.Running || c.Labels[cluster.LabelSpecHash] != specFor(tt.work, n).Hash() {
					t.Errorf("%s: container %+v, want the declared spec running", n, c)
				}
			}
			// Every mutating command is marked so; reads are not.
			for _, c := range l.Calls() {
				if c.Upload {
					continue
				}
				line := c.Cmd.String()
				mut := strings.Contains(line, "docker run") || strings.Contains(line, "docker stop") ||
					strings.Contains(line, "docker rm") || strings.Contains(line, "docker pull") ||
					strings.HasPrefix(line, "rm -rf -- /var/tmp/rayform/")
				if mut != c.Cmd.Mutating {
					t.Errorf("%q: Mutating = %v", line, c.Cmd.Mutating)
				}
			}
		})
	}
}

func specFor(w *Work, node string) cluster.ContainerSpec {
	for _, s := range cluster.WorkOf(w).Specs {
		if s.Node == node {
			return s
		}
	}
	return cluster.ContainerSpec{}
}

// TestClusterSecondApply: a container already running the spec is left
// alone: the start steps are skipped and nothing is changed.
func TestClusterSecondApply(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	specs := pairSpecs("192.168.200.12")
	l.Run(specs...)
	lines, err := walkWork(t, l.Env(), pairWork(plan.Update, specs, []string{"spark1", "spark2"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range l.Hosts {
		for _, m := range h.Fake.Mutations() {
			if !strings.Contains(m.Line(), "command -v ray") {
				t.Errorf("%s: mutating call %s on a cluster already as declared", h.Name, m.Line())
			}
		}
	}
	if got := strings.Join(lines, "\n"); !strings.Contains(got, "skipped: start ray head on spark1") ||
		!strings.Contains(got, "skipped: start ray workers on spark2") {
		t.Errorf("start steps not skipped:\n%s", got)
	}
}

func TestRemoveRefusesForeignContainer(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
	}{
		{"unlabelled", map[string]string{"maintainer": "someone"}},
		{"other project", map[string]string{cluster.LabelManaged: "true", cluster.LabelProject: "other", cluster.LabelResource: stepsCluster}},
		{"other resource", map[string]string{cluster.LabelManaged: "true", cluster.LabelProject: steplab.Project, cluster.LabelResource: "ray_cluster.other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := steplab.New(t, "spark1", "spark2")
			l.Run(pairSpecs("192.168.200.12")[0])
			l.Hosts["spark2"].Containers["rayform-main"] = &steplab.Container{Labels: tt.labels, Running: true}
			w := &Work{Address: stepsCluster, Type: "ray_cluster", Action: plan.Delete,
				Do: &cluster.ClusterWork{Name: "main", Start: map[string]bool{},
					Remove: []cluster.Removal{{Node: "spark1", Container: "rayform-main"}, {Node: "spark2", Container: "rayform-main"}}}}
			_, err := walkWork(t, l.Env(), w)
			if err == nil || !strings.Contains(err.Error(), "refusing to remove container rayform-main on spark2") ||
				!strings.Contains(err.Error(), "never touches a container it did not create") {
				t.Fatalf("err = %v, want a refusal naming spark2", err)
			}
			// Refused before anything was removed, on any host.
			for _, h := range l.Hosts {
				if m := h.Fake.Mutations(); len(m) > 0 {
					t.Errorf("%s: mutating calls %v despite the refusal", h.Name, m[0].Line())
				}
			}
			if l.Hosts["spark2"].Containers["rayform-main"] == nil || l.Hosts["spark1"].Containers["rayform-main"] == nil {
				t.Error("a container was removed")
			}
		})
	}
}

func TestImageWithoutRay(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	l.Hosts["spark1"].NoRay = true
	l.Hosts["spark2"].NoRay = true
	_, err := walkWork(t, l.Env(), pairWork(plan.Create, pairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	if err == nil {
		t.Fatal("no error for an image without ray")
	}
	for _, want := range []string{"Ray missing from the image " + steplab.Image, "pip install 'ray[default]'", "set image on " + stepsCluster} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, c := range l.Calls() {
		if strings.Contains(c.Line(), "docker run -d") {
			t.Errorf("a container was started: %s", c.Line())
		}
	}
}

func TestHeadRegisteredElsewhere(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	l.Hosts["spark1"].RayIP = "10.1.230.180"
	_, err := walkWork(t, l.Env(), pairWork(plan.Create, pairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	if err == nil {
		t.Fatal("no error for a head registered under its management address")
	}
	for _, want := range []string{"registered in Ray's node table as 10.1.230.180", "not its fabric address 192.168.200.12", "Cause: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	var de *hostenv.DiagnosedError
	if !errors.As(err, &de) {
		t.Errorf("error %T carries no diagnosis", err)
	}
	for _, c := range l.Hosts["spark2"].Fake.Calls() {
		if strings.Contains(c.Line(), "docker run -d") {
			t.Errorf("the worker was started against a misregistered head: %s", c.Line())
		}
	}
}

func TestWorkerCannotReachGCS(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	l.Hosts["spark2"].GCSClosed = true
	_, err := walkWork(t, l.Env(), pairWork(plan.Create, pairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	if err == nil || !strings.Contains(err.Error(), "spark2 cannot open a TCP connection to the ray head's GCS at 192.168.200.12:6379") {
		t.Fatalf("err = %v", err)
	}
}

func TestVerifyTableTimesOut(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	l.Hosts["spark2"].GPUs = 0 // Ray sees no GPU on the worker
	env := l.Env()
	start := l.Clock.Now()
	_, err := walkWork(t, env, pairWork(plan.Create, pairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	if err == nil || !strings.Contains(err.Error(), "spark2 (192.168.200.13) has 0 GPUs in Ray, want 1") ||
		!strings.Contains(err.Error(), "Cause: ") {
		t.Fatalf("err = %v", err)
	}
	if waited := l.Clock.Now().Sub(start); waited < env.RayReadyTimeout {
		t.Errorf("gave up after %s, before the ready timeout %s", waited, env.RayReadyTimeout)
	}
}

// ---- vllm_serve ------------------------------------------------------------

func qwenServe() serve.ServeSpec {
	return serve.ServeSpec{Resource: "vllm_serve.qwen", Name: "qwen", Container: "rayform-main", Node: "spark1",
		Args: []string{"vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--served-model-name", "qwen", "--tensor-parallel-size", "2",
			"--pipeline-parallel-size", "1", "--gpu-memory-utilization", "0.85", "--host", "0.0.0.0", "--port", "8000",
			"--distributed-executor-backend", "ray", "--max-model-len", "32768"},
		Env: map[string]string{}, Port: 8000, ServedName: "qwen", MaxModelLen: 32768}
}

const qwenModels = `{"object":"list","data":[{"id":"qwen","object":"model","root":"Qwen/Qwen3.5-122B-A10B-FP8","max_model_len":32768}]}`

// startupLog is vLLM's startup, in chunks as successive polls see them.
func qwenStartupLog() [][]byte {
	return [][]byte{
		[]byte("(APIServer pid=1) INFO 04-08 23:31:00 [api_server.py:1885] vLLM API server version 0.17.1rc1\n" +
			"(EngineCore_DP0 pid=1544) INFO 04-08 23:31:10 [gpu_model_runner.py:3338] Starting to load model Qwen/Qwen3.5-122B-A10B-FP8...\n" +
			"Loading safetensors checkpoint shards:   0% Completed | 0/39 [00:00<?, ?it/s]\n"),
		[]byte("Loading safetensors checkpoint shards:   3% Completed | 1/39 [00:04<02:36,  4.12s/it]\n" +
			"Loading safetensors checkpoint shards:  21% Completed | 8/39 [00:33<02:08,  4.14s/it]\n"),
		[]byte("Loading safetensors checkpoint shards:  51% Completed | 20/39 [01:22<01:18,  4.13s/it]\n" +
			"Loading safetensors checkpoint shards: 100% Completed | 39/39 [02:41<00:00,  4.13s/it]\n" +
			"(EngineCore_DP0 pid=1544) INFO 04-08 23:33:52 [default_loader.py:314] Loading weights took 161.20 seconds\n" +
			"(EngineCore_DP0 pid=1544) INFO 04-08 23:33:53 [gpu_model_runner.py:3420] Model loading took 59.3125 GiB memory and 162.004000 seconds\n" +
			"(EngineCore_DP0 pid=1544) INFO 04-08 23:34:10 [gpu_worker.py:359] Available KV cache memory: 31.20 GiB\n" +
			"(EngineCore_DP0 pid=1544) INFO 04-08 23:34:10 [kv_cache_utils.py:1319] GPU KV cache size: 340,784 tokens\n" +
			"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67 [00:00<?, ?it/s]\r" +
			"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  49%|████▉     | 33/67 [00:01<00:01, 25.1it/s]\r"),
		[]byte("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:02<00:00, 25.3it/s]\n" +
			"Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:01<00:00, 26.31it/s]\n" +
			"(EngineCore_DP0 pid=1544) INFO 04-08 23:34:14 [gpu_model_runner.py:4235] Graph capturing finished in 4 secs, took 0.49 GiB\n" +
			"(APIServer pid=1) INFO 04-08 23:34:15 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000\n" +
			"INFO:     Started server process [1]\nINFO:     Waiting for application startup.\nINFO:     Application startup complete.\n"),
	}
}

func qwenWork(action plan.Action, spec serve.ServeSpec, stop bool) *Work {
	return &Work{Address: spec.Resource, Type: "vllm_serve", Action: action, Hosts: []string{spec.Node},
		Do: &serve.ServeWork{Spec: spec, Stop: stop, Start: action != plan.Delete, HeadIP: netip.MustParseAddr("192.168.200.12"), ReadyTimeout: 20 * time.Minute}}
}

func TestServeSteps(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *steplab.Host)
		work  *Work
	}{
		{"serve-create", func(h *steplab.Host) {}, qwenWork(plan.Create, qwenServe(), false)},
		{"serve-replace", func(h *steplab.Host) {
			h.Serve = steplab.Serve{Exists: true, Alive: true, IgnoreTerm: true, Log: []byte("old log\n")}
		}, qwenWork(plan.Replace, qwenServe(), true)},
		{"serve-delete", func(h *steplab.Host) {
			h.Serve = steplab.Serve{Exists: true, Alive: true}
		}, qwenWork(plan.Delete, qwenServe(), true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := steplab.New(t, "spark1", "spark2")
			l.Run(pairSpecs("192.168.200.12")...)
			h := l.Hosts["spark1"]
			tt.setup(h)
			if serve.WorkOf(tt.work).Start {
				h.Serve.Chunks = qwenStartupLog()
			}
			h.Models = qwenModels
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
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "diagnose", "c10d-unreachable.log"))
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
			l.Run(pairSpecs("192.168.200.12")...)
			h := l.Hosts["spark1"]
			h.Serve.Chunks = [][]byte{qwenStartupLog()[0], c10d, tt.tail}
			h.Serve.Die = tt.die
			l.Hosts["spark2"].Containers["rayform-main"].Logs = "(RayWorkerWrapper pid=249, ip=192.168.200.13) INFO worker started\n"
			env := l.Env()
			env.Diagnose = diagnose.Context{
				FabricCIDR: netip.MustParsePrefix("192.168.200.0/24"), FabricInterface: "enp1s0f1np1",
				NodeAddrs: map[string]string{"spark1": "192.168.200.12", "spark2": "192.168.200.13"},
				MgmtAddrs: map[string]string{"spark1": "10.1.230.180", "spark2": "10.1.230.181"},
				Cluster:   stepsCluster, Network: "network.fabric",
			}
			w := qwenWork(plan.Create, qwenServe(), false)
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
			var de *hostenv.DiagnosedError
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
	l.Run(pairSpecs("192.168.200.12")[0])
	h := l.Hosts["spark1"]
	h.Serve.Chunks = qwenStartupLog()[:2] // loads forever
	w := qwenWork(plan.Create, qwenServe(), false)
	serve.WorkOf(w).ReadyTimeout = time.Minute
	_, err := walkWork(t, l.Env(), w)
	if err == nil || !strings.Contains(err.Error(), "vllm serve qwen on spark1 is not ready after 1m0s") {
		t.Fatalf("err = %v", err)
	}
}

// TestSecretsNeverOnCommandLines: secret env values and an API key reach
// the hosts only on stdin: never on a command line, never in a file
// (finding 8: a file can be left behind by kill -9).
func TestSecretsNeverOnCommandLines(t *testing.T) {
	const token, key = "hf_SECRETtokenVALUE", "sk-SECRETapiKEY"
	l := steplab.New(t, "spark1", "spark2")
	specs := pairSpecs("192.168.200.12")
	for i := range specs {
		specs[i].Env["HF_TOKEN"] = token
		specs[i].SecretEnv = []string{"HF_TOKEN"}
	}
	lines, err := walkWork(t, l.Env(), pairWork(plan.Create, specs, []string{"spark1", "spark2"}))
	if err != nil {
		t.Fatalf("cluster: %v\n%s", err, strings.Join(lines, "\n"))
	}
	sv := qwenServe()
	sv.Env = map[string]string{"VLLM_API_KEY": key, "HF_TOKEN": token}
	sv.SecretEnv = []string{"HF_TOKEN", "VLLM_API_KEY"}
	h := l.Hosts["spark1"]
	h.Serve.Chunks = qwenStartupLog()
	h.Models = qwenModels
	if lines, err := walkWork(t, l.Env(), qwenWork(plan.Create, sv, false)); err != nil {
		t.Fatalf("serve: %v\n%s", err, strings.Join(lines, "\n"))
	}
	runs, starts := 0, 0
	for _, c := range l.Calls() {
		if c.Upload {
			t.Errorf("upload %s: a secret file on the host", c.Path)
			continue
		}
		line := c.Cmd.String() + "\x00" + strings.Join(c.Cmd.Argv, "\x00")
		for _, s := range []string{token, key} {
			if strings.Contains(line, s) {
				t.Errorf("secret on a command line: %s", c.Line())
			}
		}
		// The docker CLI gets each secret as -e NAME and its value in
		// its environment, which the transport sends on stdin.
		switch {
		case slices.Contains(c.Cmd.Argv, "run") && slices.Contains(c.Cmd.Argv, "HF_TOKEN") && c.Cmd.Env["HF_TOKEN"] == token:
			runs++
		case slices.Contains(c.Cmd.Argv, "-d") && slices.Contains(c.Cmd.Argv, "VLLM_API_KEY") && c.Cmd.Env["VLLM_API_KEY"] == key && c.Cmd.Env["HF_TOKEN"] == token:
			starts++
		}
	}
	if runs != 2 {
		t.Errorf("%d docker runs took HF_TOKEN from their environment (-e HF_TOKEN), want one per node", runs)
	}
	if starts != 1 {
		t.Errorf("%d serve starts took VLLM_API_KEY and HF_TOKEN from their environment, want 1", starts)
	}
}

// ---- destroy ---------------------------------------------------------------

func TestDestroyWork(t *testing.T) {
	specs := pairSpecs("192.168.200.12")
	container := func(s cluster.ContainerSpec, project string) observe.Container {
		return observe.Container{Name: s.Name, Labels: s.Labels(project), Running: true}
	}
	facts := &observe.Facts{Hosts: map[string]*observe.HostFacts{
		"spark1": {Containers: observe.ContainerFacts{List: []observe.Container{container(specs[0], steplab.Project)}},
			Records: map[string]observe.ProcessRecord{"serve-qwen": {Found: true, Alive: true}}},
		"spark2": {Containers: observe.ContainerFacts{List: []observe.Container{
			container(specs[1], steplab.Project),
			// Another project's container, and a foreign one: never destroyed.
			{Name: "rayform-other", Labels: map[string]string{cluster.LabelManaged: "true", cluster.LabelProject: "else", cluster.LabelResource: "ray_cluster.other"}},
			{Name: "postgres", Labels: map[string]string{}},
		}}},
	}}
	st, err := state.New(steplab.Project)
	if err != nil {
		t.Fatal(err)
	}
	st.Set(stepsCluster, state.Resource{Type: "ray_cluster", Container: "rayform-main", Hosts: []state.Host{{Node: "spark1"}, {Node: "spark2"}}})
	st.Set("vllm_serve.qwen", state.Resource{Type: "vllm_serve", Container: "rayform-main", Hosts: []state.Host{{Node: "spark1"}}})
	st.Set("ray_cluster.gone", state.Resource{Type: "ray_cluster", Container: "rayform-gone", Hosts: []state.Host{{Node: "spark3"}}})

	res, g := DestroyWork(PlanInput{Facts: facts, State: st, Project: steplab.Project})
	got := map[string]string{}
	for addr, w := range res.Work {
		got[addr] = string(w.Action)
		if cluster.WorkOf(w) != nil {
			b, _ := json.Marshal(cluster.WorkOf(w).Remove)
			got[addr] += " " + string(b)
		}
	}
	want := map[string]string{
		stepsCluster:       `delete [{"Node":"spark1","Container":"rayform-main"},{"Node":"spark2","Container":"rayform-main"}]`,
		"vllm_serve.qwen":  "delete",
		"ray_cluster.gone": "no-op null",
	}
	if len(got) != len(want) {
		t.Errorf("work = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	order, err := g.TopoOrder()
	if err != nil {
		t.Fatal(err)
	}
	if indexIn(order, "vllm_serve.qwen") > indexIn(order, stepsCluster) {
		t.Errorf("order %v: the serve must stop before its cluster goes", order)
	}
	if c := res.Plan.Counts(); c.Destroy != 2 {
		t.Errorf("plan destroys %d, want 2", c.Destroy)
	}

	// Walking it removes exactly the project's containers.
	l := steplab.New(t, "spark1", "spark2")
	l.Run(specs...)
	l.Hosts["spark1"].Serve = steplab.Serve{Exists: true, Alive: true}
	l.Hosts["spark2"].Containers["postgres"] = &steplab.Container{Running: true}
	for _, addr := range order {
		if _, err := walkWork(t, l.Env(), res.Work[addr]); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
	}
	if l.Hosts["spark1"].Containers["rayform-main"] != nil || l.Hosts["spark2"].Containers["rayform-main"] != nil {
		t.Error("a project container survived destroy")
	}
	if l.Hosts["spark2"].Containers["postgres"] == nil {
		t.Error("destroy removed a container rayform did not create")
	}
	var _ *dag.Graph = g
}

func indexIn(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
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
			l.Run(pairSpecs("192.168.200.12")...)
			h := l.Hosts["spark1"]
			h.Serve.Chunks = [][]byte{[]byte(tt.log)}
			h.Serve.Die = true
			h.SS, h.VLLMVersion = tt.ss, tt.version
			env := l.Env()
			w := qwenWork(plan.Create, qwenServe(), false)
			serve.WorkOf(w).ClusterNodes = []string{"spark1", "spark2"}
			_, err := walkWork(t, env, w)
			var de *hostenv.DiagnosedError
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

// A head whose GCS cannot bind its port: the diagnosis names the port and
// asks the head's ss who holds it.
func TestHeadPortHeldIsDiagnosed(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	h := l.Hosts["spark1"]
	h.HeadExits = "RuntimeError: Failed to start GCS. Last 1 lines of error files:\nFailed to bind to address 0.0.0.0:6379: address already in use\n"
	h.SS = `LISTEN 0      4096         0.0.0.0:6379      0.0.0.0:*    users:(("gcs_server",pid=4242,fd=7))` + "\n"
	_, err := walkWork(t, l.Env(), pairWork(plan.Create, pairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	var de *hostenv.DiagnosedError
	if !errors.As(err, &de) || de.Diagnosis.Cause != diagnose.AddrInUse {
		t.Fatalf("err = %v, want an %s diagnosis", err, diagnose.AddrInUse)
	}
	for _, want := range []string{"port 6379 is already in use on spark1", "held by pid 4242 (gcs_server)", "change port on ray_cluster.main"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%s", want, err)
		}
	}
}
