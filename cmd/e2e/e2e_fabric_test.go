//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hetFabricConfig is the natural heterogeneous cluster of issue #14: three
// hosts from a variable, one for_each node block, the fabric interface map
// computed from the same variable and keyed by its keys, PP = 3.
const hetFabricConfig = `
variable "hosts" {
  default = {
    gx1 = { host = "10.1.230.180", iface = "enp1s0f1np1" }
    gx2 = { host = "10.1.230.181", iface = "enP2p1s0f1np1" }
    gx3 = { host = "10.1.230.182", iface = "ibp1s0" }
  }
}

node "gx" {
  for_each      = var.hosts
  host          = each.value.host
  user          = "root"
  identity_file = %q
  gpus          = 1
}

network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = { for k, h in var.hosts : k => h.iface }
}

ray_cluster "het" {
  image          = %q
  head           = node.gx["gx1"]
  workers        = [node.gx["gx2"], node.gx["gx3"]]
  network        = network.fabric
  memory_monitor = false
  # The lab image of this test has no torch (see dataplane_e2e_test.go).
  dataplane_check = false
}

vllm_serve "qwen" {
  cluster                = ray_cluster.het
  model                  = "Qwen/Qwen3-0.6B"
  pipeline_parallel_size = 3
  gpu_memory_utilization = 0.8
  ready_timeout          = "2m"
}
`

// A lab whose three nodes name their fabric interfaces differently takes
// the for_each configuration through validate, plan and apply; each node's
// container pins its own interface, and the PP = 3 serve comes up.
func TestE2EHeterogeneousFabric(t *testing.T) {
	ifaces := map[string]string{"spark1": "enp1s0f1np1", "spark2": "enP2p1s0f1np1", "spark3": "ibp1s0"}
	l := startLab(t, "rfe2ehet", "-nodes", "3", "-set", "spark2.fabric-ifname="+ifaces["spark2"], "-set", "spark3.fabric-ifname="+ifaces["spark3"])
	tmp := t.TempDir()
	dir := filepath.Join(tmp, l.name+"-"+filepath.Base(tmp))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll("/var/tmp/rayform/" + filepath.Base(dir)) })
	body := fmt.Sprintf(hetFabricConfig, filepath.Join(l.dir, "id_ed25519"), seedImage)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}

	mustCode(t, "validate", l.rayform("", "-chdir="+dir, "validate"), exitOK)
	r := l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode")
	mustCode(t, "plan", r, exitChanges)
	mustContain(t, "plan", r.stdout, "ray_cluster.het will be created", "vllm_serve.qwen will be created")
	r = l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
	mustCode(t, "apply", r, exitOK)
	mustContain(t, "apply", r.stdout, "Apply complete! Resources: 2 added, 0 changed, 0 destroyed.")
	if strings.Contains(r.stdout, "[c10d]") {
		t.Errorf("a successful apply shows c10d's harmless first-try warning:\n%s", r.stdout)
	}

	for i, node := range []string{"spark1", "spark2", "spark3"} {
		out, err := l.ssh(node, `docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' rayform-het`)
		if err != nil {
			t.Fatalf("inspecting the container on %s: %v\n%s", node, err, out)
		}
		for _, v := range []string{"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES"} {
			if want := v + "=" + ifaces[node]; !strings.Contains(out, want+"\n") {
				t.Errorf("%s's container env lacks %s:\n%s", node, want, out)
			}
		}
		if want := fmt.Sprintf("VLLM_HOST_IP=192.168.200.%d\n", 12+i); !strings.Contains(out, want) {
			t.Errorf("%s's container env lacks %s", node, strings.TrimSpace(want))
		}
	}
	mustCode(t, "plan after apply", l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode"), exitOK)
}
