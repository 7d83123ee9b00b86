package run

import (
	"context"
	"maps"
	"net/netip"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
)

// Evaluate re-evaluates loaded, the configuration as loaded, with what the
// hosts showed (the kinds' KindWithHostFacts), then asks what else the
// plan needs from outside the hosts (KindWithLookup: a model's files on
// its hub).
func Evaluate(ctx context.Context, kinds kind.Registry, loaded *config.Config, facts *observe.Facts, project string) (*config.Config, hcl.Diagnostics) {
	f := HostFacts(kinds, loaded, facts, project)
	cfg, diags := kind.WithFacts(loaded, f)
	if diags.HasErrors() {
		return nil, diags
	}
	// The keys read now, even where none was.
	cfg = kind.WithSecrets(cfg, f.SecretKeys, f.Bearers)
	for _, k := range kind.With[kind.KindWithLookup](kinds) {
		k.Lookup(ctx, cfg)
	}
	return cfg, diags
}

// HostFacts is what the kinds read from the hosts for the configuration's
// evaluation (kind.KindWithHostFacts), with the hosts themselves.
func HostFacts(kinds kind.Registry, cfg *config.Config, facts *observe.Facts, project string) kind.Facts {
	f := kind.Facts{Hosts: facts}
	for _, k := range kind.With[kind.KindWithHostFacts](kinds) {
		k.HostFacts(kind.HostFactsRequest{Config: cfg, Hosts: facts, Project: project, Facts: &f})
	}
	return f
}

// fabric is each node's observed fabric address and the interface holding
// it, as the kinds that put nodes on a fabric read them
// (kind.KindWithFabric).
func fabric(kinds kind.Registry, cfg *config.Config, facts *observe.Facts) kind.Fabric {
	out := kind.Fabric{Addrs: map[string]netip.Addr{}, Ifaces: map[string]string{}}
	for _, k := range kind.With[kind.KindWithFabric](kinds) {
		fb := k.Fabric(kind.FabricRequest{Config: cfg, Hosts: facts})
		maps.Copy(out.Addrs, fb.Addrs)
		maps.Copy(out.Ifaces, fb.Ifaces)
	}
	return out
}
