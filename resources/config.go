package resources

import (
	"maps"
	"net/netip"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/kind"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/node"
	"github.com/rayform/rayform/resources/serve"
)

// The block types of the resource kinds (Kinds).
const (
	KindNode    = node.Type
	KindNetwork = network.Type
	KindCluster = cluster.Type
	KindServe   = serve.Type
)

// Config is an evaluated configuration seen through the resource kinds:
// the language's values (files, variables, locals, outputs, the graph)
// through the embedded *Config, and each kind's blocks as its Go
// values, by name: Nodes by node name (see [Node.Name]), the others by
// their block label.
type Config struct {
	*config.Config
	Nodes       map[string]*Node
	Networks    map[string]*Network
	RayClusters map[string]*cluster.RayCluster
	Serves      map[string]*serve.VLLMServe
}

// SecretKeys are the deployments' secret-digest keys by ray_cluster name,
// as read from each cluster's head (kind.Facts.SecretKeys, see
// UseSecretKeys); a cluster without one digests its secrets unkeyed.
func (c *Config) SecretKeys() map[string][]byte { return kind.ConfigFacts(c.Config).SecretKeys }

// UseSecretKeys sets c's SecretKeys from the keys the heads' probes read
// (cluster.ReadSecretKeys). A cluster whose key does not exist yet (no
// apply made it) digests its secrets unkeyed: there is nothing of it on
// the hosts to compare them with but what an earlier rayform made,
// unkeyed; apply makes the key under the lock and observes again before
// it creates anything.
func (c *Config) UseSecretKeys(facts *observe.Facts, project string) {
	f := learn(c.Config, facts, project)
	c.SetSecrets(f.SecretKeys, f.Bearers)
}

// SetSecretKeys is SetSecrets with the bearer tokens c already has.
func (c *Config) SetSecretKeys(keys map[string][]byte) {
	c.SetSecrets(keys, kind.ConfigFacts(c.Config).Bearers)
}

// SetSecrets sets the secret-digest keys and bearer tokens the kinds read
// (kind.Facts.SecretKeys, Bearers): c's language configuration is
// replaced by a copy that carries them among its facts.
func (c *Config) SetSecrets(keys map[string][]byte, bearers map[string]string) {
	lang := *c.Config
	f := kind.ConfigFacts(&lang)
	f.SecretKeys = keys
	f.Bearers = bearers
	lang.Facts = f
	c.Config = &lang
}

// View returns the kinds' view of an evaluated configuration; nil for nil.
func View(c *config.Config) *Config {
	if c == nil {
		return nil
	}
	return &Config{
		Config:      c,
		Nodes:       kind.BlocksOf[Node](c, KindNode),
		Networks:    kind.BlocksOf[Network](c, KindNetwork),
		RayClusters: kind.BlocksOf[cluster.RayCluster](c, KindCluster),
		Serves:      kind.BlocksOf[serve.VLLMServe](c, KindServe),
	}
}

// Load is config.Load with the resource kinds registered (opts.Kinds is
// replaced), seen through them. The returned Config is never nil; when
// diags has errors only its Files are reliable.
func Load(dir string, opts config.Options) (*Config, hcl.Diagnostics) {
	if opts.Kinds == nil {
		opts.Kinds = Schemas()
	}
	cfg, diags := config.Load(dir, opts)
	return View(cfg), diags
}

// LoadFiles is config.LoadFiles with the resource kinds registered, seen
// through them.
func LoadFiles(files map[string][]byte, opts config.Options) (*Config, hcl.Diagnostics) {
	if opts.Kinds == nil {
		opts.Kinds = Schemas()
	}
	cfg, diags := config.LoadFiles(files, opts)
	return View(cfg), diags
}

// Facts are what observing the hosts teaches the configuration
// (kind.Facts).
type Facts = kind.Facts

// factsOf returns the facts a block is evaluated with; none before the
// hosts are observed.
func factsOf(b *config.Block) Facts { return kind.FactsOf(b) }

// WithFacts re-evaluates the configuration with observed facts
// (config.Config.WithFacts), seen through the kinds.
func (c *Config) WithFacts(f Facts) (*Config, hcl.Diagnostics) {
	if f.SecretKeys == nil {
		f.SecretKeys = c.SecretKeys()
	}
	out, diags := c.Config.WithFacts(f)
	return View(out), diags
}

// learn is what the kinds learn from the hosts for the configuration's
// evaluation (kind.Learner), with the hosts themselves.
func learn(cfg *config.Config, facts *observe.Facts, project string) Facts {
	f := Facts{Hosts: facts}
	for _, k := range Kinds() {
		if l, ok := k.(kind.Learner); ok {
			l.Learn(cfg, facts, project, &f)
		}
	}
	return f
}

// fabric is each node's observed fabric address and the interface holding
// it, as the kinds that put nodes on a fabric read them (kind.Fabricator).
func fabric(cfg *config.Config, facts *observe.Facts) (map[string]netip.Addr, map[string]string) {
	addrs, ifaces := map[string]netip.Addr{}, map[string]string{}
	for _, k := range Kinds() {
		if fb, ok := k.(kind.Fabricator); ok {
			a, i := fb.Fabric(cfg, facts)
			maps.Copy(addrs, a)
			maps.Copy(ifaces, i)
		}
	}
	return addrs, ifaces
}
