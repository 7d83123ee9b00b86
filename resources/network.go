package resources

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// InterfaceFor returns the interface the network pins on node: its entry in
// Interfaces, else Interface, else "" (taken from observation).
func (n *Network) InterfaceFor(node string) string {
	if i, ok := n.Interfaces[node]; ok {
		return i
	}
	return n.Interface
}

// networkPins lists, in order, the environment variables a network pins in
// the Ray container of each node, with the argument that sets each.
func networkPins() []struct{ key, from string } {
	return []struct{ key, from string }{
		{"VLLM_HOST_IP", "the network's address of each node"},
		{"NCCL_SOCKET_IFNAME", "the network's interface"},
		{"GLOO_SOCKET_IFNAME", "the network's interface"},
		{"TP_SOCKET_IFNAME", "the network's interface"},
		{"UCX_NET_DEVICES", "the network's interface"},
		{"NCCL_IB_HCA", "the network's ib_hca"},
	}
}

// PinnedEnv lists the environment variables rayform sets in every Ray
// container (the network's pins and RAY_memory_monitor_refresh_ms), with
// the argument that controls each: env, docker_args and extra_args must
// not set them.
func PinnedEnv() map[string]string {
	out := map[string]string{"RAY_memory_monitor_refresh_ms": "the Ray cluster's memory_monitor"}
	for _, p := range networkPins() {
		out[p.key] = p.from
	}
	return out
}

// NetworkEnvKeys returns the variables a network binding pins on every
// node ([Network.NodeEnv]). They differ per host, so they are also listed
// in vLLM's ray_non_carry_over_env_vars.json: the head's values must not
// overwrite a worker's.
func NetworkEnvKeys() []string {
	var out []string
	for _, p := range networkPins() {
		out = append(out, p.key)
	}
	return out
}

// NodeEnv returns the environment variables the network pins in the Ray
// container on node, so that Ray, vLLM, NCCL, Gloo, TensorPipe and UCX all
// use the fabric:
//
//	VLLM_HOST_IP        the node's fabric address (also Ray's --node-ip-address)
//	NCCL_SOCKET_IFNAME  the fabric interface
//	GLOO_SOCKET_IFNAME  the fabric interface
//	TP_SOCKET_IFNAME    the fabric interface
//	UCX_NET_DEVICES     the fabric interface; with ib_hca, the RDMA devices
//	                    as UCX names them, <hca>:<port> (port 1 unless given)
//	NCCL_IB_HCA         ib_hca joined with commas (only when ib_hca is set)
//
// addr is the node's observed address on the network; observedIface is the
// interface observed to hold it, used when the network does not pin one.
func (n *Network) NodeEnv(node string, addr netip.Addr, observedIface string) (map[string]string, error) {
	if !n.CIDR.IsValid() || !n.CIDR.Contains(addr) {
		return nil, fmt.Errorf("network %s: node %s: address %s is not in %s", n.Name, node, addr, n.CIDR)
	}
	iface := n.InterfaceFor(node)
	if iface == "" {
		iface = observedIface
	}
	if iface == "" {
		return nil, fmt.Errorf("network %s: node %s: no interface pinned and none observed for %s", n.Name, node, addr)
	}
	env := map[string]string{
		"VLLM_HOST_IP":       addr.String(),
		"NCCL_SOCKET_IFNAME": iface,
		"GLOO_SOCKET_IFNAME": iface,
		"TP_SOCKET_IFNAME":   iface,
		"UCX_NET_DEVICES":    iface,
	}
	if len(n.IBHCA) > 0 {
		env["NCCL_IB_HCA"] = strings.Join(n.IBHCA, ",")
		if dev := ucxDevices(n.IBHCA); dev != "" {
			env["UCX_NET_DEVICES"] = dev
		}
	}
	return env, nil
}

// ucxDevices is UCX_NET_DEVICES for the HCAs NCCL_IB_HCA names: UCX takes
// RDMA devices as <hca>:<port> (a netdev name limits UCX to TCP). NCCL's
// "=" (exact match) prefix is dropped; an exclusion list ("^mlx5_1") has no
// UCX form, so "" keeps the netdev.
func ucxDevices(hcas []string) string {
	var out []string
	for _, h := range hcas {
		h = strings.TrimPrefix(h, "=")
		if strings.HasPrefix(h, "^") {
			return ""
		}
		if !strings.Contains(h, ":") {
			h += ":1"
		}
		out = append(out, h)
	}
	return strings.Join(out, ",")
}

// ContainerEnv returns the whole environment of the Ray container of a
// cluster on node: the cluster's env, RAY_memory_monitor_refresh_ms=0 when
// the memory monitor is off, and the network's pins ([Network.NodeEnv])
// once the node's address on it is known (addr is valid). A cluster
// without a network (a single node) has no pins, and addr and
// observedIface are not used. It is the one place the container's
// environment is built.
func (c *Config) ContainerEnv(cluster, node string, addr netip.Addr, observedIface string) (map[string]string, error) {
	rc, ok := c.RayClusters[cluster]
	if !ok {
		return nil, fmt.Errorf("no ray_cluster %q", cluster)
	}
	if !slices.Contains(rc.Nodes(), node) {
		return nil, fmt.Errorf("ray_cluster %s: node %s is not in the cluster", cluster, node)
	}
	var pins map[string]string
	if rc.Network != "" && addr.IsValid() {
		nw, ok := c.Networks[rc.Network]
		if !ok {
			return nil, fmt.Errorf("ray_cluster %s: no network %q", cluster, rc.Network)
		}
		var err error
		if pins, err = nw.NodeEnv(node, addr, observedIface); err != nil {
			return nil, fmt.Errorf("ray_cluster %s: %w", cluster, err)
		}
	}
	env := make(map[string]string, len(rc.Env)+len(pins)+1)
	maps.Copy(env, rc.Env)
	if !rc.MemoryMonitor {
		env["RAY_memory_monitor_refresh_ms"] = strconv.Itoa(0)
	}
	maps.Copy(env, pins)
	return env, nil
}
