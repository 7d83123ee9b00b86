package kindstest

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/config"
)

// kindsBase is a valid two-node configuration the check cases change.
const kindsBase = `
node "a" {
  host = "10.0.0.1"
  gpus = 1
}

node "b" {
  host = "10.0.0.2"
  gpus = 1
}

network "fabric" {
  cidr   = "192.168.200.0/24"
  ib_hca = ["mlx5_0"]
}

ray_cluster "main" {
  image          = "img"
  head           = node.a
  workers        = [node.b]
  network        = network.fabric
  container_name = "ray-main"
}

vllm_serve "s" {
  cluster = ray_cluster.main
  model   = "m"
  env     = {}
}
`

// TestKindChecks checks that each kind's Check and Validate hooks run
// when a configuration is loaded with Kinds(): one case per rule, each
// naming the argument the diagnostic points at.
func TestKindChecks(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		severity       hcl.DiagnosticSeverity
		summary        string
		line           int // of the diagnostic's subject
	}{
		{"node: empty host", `host = "10.0.0.1"`, `host = " "`, hcl.DiagError, "Empty host", 3},
		{"network: bad ib_hca", `ib_hca = ["mlx5_0"]`, `ib_hca = ["mlx5_0,mlx5_1"]`, hcl.DiagError, "Invalid InfiniBand device", 14},
		{"ray_cluster: empty image", `image          = "img"`, `image          = ""`, hcl.DiagError, "Empty image", 18},
		{"ray_cluster: container name", `container_name = "ray-main"`, `container_name = "-x"`, hcl.DiagError, "Invalid container name", 22},
		{"ray_cluster: shm_size ignored", `container_name = "ray-main"`, `shm_size = "16g"`, hcl.DiagWarning, "shm_size has no effect", 22},
		{"ray_cluster: bad shm_size", `container_name = "ray-main"`, `shm_size = "lots"`, hcl.DiagError, "Invalid shm_size", 22},
		{"ray_cluster: pinned env", `container_name = "ray-main"`, `env = { NCCL_SOCKET_IFNAME = "eth0" }`, hcl.DiagError, "Environment variable managed by rayform", 22},
		{"ray_cluster: bad env name", `container_name = "ray-main"`, `env = { "1X" = "y" }`, hcl.DiagError, "Invalid environment variable name", 22},
		{"ray_cluster: managed docker arg", `container_name = "ray-main"`, `docker_args = ["--ipc=private"]`, hcl.DiagError, "Argument managed by rayform", 22},
		{"ray_cluster: head is a worker", `workers        = [node.b]`, `workers        = [node.a]`, hcl.DiagError, "Node is both head and worker", 20},
		{"vllm_serve: empty model", `model   = "m"`, `model   = " "`, hcl.DiagError, "Empty model", 27},
		{"vllm_serve: API key twice", `env     = {}`, "env     = { VLLM_API_KEY = \"k\" }\n  api_key = \"k\"", hcl.DiagError, "API key set twice", 29},
		{"vllm_serve: managed extra arg", `env     = {}`, `extra_args = ["-tp", "2"]`, hcl.DiagError, "Argument managed by rayform", 28},
		{"vllm_serve: misspelt extra arg", `env     = {}`, `extra_args = ["--enforce-eagr"]`, hcl.DiagError, "Unknown vLLM option", 28},
		{"vllm_serve: too many GPUs", `env     = {}`, `tensor_parallel_size = 4`, hcl.DiagError, "Not enough GPUs", 28},
		{"vllm_serve: port conflict", `env     = {}`, `port = 6379`, hcl.DiagError, "Port conflict", 28},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(kindsBase, tc.old) {
				t.Fatalf("the base configuration lacks %q", tc.old)
			}
			src := strings.Replace(kindsBase, tc.old, tc.new, 1)
			_, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: "."})
			for _, d := range diags {
				if d.Severity == tc.severity && d.Summary == tc.summary && d.Subject != nil && d.Subject.Start.Line == tc.line {
					return
				}
			}
			t.Errorf("no %q at line %d; diagnostics: %v", tc.summary, tc.line, diags)
		})
	}
	if _, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(kindsBase)}, config.Options{BaseDir: "."}); len(diags) > 0 {
		t.Errorf("the base configuration: %v", diags)
	}
}

// TestKindExports checks that the attributes a block's value has in
// expressions are exactly what its kind declares (Kind.Exports, which the
// reference check and the README use).
func TestKindExports(t *testing.T) {
	src := kindsBase + `
output "node" { value = node.a }
output "network" { value = network.fabric }
output "ray_cluster" { value = ray_cluster.main }
output "vllm_serve" { value = vllm_serve.s }
model "m" { source = "org/m" }
output "model" { value = model.m }
`
	cfg, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, k := range Schemas() {
		o := cfg.Outputs[k.Type]
		if o == nil || !o.Value.Type().IsObjectType() {
			t.Fatalf("output %s is not an object", k.Type)
		}
		var got []string
		for name := range o.Value.Type().AttributeTypes() {
			got = append(got, name)
		}
		want := k.Exports()
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s's value has the attributes %v; its kind exports %v", k.Type, got, want)
		}
	}
}
