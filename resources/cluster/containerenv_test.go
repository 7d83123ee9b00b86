package cluster_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/resourcestest"
)

// TestContainerEnv checks the one place the Ray container's environment is
// built: the cluster's env, the memory monitor and the network's pins.
func TestContainerEnv(t *testing.T) {
	files := map[string][]byte{"main.hcl": []byte(`
node "a" {
  host = "a"
  gpus = 1
}
node "b" {
  host = "b"
  gpus = 1
}
network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = { a = "enp1s0f1np1" }
  ib_hca    = ["mlx5_0", "mlx5_1"]
}
ray_cluster "c" {
  image          = "img"
  head           = node.a
  workers        = [node.b]
  network        = network.fabric
  memory_monitor = false
  env            = { FOO = "bar" }
}
node "s" {
  host = "s"
  gpus = 1
}
ray_cluster "solo" {
  image = "img"
  head  = node.s
  env   = { FOO = "solo" }
  auth  = "none"
}
`)}
	cfg, diags := resourcestest.LoadFiles(files, config.Options{})
	if diags.HasErrors() {
		t.Fatalf("diagnostics:\n%s", diags.Error())
	}
	tests := []struct {
		name, cluster, node, addr, iface string
		want                             map[string]string
		wantErr                          string
	}{
		{
			name: "pinned interface", node: "a", addr: "192.168.200.12", iface: "ignored0",
			want: map[string]string{
				"FOO": "bar", "RAY_memory_monitor_refresh_ms": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/run/rayform-secrets/ray_auth_token",
				"VLLM_HOST_IP": "192.168.200.12", "NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
				"TP_SOCKET_IFNAME": "enp1s0f1np1", "UCX_NET_DEVICES": "mlx5_0:1,mlx5_1:1", "NCCL_IB_HCA": "mlx5_0,mlx5_1",
			},
		},
		{
			name: "observed interface", node: "b", addr: "192.168.200.13", iface: "enp1s0f0np0",
			want: map[string]string{
				"FOO": "bar", "RAY_memory_monitor_refresh_ms": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/run/rayform-secrets/ray_auth_token",
				"VLLM_HOST_IP": "192.168.200.13", "NCCL_SOCKET_IFNAME": "enp1s0f0np0", "GLOO_SOCKET_IFNAME": "enp1s0f0np0",
				"TP_SOCKET_IFNAME": "enp1s0f0np0", "UCX_NET_DEVICES": "mlx5_0:1,mlx5_1:1", "NCCL_IB_HCA": "mlx5_0,mlx5_1",
			},
		},
		{name: "address off the fabric", node: "a", addr: "10.1.230.180", wantErr: "not in 192.168.200.0/24"},
		{name: "no interface", node: "b", addr: "192.168.200.13", wantErr: "no interface"},
		{name: "not a member", node: "z", addr: "192.168.200.13", wantErr: "not in the cluster"},
		{
			// Before the node's address is observed: the cluster's own
			// env, no pins.
			name: "not observed", node: "b", iface: "enp1s0f0np0",
			want: map[string]string{"FOO": "bar", "RAY_memory_monitor_refresh_ms": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/run/rayform-secrets/ray_auth_token"},
		},
		{
			// A single-node cluster without a network: no pins, whatever
			// address the node has; without authentication (auth = "none"),
			// none of Ray's authentication variables.
			name: "no network", cluster: "solo", node: "s", addr: "10.1.230.182", iface: "enP7s7",
			want: map[string]string{"FOO": "solo"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.cluster
			if name == "" {
				name = "c"
			}
			var addr netip.Addr
			if tt.addr != "" {
				addr = netip.MustParseAddr(tt.addr)
			}
			got, err := cluster.View(cfg.Config).ContainerEnv(name, tt.node, addr, tt.iface)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("wrong env\ngot:  %v\nwant: %v", got, tt.want)
			}
		})
	}
}
