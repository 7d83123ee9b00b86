package kind

import (
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/plan"
)

// Registry is the resource kinds a run knows, in the order they are
// planned (resources.Kinds lists rayform's).
type Registry []Kind

// With returns the kinds of r that implement the optional interface T
// (KindWithObserve, KindWithSteps, ...), in registration order: how a
// kind's optional part is discovered.
func With[T Kind](r Registry) []T {
	var out []T
	for _, k := range r {
		if t, ok := k.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Schemas returns the descriptors of the kinds of r (their schema and
// checks): whatever loads a configuration passes them in
// config.Options.Kinds.
func (r Registry) Schemas() []config.Kind {
	var out []config.Kind
	for _, k := range r {
		out = append(out, k.Schema())
	}
	return out
}

// Of returns the kind of block type typ, nil when none.
func (r Registry) Of(typ string) Kind {
	for _, k := range r {
		if k.Schema().Type == typ {
			return k
		}
	}
	return nil
}

// At returns the kind of the resource at addr, nil when none.
func (r Registry) At(addr string) Kind {
	return r.Of(plan.ParseAddress(addr).Type)
}

// TypesWith returns the block types of the kinds of r that satisfy has
// (by their traits or the optional interfaces they implement), in
// registration order (for messages: "a ray_cluster or vllm_serve").
func (r Registry) TypesWith(has func(Kind) bool) []string {
	var out []string
	for _, k := range r {
		if has(k) {
			out = append(out, k.Schema().Type)
		}
	}
	return out
}
