package configtest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
)

// benchConfig renders a configuration of n GPU servers in the shape of
// examples/h100-4x8-pp: one node block with for_each over a map variable,
// a fabric network, one Ray cluster of every node and one vllm_serve with a
// pipeline stage per node.
func benchConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("variable \"hosts\" {\n  type = map(string)\n  default = {\n")
	for i := range n {
		fmt.Fprintf(&b, "    h%d = \"10.1.%d.%d\"\n", i+1, 230+i/200, 10+i%200)
	}
	b.WriteString("  }\n}\n\n")
	b.WriteString(`variable "hf_token" {
  type      = string
  default   = "hf_not_a_real_token"
  sensitive = true
}

locals {
  head_key = "h1"
}

node "gpu" {
  for_each = var.hosts

  host          = each.value
  user          = "root"
  identity_file = "/root/.ssh/id_ed25519"
  gpus          = 8
  labels = {
    role = each.key == local.head_key ? "head" : "worker"
  }
}

network "fabric" {
  cidr      = "192.168.0.0/16"
  interface = "ib0"
  mtu       = 4092
}

ray_cluster "main" {
  image    = "vllm/vllm-openai:v0.11.0"
  head     = node.gpu[local.head_key]
  workers  = [for k, n in node.gpu : n if k != local.head_key]
  network  = network.fabric
  shm_size = "64g"
  env = {
    HF_TOKEN = var.hf_token
  }
  memory_monitor = false
}

vllm_serve "llama" {
  cluster                = ray_cluster.main
  model                  = "meta-llama/Llama-3.1-405B-Instruct-FP8"
  tensor_parallel_size   = 8
  pipeline_parallel_size = length(var.hosts)
  max_model_len          = 32768
}

output "endpoint" {
  value = vllm_serve.llama.endpoint
}
`)
	return []byte(b.String())
}

// BenchmarkLoad64 parses, validates and evaluates a 64-node configuration
// with for_each (what every rayform command does first).
func BenchmarkLoad64(b *testing.B) {
	files := map[string][]byte{"main.hcl": benchConfig(64)}
	cfg, diags := loadFiles(files, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		b.Fatalf("bench config does not load: %s", diags.Error())
	}
	if len(cfg.Nodes) != 64 || len(cfg.RayClusters["main"].Workers) != 63 {
		b.Fatalf("bench config: %d nodes, want 64", len(cfg.Nodes))
	}
	b.SetBytes(int64(len(files["main.hcl"])))
	b.ReportAllocs()
	for b.Loop() {
		if _, diags := loadFiles(files, config.Options{BaseDir: "."}); diags.HasErrors() {
			b.Fatal(diags.Error())
		}
	}
}
