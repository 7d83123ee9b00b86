package steplab

import (
	"net/netip"
	"time"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/serve"
	"github.com/rayform/rayform/resources/servefiles"
)

// The fixtures of the steps tests: the seeds' pair of nodes and their
// cluster, and a serve of Qwen on it.

const Cluster = "ray_cluster.main"

// AuthToken is the pair's Ray token: the steps' transcripts must never
// show it.
const AuthToken = "0f1e2d3c4b5a69780f1e2d3c4b5a69780f1e2d3c4b5a69780f1e2d3c4b5a6978"

// PairSpecs is the seeds' pair: spark1 (head, 192.168.200.12) and spark2
// (worker, 192.168.200.13), one GPU each, pinned to the fabric.
func PairSpecs(ip1 string) []cluster.ContainerSpec {
	mk := func(node, role, ip string) cluster.ContainerSpec {
		return cluster.ContainerSpec{Resource: Cluster, Node: node, Role: role, Name: "rayform-main", Image: Image,
			NodeIP: ip, HeadAddr: "192.168.200.12:6379", GPUs: 1, Port: 6379, DashboardPort: 8265, DashboardHost: cluster.DashboardHost,
			Env: map[string]string{"VLLM_HOST_IP": ip, "NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
				"RAY_memory_monitor_refresh_ms": "0", "VLLM_CONFIG_ROOT": cluster.VLLMConfigRoot,
				"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": cluster.AuthTokenPath},
			AuthToken:    AuthToken,
			NonCarryOver: network.EnvKeys(), ServeDir: servefiles.Dir}
	}
	return []cluster.ContainerSpec{mk("spark1", "head", ip1), mk("spark2", "worker", "192.168.200.13")}
}

// PairWork is the work of action on the pair: the containers of start
// started, those of remove removed.
func PairWork(action plan.Action, specs []cluster.ContainerSpec, start []string, remove ...string) *kind.Work {
	w := &kind.Work{Address: Cluster, Type: "ray_cluster", Action: action, Hosts: []string{"spark1", "spark2"},
		Do: &cluster.ClusterWork{Name: "main", Specs: specs, Start: map[string]bool{}, HeadAddr: "192.168.200.12:6379"}}
	for _, n := range start {
		cluster.WorkOf(w).Start[n] = true
	}
	for _, n := range remove {
		cluster.WorkOf(w).Remove = append(cluster.WorkOf(w).Remove, cluster.Removal{Node: n, Container: "rayform-main"})
	}
	return w
}

// SpecFor is the spec of w's container on node.
func SpecFor(w *kind.Work, node string) cluster.ContainerSpec {
	for _, s := range cluster.WorkOf(w).Specs {
		if s.Node == node {
			return s
		}
	}
	return cluster.ContainerSpec{}
}

// QwenServe is the serve of Qwen on the pair's head.
func QwenServe() serve.ServeSpec {
	return serve.ServeSpec{Resource: "vllm_serve.qwen", Name: "qwen", Container: "rayform-main", Node: "spark1",
		Args: []string{"vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--served-model-name", "qwen", "--tensor-parallel-size", "2",
			"--pipeline-parallel-size", "1", "--gpu-memory-utilization", "0.85", "--host", "0.0.0.0", "--port", "8000",
			"--distributed-executor-backend", "ray", "--max-model-len", "32768"},
		Env: map[string]string{}, Port: 8000, ServedName: "qwen", MaxModelLen: 32768}
}

// QwenModels is /v1/models as vLLM answers for QwenServe.
const QwenModels = `{"object":"list","data":[{"id":"qwen","object":"model","root":"Qwen/Qwen3.5-122B-A10B-FP8","max_model_len":32768}]}`

// QwenStartupLog is vLLM's startup, in chunks as successive polls see them.
func QwenStartupLog() [][]byte {
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

// QwenWork is the work of action on spec (stop: its process runs).
func QwenWork(action plan.Action, spec serve.ServeSpec, stop bool) *kind.Work {
	return &kind.Work{Address: spec.Resource, Type: "vllm_serve", Action: action, Hosts: []string{spec.Node},
		Do: &serve.ServeWork{Spec: spec, Stop: stop, Start: action != plan.Delete, HeadIP: netip.MustParseAddr("192.168.200.12"), ReadyTimeout: 20 * time.Minute}}
}
