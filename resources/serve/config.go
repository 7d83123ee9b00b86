// Package serve is the vllm_serve kind (Kind): one `vllm serve` process
// in the head container of a Ray cluster, started with docker exec over
// SSH. Its schema, decoding and checks; what it asks the hosts (its own
// port's /health and /v1/models, its process record, the model's files);
// its plan (ServeWork), with the model preflight and the architecture
// check; the steps that stop, start and verify it, with the data-plane
// check before; what is present, its destruction, logs and status.
//
// It runs on a ray_cluster and reads it through the values the cluster
// package exports (cluster.RayCluster, cluster.ClusterSpecs, the labels,
// cluster.FabricAddrs) and through kind's interfaces (kind.Restarter: the
// nodes the cluster's change restarts); the cluster reads a serve only
// through the interfaces its Go value implements (kind.SecretHolder,
// kind.Mounter). A model block reaches it through Weights.
package serve

import (
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/node"
)

// Type is the vllm_serve block type.
const Type = "vllm_serve"

// Blocks is an evaluated configuration as the serve kind reads it: the
// language's values through the embedded *config.Config, and the blocks it
// reads by name.
type Blocks struct {
	*config.Config
	Nodes       map[string]*node.Node
	Networks    map[string]*network.Network
	RayClusters map[string]*cluster.RayCluster
	Serves      map[string]*VLLMServe
}

// View returns the serve kind's view of an evaluated configuration; nil
// for nil.
func View(c *config.Config) *Blocks {
	if c == nil {
		return nil
	}
	cv := cluster.View(c)
	return &Blocks{Config: c, Nodes: cv.Nodes, Networks: cv.Networks, RayClusters: cv.RayClusters, Serves: Serves(c)}
}

// Serves returns the vllm_serve blocks of c by name.
func Serves(c *config.Config) map[string]*VLLMServe {
	return kind.BlocksOf[VLLMServe](c, Type)
}

// SecretKeys are the deployments' secret-digest keys by cluster name
// (kind.Facts.SecretKeys).
func (c *Blocks) SecretKeys() map[string][]byte { return kind.ConfigFacts(c.Config).SecretKeys }

// clusters is c as the cluster kind reads it.
func (c *Blocks) clusters() *cluster.Blocks { return cluster.View(c.Config) }

// planner is what the serve kind plans through: kind.Planner, hostplan's
// readings of the hosts, the configuration through its view, and the
// hosts' readings with the nodes' fabric (cluster.Fabric).
type planner struct {
	hostplan.Planner
	cfg *Blocks
	fab cluster.Fabric
	// overBudget are the clusters whose serves gpuBudget refused (or
	// capacity, one serve alone): clusterBudget does not judge them again.
	overBudget map[string]bool
}

// newPlanner is the serve kind's planner over p.
func newPlanner(p kind.Planner) *planner {
	cfg := View(p.Config())
	return &planner{Planner: hostplan.Planner{Planner: p}, cfg: cfg, fab: cluster.NewFabric(cfg.clusters(), p.Facts())}
}
