package kindstest

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/serve"
)

// TestValidateLimitsCoverApply checks that validate's value limits
// (hostplan.CheckArgLimits) are at least as strict as the exact check apply makes
// of its command lines before changing anything (hostplan.CheckCommandLimits): a
// configuration validate accepts never fails there, whatever the size and
// the bytes of its values (a quote costs more quoted). It also pins the
// issue's case, a 100 KB env value, as refused by validate.
func TestValidateLimitsCoverApply(t *testing.T) {
	const base = `
node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}
node "spark2" {
  host = "10.1.230.181"
  gpus = 1
}
network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = "enp1s0f1np1"
}
ray_cluster "spark" {
  image   = "hellohal2064/vllm-qwen3.5-gb10"
  head    = node.spark1
  workers = [node.spark2]
  network = network.fabric
  env     = { A = var.cluster_value }
}
vllm_serve "qwen" {
  cluster              = ray_cluster.spark
  model                = "Qwen/Qwen3-8B"
  tensor_parallel_size = 2
  env                  = { B = var.serve_value }
}
variable "cluster_value" {
  type = string
}
variable "serve_value" {
  type = string
}
`
	accepted, refused := 0, 0
	for _, size := range []int{1, 10_000, 40_000, 50_000, 56_000, 60_000, 100_000, 110_000, 120_000, 131_000, 140_000} {
		for _, fill := range []string{"a", "'", `"`, "é"} {
			for _, where := range []string{"cluster", "serve"} {
				value := strings.Repeat(fill, size/len(fill))
				vars := map[string]string{"cluster_value": "x", "serve_value": "x"}
				vars[where+"_value"] = value
				name := fmt.Sprintf("%s env of %d × %q", where, size, fill)
				cfg, diags := loadWithVars(t, base, vars)
				if diags.HasErrors() {
					refused++
					if !strings.Contains(diags.Error(), "command line") {
						t.Errorf("%s: refused for another reason: %v", name, diags)
					}
					if fill == "a" && size <= 40_000 {
						t.Errorf("%s: refused, but it fits: %v", name, diags)
					}
					continue
				}
				accepted++
				if where == "serve" && size >= 100_000 {
					t.Errorf("%s: validate accepted it (issue 22: a 100 KB env value)", name)
				}
				addrs := map[string]netip.Addr{"spark1": netip.MustParseAddr("192.168.200.12"), "spark2": netip.MustParseAddr("192.168.200.13")}
				ifaces := map[string]string{"spark1": "enp1s0f1np1", "spark2": "enp1s0f1np1"}
				rc := cfg.RayClusters["spark"]
				specs := cluster.ClusterSpecs(cluster.View(cfg.Config), rc, addrs, ifaces)
				sv, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["qwen"])
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range []*Work{
					{Address: "ray_cluster.spark", Do: &cluster.ClusterWork{Specs: specs, Start: map[string]bool{"spark1": true, "spark2": true}}},
					{Address: "vllm_serve.qwen", Do: &serve.ServeWork{Spec: sv, Start: true}},
				} {
					if err := hostplan.CheckCommandLimits(w, "a-project-name-of-some-length", nil); err != nil {
						t.Errorf("%s: validate accepted it, apply's check refuses it: %v", name, err)
					}
				}
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Errorf("accepted %d, refused %d: the sizes do not straddle the limit", accepted, refused)
	}
}

// loadWithVars loads src with the variables set (as RAYFORM_VAR_ entries).
func loadWithVars(t *testing.T, src string, vars map[string]string) (*Blocks, hcl.Diagnostics) {
	t.Helper()
	var env []string
	for k, v := range vars {
		env = append(env, config.EnvPrefix+k+"="+v)
	}
	return LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: ".", Env: env})
}
