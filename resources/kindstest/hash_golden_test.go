package kindstest

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/serve"
)

// The hash goldens pin the digests rayform stores on the hosts: the
// rayform.spec-hash label of every Ray container (cluster.ContainerSpec.Hash) and
// the spec_hash of every serve record (ServeSpec.Hash). A plan compares
// them with the hash of the spec it wants, so a change of either digest
// for the same configuration replaces every running cluster and serve on
// the first plan after an upgrade of rayform. These goldens must never
// change: a refactor that moves the code keeps them byte for byte. If one
// must change on purpose, that is a breaking change of its own, with an
// upgrade path, never a side effect (do not run -update to make them pass).

// hashConfig is a representative configuration: a two-node cluster on a
// network with env (one value sensitive), volumes and docker_args; a
// single-node cluster without a network; serves with extra_args, env (one
// value sensitive), an api_key, served_model_name, max_model_len and
// parallelism.
const hashConfig = `
variable "hf_token" {
  type      = string
  default   = "hf_not_a_real_token"
  sensitive = true
}

variable "api_key" {
  type      = string
  default   = "sk-not-a-real-key"
  sensitive = true
}

node "spark1" {
  host = "10.0.0.1"
  gpus = 2
}

node "spark2" {
  host = "10.0.0.2"
  gpus = 2
}

node "solo" {
  host = "10.0.0.3"
  gpus = 1
}

network "fabric" {
  cidr      = "192.168.100.0/24"
  interface = "enp1s0f1np1"
  mtu       = 9000
}

ray_cluster "main" {
  image       = "vllm/vllm-openai:v0.11.0"
  head        = node.spark1
  workers     = [node.spark2]
  network     = network.fabric
  env         = { HF_TOKEN = var.hf_token, HF_HOME = "/root/.cache/huggingface" }
  volumes     = ["/data/hf:/root/.cache/huggingface", "/data/models:/models:ro"]
  docker_args = ["--ulimit", "memlock=-1", "--cap-add=IPC_LOCK"]
}

ray_cluster "single" {
  image          = "vllm/vllm-openai:v0.10.2"
  head           = node.solo
  port           = 6380
  dashboard_port = 8266
  memory_monitor = false
  container_name = "solo-ray"
}

vllm_serve "qwen" {
  cluster                = ray_cluster.main
  model                  = "Qwen/Qwen3-8B"
  served_model_name      = "qwen"
  tensor_parallel_size   = 2
  pipeline_parallel_size = 2
  gpu_memory_utilization = 0.85
  max_model_len          = 32768
  port                   = 8000
  api_key                = var.api_key
  env                    = { HF_TOKEN = var.hf_token, VLLM_LOGGING_LEVEL = "DEBUG" }
  extra_args             = ["--enable-prefix-caching", "--max-num-seqs", "64"]
}

vllm_serve "small" {
  cluster = ray_cluster.main
  model   = "facebook/opt-125m"
  port    = 8001
}

vllm_serve "solo" {
  cluster    = ray_cluster.single
  model      = "/models/llama"
  extra_args = ["--dtype=bfloat16"]
}
`

// hashCase is one spec whose hash is pinned, built by hand: the digest of
// the struct as it is, whatever the configuration code makes of HCL.
type hashCase struct {
	name string
	hash func() string
}

func literalHashCases() []hashCase {
	head := cluster.ContainerSpec{
		Resource: "ray_cluster.main", Node: "spark1", Role: "head", Name: "rayform-main",
		Image: "vllm/vllm-openai:v0.11.0", NodeIP: "192.168.100.1", HeadAddr: "192.168.100.1:6379", GPUs: 2,
		Env:           map[string]string{"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "VLLM_CONFIG_ROOT": "/tmp/rayform/vllm-config"},
		Port:          6379,
		DashboardPort: 8265,
		NonCarryOver:  []string{"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"},
		ServeDir:      "/tmp/rayform/serve",
	}
	worker := head
	worker.Node, worker.Role, worker.NodeIP = "spark2", "worker", "192.168.100.2"
	full := head
	full.Env = map[string]string{"HF_TOKEN": "hf_not_a_real_token", "HF_HOME": "/root/.cache/huggingface", "VLLM_CONFIG_ROOT": "/tmp/rayform/vllm-config"}
	full.SecretEnv = []string{"HF_TOKEN"}
	full.Volumes = []string{"/data/hf:/root/.cache/huggingface", "/data/models:/models:ro"}
	full.DockerArgs = []string{"--ulimit", "memlock=-1"}
	bare := cluster.ContainerSpec{Resource: "ray_cluster.x", Node: "n", Role: "head", Name: "rayform-x", Image: "img"}

	fullServe := serve.ServeSpec{
		Resource: "vllm_serve.qwen", Name: "qwen", Container: "rayform-main", Node: "spark1",
		Args: []string{"vllm", "serve", "Qwen/Qwen3-8B", "--served-model-name", "qwen", "--tensor-parallel-size", "2",
			"--pipeline-parallel-size", "1", "--gpu-memory-utilization", "0.9", "--host", "0.0.0.0", "--port", "8000",
			"--distributed-executor-backend", "ray", "--max-model-len", "32768", "--enable-prefix-caching"},
		Env:         map[string]string{"VLLM_API_KEY": "sk-not-a-real-key", "VLLM_LOGGING_LEVEL": "DEBUG"},
		SecretEnv:   []string{"VLLM_API_KEY"},
		Port:        8000,
		ServedName:  "qwen",
		MaxModelLen: 32768,
	}
	// Attrs and Sensitive are derived and not part of the hash.
	serveWithAttrs := fullServe
	serveWithAttrs.Attrs = nil
	serveWithAttrs.Sensitive = []string{"api_key"}
	bareServe := serve.ServeSpec{Resource: "vllm_serve.m", Name: "m", Container: "rayform-x", Node: "n",
		Args: []string{"vllm", "serve", "m"}, Port: 8000, ServedName: "m"}

	return []hashCase{
		{"literal/container/head", head.Hash},
		{"literal/container/worker", worker.Hash},
		{"literal/container/env-volumes-docker-args-secret", full.Hash},
		{"literal/container/label", func() string { return full.Labels("proj")[cluster.LabelSpecHash] }},
		{"literal/container/bare", bare.Hash},
		{"literal/serve/full", fullServe.Hash},
		{"literal/serve/sensitive-attrs-ignored", serveWithAttrs.Hash},
		{"literal/serve/bare", bareServe.Hash},
	}
}

// configHashCases are the specs rayform derives from hashConfig, by
// resource and node: they pin the whole road from HCL to the label.
func configHashCases(t *testing.T) []hashCase {
	t.Helper()
	loaded, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(hashConfig)}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatalf("config: %s", diags.Error())
	}
	addrs := map[string]netip.Addr{
		"spark1": netip.MustParseAddr("192.168.100.1"),
		"spark2": netip.MustParseAddr("192.168.100.2"),
	}
	ifaces := map[string]string{"spark1": "enp1s0f1np1", "spark2": "enp1s0f1np1"}
	cfg, diags := loaded.WithFacts(Facts{FabricAddrs: addrs})
	if diags.HasErrors() {
		t.Fatalf("config with facts: %s", diags.Error())
	}
	var cases []hashCase
	for _, name := range []string{"main", "single"} {
		for _, spec := range cluster.ClusterSpecs(cluster.View(cfg.Config), cfg.RayClusters[name], addrs, ifaces) {
			cases = append(cases, hashCase{fmt.Sprintf("config/%s/%s/%s", spec.Resource, spec.Node, spec.Role), spec.Hash})
		}
	}
	for _, name := range []string{"qwen", "small", "solo"} {
		spec, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves[name])
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, hashCase{"config/" + spec.Resource, spec.Hash})
	}
	return cases
}

// TestSpecHashGolden pins cluster.ContainerSpec.Hash and ServeSpec.Hash (see the
// comment at the top of this file: never -update these to make a refactor
// pass).
func TestSpecHashGolden(t *testing.T) {
	cases := append(literalHashCases(), configHashCases(t)...)
	var b strings.Builder
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("duplicate case %s", c.name)
		}
		seen[c.name] = true
		h := c.hash()
		if len(h) != 16 {
			t.Errorf("%s: hash %q is not 16 hex digits", c.name, h)
		}
		fmt.Fprintf(&b, "%s %s\n", c.name, h)
	}
	out := b.String()
	for _, secret := range []string{"hf_not_a_real_token", "sk-not-a-real-key"} {
		if strings.Contains(out, secret) {
			t.Fatalf("a sensitive value reached the golden")
		}
	}
	if err := checkPinned(filepath.Join("..", "..", "testdata", "hash", "specs.golden"), []byte(out)); err != nil {
		t.Error(err)
	}
}

// checkPinned compares got with the pinned golden file at path. Unlike the
// other goldens' helper it never writes, -update or not (make golden runs
// every package's tests with -update): a hash golden changes only by hand,
// as a breaking change of its own.
func checkPinned(path string, got []byte) error {
	want, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the pinned golden: %w", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s differs from the pinned hashes: the digests stored on the hosts changed, which replaces every running cluster and serve on upgrade (never -update this golden; see hash_golden_test.go):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
	return nil
}

// TestPinnedGoldenIgnoresUpdate: with -update set, as make golden runs,
// checkPinned still reports a difference and leaves the file as it was.
func TestPinnedGoldenIgnoresUpdate(t *testing.T) {
	f := flag.Lookup("update")
	if f == nil {
		t.Fatal("the package's tests register no -update flag")
	}
	old := f.Value.String()
	if err := flag.Set("update", "true"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("update", old)
	path := filepath.Join(t.TempDir(), "specs.golden")
	if err := os.WriteFile(path, []byte("pinned\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkPinned(path, []byte("changed\n")); err == nil || !strings.Contains(err.Error(), "never -update this golden") {
		t.Errorf("checkPinned with -update = %v, want the difference reported", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "pinned\n" {
		t.Errorf("checkPinned with -update left %q, %v; want the pinned file untouched", b, err)
	}
}

// TestSpecHashSecretOnlyHashed shows that a sensitive value enters the
// hash (changing it replaces the container) without being readable from
// it, and that a non-sensitive env change changes the hash too.
func TestSpecHashSecretOnlyHashed(t *testing.T) {
	base := cluster.ContainerSpec{Resource: "ray_cluster.x", Name: "c", Env: map[string]string{"TOKEN": "a", "X": "1"}, SecretEnv: []string{"TOKEN"}}
	other := base
	other.Env = map[string]string{"TOKEN": "b", "X": "1"}
	plain := base
	plain.Env = map[string]string{"TOKEN": "a", "X": "2"}
	hashes := []string{base.Hash(), other.Hash(), plain.Hash()}
	if hashes[0] == hashes[1] || hashes[0] == hashes[2] {
		t.Errorf("hashes do not follow the env: %v", hashes)
	}
}
