// Package resources is the registry of the resource kinds (Kinds: node,
// network, ray_cluster, vllm_serve, model, each in a package of its own
// behind kind.Kind) and what runs them all for the engine: the typed view
// of a configuration (Config), the observation to ask (ObserveSpec), the
// planner the kinds plan through (Plan), destroy, what is present, the
// steps' dispatch, and the run provider (Provider) that answers
// engine/run with them. The engine walks; the kinds decide.
package resources

import (
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/kind"
	"github.com/rayform/rayform/resources/model"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/node"
	"github.com/rayform/rayform/resources/serve"
)

// Kinds returns the resource kinds rayform knows, in the order they are
// planned and the README documents them. Each is reached only through
// the kind.Kind interface: registering a kind is one line here.
func Kinds() []kind.Kind {
	return []kind.Kind{node.Kind{}, network.Kind{}, cluster.Kind{}, serve.Kind{}, model.Kind{}}
}

// KindsWith returns the registered kinds that implement the optional
// interface T (kind.WithObserve, kind.WithSteps, ...), in registration
// order: how a kind's optional part is discovered.
func KindsWith[T any]() []T {
	var out []T
	for _, k := range Kinds() {
		if t, ok := k.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Schemas returns the descriptors of the registered kinds (their schema
// and checks): whatever loads a configuration passes them in
// config.Options.Kinds.
func Schemas() []config.Kind {
	var out []config.Kind
	for _, k := range Kinds() {
		out = append(out, k.Schema())
	}
	return out
}

// KindOf returns the registered kind of block type typ, nil when none.
func KindOf(typ string) kind.Kind {
	for _, k := range Kinds() {
		if k.Schema().Type == typ {
			return k
		}
	}
	return nil
}

// KindAt returns the registered kind of the resource at addr, nil when
// none.
func KindAt(addr string) kind.Kind {
	return KindOf(plan.ParseAddress(addr).Type)
}

// kindArgs returns the arguments of block type typ.
func kindArgs(typ string) []config.Arg {
	if k := KindOf(typ); k != nil {
		return k.Schema().Args
	}
	return nil
}

// TypesWith returns the block types of the registered kinds that satisfy
// has (by their traits or the optional interfaces they implement), in
// registration order (for messages: "a ray_cluster or vllm_serve").
func TypesWith(has func(kind.Kind) bool) []string {
	var out []string
	for _, k := range Kinds() {
		if has(k) {
			out = append(out, k.Schema().Type)
		}
	}
	return out
}
