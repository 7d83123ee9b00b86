package arguments

import (
	"strings"

	"github.com/rayform/rayform/resources/dataplane"
)

// Check is rayform check's command line.
type Check struct {
	*Run
	// Options are the check's: its timeout, buffer size, backends and
	// extra environment.
	Options dataplane.Options
	// Clusters are the clusters named (none: every one).
	Clusters []string
}

// ParseCheck parses rayform check's arguments.
func ParseCheck(args []string) (*Check, *ParseError) {
	o, p, json := newRun("check", "check [options] [CLUSTER...]\n\n"+
		"  Run the data-plane check on running Ray clusters (all, or the named ones):\n"+
		"  one torch process per node inside its Ray container, a c10d rendezvous on\n"+
		"  the head's fabric address, a Gloo and (with GPUs) an NCCL all_reduce. Prints\n"+
		"  the address and interface each backend used, the rendezvous time and the\n"+
		"  bus bandwidth next to the link speed; exits 1 when the data plane fails.\n"+
		"  Without CLUSTER, clusters with dataplane_check = false are left out.")
	a := &Check{Run: o}
	timeout := p.fs.Duration("timeout", dataplane.DefaultTimeout, "bound on the rendezvous and on each collective")
	size := p.fs.Float64("size-mb", dataplane.DefaultSizeMiB, "all_reduce buffer in `MiB`")
	backends := p.fs.String("backends", "auto", "`LIST` of gloo, nccl; auto = gloo, plus nccl where CUDA is available")
	var env stringList
	p.fs.Var(&env, "env", "add `NAME=VALUE` to the check's environment over the container's (try a setting, e.g. NCCL_IB_HCA, before pinning it; repeatable)")
	err := p.parse(args)
	o.ViewType = viewType(*json)
	if err != nil {
		return a, err
	}
	a.Options = dataplane.Options{Timeout: *timeout, SizeMiB: *size, Backends: *backends, Env: map[string]string{}}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return a, p.errorf("-env %q: want NAME=VALUE", kv)
		}
		a.Options.Env[k] = v
	}
	a.Clusters = p.fs.Args()
	return a, nil
}
