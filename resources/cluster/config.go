// Package cluster is the ray_cluster kind (Kind): a Ray cluster of one
// container per node, started with docker run over SSH, its head first
// and its workers joining it over the cluster's network. Its schema,
// decoding and checks; what it asks the hosts; its plan (ClusterWork);
// the steps that carry it out; what is present, its destruction, logs,
// status and locks.
//
// A block that runs on a cluster (a vllm_serve) reads it through the
// values this package exports: the block's Go value (RayCluster), its
// containers as declared (ClusterSpecs, ContainerSpec), their labels, the
// observed Ray node table (RayTable) and the fabric addresses
// (FabricAddrs). The cluster reads such blocks only through kind's
// interfaces (kind.SecretHolder) and through kind.Restarter it tells them
// which of its nodes restart.
package cluster

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/node"
)

// Type is the ray_cluster block type.
const Type = "ray_cluster"

// nodeType is the node block type (node.Type), for where a parameter
// named node hides the package.
const nodeType = node.Type

// Patterns of names and sizes Docker accepts.
const (
	containerNamePattern = `^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`
	shmSizePattern       = `^[0-9]+(\.[0-9]+)?([bkmgBKMG]|[kmgKMG][bB]|[kmgKMG]i[bB])?$`
)

// Blocks is an evaluated configuration as the cluster kind reads it: the
// language's values through the embedded *config.Config, and the blocks it
// reads by name.
type Blocks struct {
	*config.Config
	Nodes       map[string]*node.Node
	Networks    map[string]*network.Network
	RayClusters map[string]*RayCluster
}

// View returns the cluster kind's view of an evaluated configuration; nil
// for nil.
func View(c *config.Config) *Blocks {
	if c == nil {
		return nil
	}
	return &Blocks{
		Config:      c,
		Nodes:       kind.BlocksOf[node.Node](c, node.Type),
		Networks:    kind.BlocksOf[network.Network](c, network.Type),
		RayClusters: Clusters(c),
	}
}

// Clusters returns the ray_cluster blocks of c by name.
func Clusters(c *config.Config) map[string]*RayCluster {
	return kind.BlocksOf[RayCluster](c, Type)
}

// SecretKeys are the deployments' secret-digest keys by cluster name
// (kind.Facts.SecretKeys).
func (c *Blocks) SecretKeys() map[string][]byte { return kind.ConfigFacts(c.Config).SecretKeys }

// planner is what the cluster kind plans through: kind.Planner, hostplan's
// readings of the hosts, the configuration through its view, and the
// hosts' readings with the nodes' fabric (Fabric).
type planner struct {
	hostplan.Planner
	cfg *Blocks
	fab Fabric
}

// newPlanner is the cluster kind's planner over p.
func newPlanner(p kind.Planner) *planner {
	cfg := View(p.Config())
	return &planner{Planner: hostplan.Planner{Planner: p}, cfg: cfg, fab: NewFabric(cfg, p.Facts())}
}

// WithFacts re-evaluates the configuration with observed facts
// (config.Config.WithFacts), keeping its secret-digest keys.
func (c *Blocks) WithFacts(f kind.Facts) (*Blocks, hcl.Diagnostics) {
	if f.SecretKeys == nil {
		f.SecretKeys = c.SecretKeys()
	}
	if f.Bearers == nil {
		f.Bearers = kind.ConfigFacts(c.Config).Bearers
	}
	out, diags := c.Config.WithFacts(f)
	return View(out), diags
}
