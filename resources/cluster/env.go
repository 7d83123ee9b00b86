package cluster

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
)

// ContainerEnv returns the whole environment of the Ray container of a
// cluster on node: the cluster's env, RAY_memory_monitor_refresh_ms=0 when
// the memory monitor is off, and the network's pins ([Network.NodeEnv])
// once the node's address on it is known (addr is valid). A cluster
// without a network (a single node) has no pins, and addr and
// observedIface are not used. It is the one place the container's
// environment is built.
func (c *Blocks) ContainerEnv(cluster, node string, addr netip.Addr, observedIface string) (map[string]string, error) {
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
	if rc.Auth == AuthToken {
		// Ray reads the token from this file (Ray's
		// AuthenticationTokenLoader: RAY_AUTH_TOKEN, then
		// RAY_AUTH_TOKEN_PATH, then ~/.ray/auth_token), so every process
		// of the container finds it: ray start's daemons, vLLM's workers,
		// and each docker exec rayform runs (ray list nodes, vllm serve,
		// the data-plane check) without the token in its environment.
		env["RAY_AUTH_MODE"] = "token"
		env["RAY_AUTH_TOKEN_PATH"] = AuthTokenPath
	}
	return env, nil
}
