package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
)

// recordState makes the state record what the hosts show after the run,
// whatever way it ended: again is the hosts re-observed after the walk.
// Where that observation is missing (the run was cut short), only the
// resources the walk completed are recorded (created or updated, or
// forgotten when destroyed); nothing that did not happen is. It saves the
// state only when it changed.
func (r *Runner) recordState(obs, again *Observation, completed map[string]bool) error {
	before, err := json.Marshal(r.State.Resources)
	if err != nil {
		return err
	}
	if again != nil {
		r.reconcileState(again, completed)
	} else {
		for addr, w := range obs.Result.Work {
			if !completed[addr] {
				continue
			}
			if w.Action == plan.Delete {
				r.State.Remove(addr)
				continue
			}
			rec := record(w)
			res := state.Resource{Type: rec.Type, Container: rec.Container, AppliedAt: time.Now()}
			old, _ := r.State.Get(addr)
			for _, node := range rec.Nodes {
				if h, ok := r.stateHost(obs.Config, old, node); ok {
					res.Hosts = append(res.Hosts, h)
				}
			}
			r.State.Set(addr, res)
		}
	}
	after, err := json.Marshal(r.State.Resources)
	if err != nil {
		return err
	}
	if string(before) == string(after) && !r.State.ImagesChanged() {
		return nil
	}
	return r.saveState()
}

// reconcileState sets the state to the project's resources the observation
// shows: each present resource on the nodes holding it, each absent one
// forgotten, except where a node it was recorded on could not be observed
// (what that node holds is unknown, so its record stays). A resource the
// walk completed (created, updated or replaced) was applied now.
func (r *Runner) reconcileState(again *Observation, completed map[string]bool) {
	present, unknown := PresentResources(r.Kinds, r.planInput(again.Config, again.Facts))
	unseen := func(node string) bool { return unknown[node] || again.Facts.Hosts[node] == nil }
	for _, addr := range r.State.Addresses() {
		if _, ok := present[addr]; ok {
			continue
		}
		// Gone from every node observed: what stays recorded are the
		// nodes that could not be, which may still hold it.
		old, _ := r.State.Get(addr)
		var keep []state.Host
		for _, h := range old.Hosts {
			if unseen(h.Node) {
				keep = append(keep, h)
			}
		}
		if len(keep) == 0 {
			r.State.Remove(addr)
		} else if len(keep) < len(old.Hosts) {
			old.Hosts = keep
			r.State.Set(addr, old)
		}
	}
	for addr, p := range present {
		old, had := r.State.Get(addr)
		res := state.Resource{Type: p.Type, Container: p.Container, Head: p.Head, AppliedAt: old.AppliedAt}
		if !had || res.AppliedAt.IsZero() || completed[addr] {
			res.AppliedAt = time.Now()
		}
		for _, node := range p.Nodes {
			if h, ok := r.stateHost(again.Config, old, node); ok {
				res.Hosts = append(res.Hosts, h)
			}
		}
		// A node recorded before but not observed now may still hold it.
		for _, h := range old.Hosts {
			if unseen(h.Node) && !slices.Contains(p.Nodes, h.Node) {
				res.Hosts = append(res.Hosts, h)
			}
		}
		if len(res.Hosts) > 0 {
			r.State.Set(addr, res)
		}
	}
}

// stateHost returns the SSH coordinates of node for a state record: from
// the configuration, else from the resource's earlier record. A node known
// to neither cannot be reached again and is not recorded.
func (r *Runner) stateHost(cfg *config.Config, old state.Resource, node string) (state.Host, bool) {
	var prev state.Host
	for _, h := range old.Hosts {
		if h.Node == node {
			prev = h
		}
	}
	if n, ok := hostOf(r.Kinds, cfg, node); ok {
		h := state.Host{Node: node, Host: n.Host, User: n.User, Port: n.Port, Bastion: n.Bastion}
		if h.Host == prev.Host {
			h.FabricAddress, h.FabricInterface = prev.FabricAddress, prev.FabricInterface
		}
		return h, h.Host != ""
	}
	if prev.Host != "" {
		return prev, true
	}
	for _, addr := range r.State.Addresses() {
		rec, _ := r.State.Get(addr)
		for _, h := range rec.Hosts {
			if h.Node == node && h.Host != "" {
				return state.Host{Node: node, Host: h.Host, User: h.User, Port: h.Port, Bastion: h.Bastion}, true
			}
		}
	}
	return state.Host{}, false
}

// saveState writes the state file (atomically, 0600).
func (r *Runner) saveState() error {
	if err := os.MkdirAll(filepath.Dir(r.StatePath), 0o700); err != nil {
		return err
	}
	return r.State.Save(r.StatePath)
}

// recordFabric writes down each applied node's fabric address and
// interface as the converged hosts show them, so the next plan can assume
// them. It saves the state only when they changed.
func (r *Runner) recordFabric(obs *Observation) error {
	fb := fabric(r.Kinds, obs.Config, obs.Facts)
	addrs, ifaces := fb.Addrs, fb.Ifaces
	changed := false
	for _, addr := range r.State.Addresses() {
		rec, _ := r.State.Get(addr)
		dirty := false
		for i, h := range rec.Hosts {
			a, ok := addrs[h.Node]
			if !ok || !a.IsValid() {
				continue
			}
			if h.FabricAddress != a.String() || h.FabricInterface != ifaces[h.Node] {
				rec.Hosts[i].FabricAddress, rec.Hosts[i].FabricInterface = a.String(), ifaces[h.Node]
				dirty = true
			}
		}
		if dirty {
			r.State.Set(addr, rec)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return r.saveState()
}
