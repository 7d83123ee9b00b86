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

// Config is an evaluated configuration seen through the kinds: the
// language's values and each kind's blocks by name.
type Config struct {
	*config.Config
	Nodes       map[string]*node.Node
	Networks    map[string]*network.Network
	RayClusters map[string]*cluster.RayCluster
	Serves      map[string]*serve.VLLMServe
}

// View is c seen through the kinds; nil for nil.
func View(c *config.Config) *Config {
	if c == nil {
		return nil
	}
	return &Config{Config: c, Nodes: kind.BlocksOf[node.Node](c, node.Type), Networks: kind.BlocksOf[network.Network](c, network.Type),
		RayClusters: kind.BlocksOf[cluster.RayCluster](c, cluster.Type), Serves: kind.BlocksOf[serve.VLLMServe](c, serve.Type)}
}

// Load loads the configuration in dir with the registered kinds.
func Load(dir string, opts config.Options) (*Config, hcl.Diagnostics) {
	if opts.Kinds == nil {
		opts.Kinds = resources.Kinds().Schemas()
	}
	cfg, diags := config.Load(dir, opts)
	return View(cfg), diags
}

// LoadFiles loads files with the registered kinds.
func LoadFiles(files map[string][]byte, opts config.Options) (*Config, hcl.Diagnostics) {
	if opts.Kinds == nil {
		opts.Kinds = resources.Kinds().Schemas()
	}
	cfg, diags := config.LoadFiles(files, opts)
	return View(cfg), diags
}

// WithFacts re-evaluates c with observed facts (kind.WithFacts).
func (c *Config) WithFacts(f kind.Facts) (*Config, hcl.Diagnostics) {
	out, diags := kind.WithFacts(c.Config, f)
	return View(out), diags
}

// SecretKeys are the keys c carries (kind.Facts.SecretKeys).
func (c *Config) SecretKeys() map[string][]byte { return kind.ConfigFacts(c.Config).SecretKeys }

// SetSecretKeys gives c keys, with the bearer tokens it has.
func (c *Config) SetSecretKeys(keys map[string][]byte) {
	c.Config = kind.WithSecrets(c.Config, keys, kind.ConfigFacts(c.Config).Bearers)
}

// UseSecretKeys gives c the keys and tokens the heads' probes read.
func (c *Config) UseSecretKeys(facts *observe.Facts, project string) {
	f := run.HostFacts(resources.Kinds(), c.Config, facts, project)
	c.Config = kind.WithSecrets(c.Config, f.SecretKeys, f.Bearers)
}
