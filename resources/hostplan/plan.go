// Package hostplan is what the kinds that run containers (ray_cluster,
// vllm_serve) share beyond the kind.Kind contract: a Planner with the
// readings of the observed hosts their plans make (a host's usable facts,
// a container by name, the ports in use, the state), the checks of the
// values a block sends to a host's command line (environment names and
// values, the kernel's argument limits, CheckCommandLimits), and small
// helpers. It knows no kind: each kind reads it, not the other kind.
package hostplan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
)

// Planner is kind.Planner with the readings of the plan's inputs the
// container kinds share.
type Planner struct{ kind.Planner }

// Find adds a finding of severity sev about addr (on host, "" for none).
func (p Planner) Find(sev plan.Severity, addr, host, summary, detail, fix string) {
	p.Finding(plan.Finding{Severity: sev, Address: addr, Host: host, Summary: summary, Detail: detail, Fix: fix})
}

// Host is node's facts if the plan may judge the node by them
// (kind.Usable), nil otherwise.
func (p Planner) Host(node string) *observe.HostFacts { return kind.Usable(p.Facts(), node) }

// ObservedContainer is a cluster's container on one node, as found.
type ObservedContainer struct {
	C     observe.Container
	Found bool
}

// Container is the container named name on node, as the hosts show it.
func (p Planner) Container(node, name string) ObservedContainer {
	hf := p.Host(node)
	if hf == nil {
		return ObservedContainer{}
	}
	c, ok := hf.Containers.ByName(name)
	return ObservedContainer{C: c, Found: ok}
}

// FirstNonEmpty is the first of ss that is not "".
func FirstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// OrNone is s, or "(none)" for "".
func OrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// StateHas reports whether the state records addr.
func (p Planner) StateHas(addr string) bool {
	st := p.State()
	if st == nil {
		return false
	}
	_, ok := st.Get(addr)
	return ok
}

// StrVal is s as a value, unknown for "".
func StrVal(s string) cty.Value {
	if s == "" {
		return cty.UnknownVal(cty.String)
	}
	return cty.StringVal(s)
}

// ListOrEmpty is vs as a list of strings, empty for none.
func ListOrEmpty(vs []cty.Value) cty.Value {
	if len(vs) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	return cty.ListVal(vs)
}

// PortUse is a port a resource will listen on and the argument that sets
// it.
type PortUse struct {
	Port int
	Attr string
}

// PortsFree reports, as errors, the ports that something already listens
// on at node, where what (of resource addr) is about to listen: with host
// networking it would fail to bind ("address already in use"). It names
// the holder as ss shows it (often a second deployment on the same nodes).
// own is the container that apply removes before what (in it, or in its
// place) starts ("" for none): its ports are not "in use" either.
func (p Planner) PortsFree(addr, node, what, own string, uses []PortUse) {
	hf := p.Host(node)
	if hf == nil {
		return
	}
	removed := p.removedContainers(node)
	for _, u := range uses {
		var ls []observe.Listener
		for _, l := range hf.Listening.On(u.Port) {
			// A container of this project whose resource the
			// configuration no longer declares goes in the same apply,
			// before anything starts: its ports are not "in use" (a
			// renamed ray_cluster's own ports, issue 33 item 4).
			if !removed[l.Container] && (own == "" || l.Container != own) {
				ls = append(ls, l)
			}
		}
		if u.Port == 0 || len(ls) == 0 {
			continue
		}
		var holders []string
		for _, l := range ls {
			h := l.Addr
			if l.Process != "" {
				h += fmt.Sprintf(" by %s (pid %d)", l.Process, l.PID)
			}
			holders = append(holders, h)
		}
		detail := fmt.Sprintf("Something already listens on %s on %s. %s would fail to start there with \"address already in use\": rayform's containers use the host's network.",
			strings.Join(holders, ", "), node, what)
		if ls[0].Process == "" {
			detail += " (ss names the process only to root or its owner.)"
		}
		p.Find(plan.Error, addr, node, fmt.Sprintf("port %d on %s is already in use", u.Port, node), detail,
			fmt.Sprintf("stop what holds it, or set %s = <a free port> on %s", u.Attr, addr))
	}
}

// removedContainers are the names of node's containers of this project
// whose resource the configuration does not declare: the plan destroys
// them (their resources' destroy runs before what replaces them starts).
func (p Planner) removedContainers(node string) map[string]bool {
	hf := p.Host(node)
	if hf == nil {
		return nil
	}
	out := map[string]bool{}
	var g interface{ Has(string) bool }
	for _, c := range hf.Containers.List {
		if c.Labels["rayform.managed"] != "true" || c.Labels["rayform.project"] != p.Project() || c.Resource == "" {
			continue
		}
		if g == nil {
			g = p.Config().Graph()
		}
		if !g.Has(c.Resource) {
			out[c.Name] = true
		}
	}
	return out
}

// FirstHost is the node of the first of hs, "" for none.
func FirstHost(hs []state.Host) string {
	if len(hs) == 0 {
		return ""
	}
	return hs[0].Node
}

// StringVals are ss as values.
func StringVals(ss []string) []cty.Value {
	var out []cty.Value
	for _, s := range ss {
		out = append(out, cty.StringVal(s))
	}
	return out
}

// AppendUnique appends s to list unless it holds it already.
func AppendUnique(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// appendUniqueInt appends each of vs not yet in list.
// AppendUniqueInt appends each of vs to list unless it holds it already.
func AppendUniqueInt(list []int, vs ...int) []int {
	for _, v := range vs {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

// StateNodes are the nodes of hs.
func StateNodes(hs []state.Host) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Node)
	}
	return out
}

// SecretValues picks the secret keys' values out of env.
func SecretValues(env map[string]string, secret []string) map[string]string {
	if len(secret) == 0 {
		return nil
	}
	out := make(map[string]string, len(secret))
	for _, k := range secret {
		out[k] = env[k]
	}
	return out
}

// OnlyUnknown reports whether every path of changed (attrs.ChangedPaths)
// is a value d does not know: a variable given no value where only a
// read-only command runs (status, logs). What rayform was not given it
// cannot compare, so such a difference is no change.
func OnlyUnknown(d *config.Decl, changed []string) bool {
	if len(changed) == 0 {
		return false
	}
	for _, p := range changed {
		if !d.IsUnknown(p) {
			return false
		}
	}
	return true
}
