package kindstest

import (
	"slices"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/model"
)

// TestObserveSpecListsModels: every node of a cluster whose serve uses a
// model block (model = model.NAME.source) lists the model's cache
// directory; a serve naming a model id directly lists nothing.
func TestObserveSpecListsModels(t *testing.T) {
	src := `
node "a" {
  host = "10.0.0.1"
  gpus = 1
}
node "b" {
  host = "10.0.0.2"
  gpus = 1
}
node "c" {
  host = "10.0.0.3"
  gpus = 1
}
network "fabric" { cidr = "192.168.200.0/24" }
ray_cluster "main" {
  image   = "img"
  head    = node.a
  workers = [node.b]
  network = network.fabric
}
ray_cluster "solo" {
  image = "img"
  head  = node.c
}
model "qwen" {
  source    = "Qwen/Qwen3-0.6B"
  cache_dir = "/data/hf/hub"
}
vllm_serve "s" {
  cluster = ray_cluster.main
  model   = model.qwen.source
}
vllm_serve "other" {
  cluster = ray_cluster.solo
  model   = "org/not-declared"
}
`
	cfg, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	spec := ObserveSpec(cfg, nil, "p")
	want := []string{"/data/hf/hub/models--Qwen--Qwen3-0.6B"}
	for _, n := range []string{"a", "b"} {
		if got := spec.Hosts[n].Trees; !slices.Equal(got, want) {
			t.Errorf("%s lists %v, want %v", n, got, want)
		}
	}
	if got := spec.Hosts["c"].Trees; len(got) != 0 {
		t.Errorf("c lists %v, want nothing", got)
	}
	if got := model.Serving(cfg.Config, "Qwen/Qwen3-0.6B"); len(got) != 1 || got[0].Name != "qwen" {
		t.Errorf("Serving: %v", got)
	}
}
