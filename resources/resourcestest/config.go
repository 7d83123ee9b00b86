package resourcestest

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/node"
	"github.com/rayform/rayform/resources/serve"
)

// Blocks is an evaluated configuration seen through the kinds: the
// language's values and each kind's blocks by name.
type Blocks struct {
	*config.Config
	Nodes       map[string]*node.Node
	Networks    map[string]*network.Network
	RayClusters map[string]*cluster.RayCluster
	Serves      map[string]*serve.VLLMServe
}

// View is c seen through the kinds; nil for nil.
func View(c *config.Config) *Blocks {
	if c == nil {
		return nil
	}
	return &Blocks{Config: c, Nodes: kind.BlocksOf[node.Node](c, node.Type), Networks: kind.BlocksOf[network.Network](c, network.Type),
		RayClusters: kind.BlocksOf[cluster.RayCluster](c, cluster.Type), Serves: kind.BlocksOf[serve.VLLMServe](c, serve.Type)}
}

// Load loads the configuration in dir with the registered kinds.
func Load(dir string, opts config.Options) (*Blocks, hcl.Diagnostics) {
	if opts.Kinds == nil {
		opts.Kinds = resources.Kinds().Schemas()
	}
	cfg, diags := config.Load(dir, opts)
	return View(cfg), diags
}

// LoadFiles loads files with the registered kinds.
func LoadFiles(files map[string][]byte, opts config.Options) (*Blocks, hcl.Diagnostics) {
	if opts.Kinds == nil {
		opts.Kinds = resources.Kinds().Schemas()
	}
	cfg, diags := config.LoadFiles(files, opts)
	return View(cfg), diags
}

// WithFacts re-evaluates c with observed facts (kind.WithFacts).
func (c *Blocks) WithFacts(f kind.Facts) (*Blocks, hcl.Diagnostics) {
	out, diags := kind.WithFacts(c.Config, f)
	return View(out), diags
}

// SecretKeys are the keys c carries (kind.Facts.SecretKeys).
func (c *Blocks) SecretKeys() map[string][]byte { return kind.ConfigFacts(c.Config).SecretKeys }

// SetSecretKeys gives c keys, with the bearer tokens it has.
func (c *Blocks) SetSecretKeys(keys map[string][]byte) {
	c.Config = kind.WithSecrets(c.Config, keys, kind.ConfigFacts(c.Config).Bearers)
}

// UseSecretKeys gives c the keys and tokens the heads' probes read.
func (c *Blocks) UseSecretKeys(facts *observe.Facts, project string) {
	f := run.HostFacts(resources.Kinds(), c.Config, facts, project)
	c.Config = kind.WithSecrets(c.Config, f.SecretKeys, f.Bearers)
}
