package command

import (
	"context"
	"net/netip"
	"sort"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/state"
)

// runOutput prints the outputs as the last apply left them, without
// contacting any host: the configuration is evaluated with the facts the
// state recorded at that apply (each node's fabric address). Variables
// without a value are unknown, as in validate, so an output that does not
// depend on a secret needs none.
func runOutput(_ context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseOutput, args)
	if !ok {
		return code
	}
	view := views.NewOutput(a.ViewType, a.Raw, m.View)
	outs, code := appliedOutputs(m, view, &a.Vars, a.StateFile)
	if outs == nil {
		return code
	}
	if a.Name == "" {
		if err := view.All(outs); err != nil {
			view.Error(err)
			return ExitError
		}
		return ExitOK
	}
	o, ok := outs[a.Name]
	if !ok {
		names := make([]string, 0, len(outs))
		for n := range outs {
			names = append(names, n)
		}
		sort.Strings(names)
		view.NotFound(a.Name, config.Suggest(a.Name, names))
		return ExitError
	}
	if !o.Value.IsWhollyKnown() {
		view.Unknown(a.Name)
		return ExitError
	}
	if err := view.One(a.Name, o); err != nil {
		view.Error(err)
		return ExitError
	}
	return ExitOK
}

// appliedOutputs evaluates the configuration's outputs with the fabric
// addresses the state recorded. It returns nil and the exit code when
// there is nothing to print or an error (shown).
func appliedOutputs(m *Meta, view views.Output, vars *arguments.Vars, stateFile string) (map[string]*config.Output, int) {
	st, err := state.Load(m.statePath(stateFile))
	if err != nil {
		view.Error(err)
		return nil, ExitError
	}
	if len(st.Addresses()) == 0 {
		view.NoOutputs(stateFile)
		return nil, ExitOK
	}
	cfg, diags := loadConfigChecking(m, vars)
	if diags.HasErrors() {
		view.Diagnostics(cfg.Files, diags)
		return nil, ExitError
	}
	loaded := cfg
	cfg, diags = kind.WithFacts(loaded, kind.Facts{FabricAddrs: recordedFabric(st)})
	if diags.HasErrors() {
		view.Diagnostics(loaded.Files, diags)
		return nil, ExitError
	}
	if len(cfg.Outputs) == 0 {
		view.NoOutputs("")
		return nil, ExitOK
	}
	return cfg.Outputs, ExitOK
}

// recordedFabric is each node's fabric address as the last apply recorded
// it in the state.
func recordedFabric(st *state.State) map[string]netip.Addr {
	out := map[string]netip.Addr{}
	for _, addr := range st.Addresses() {
		r, _ := st.Get(addr)
		for _, h := range r.Hosts {
			if a, err := netip.ParseAddr(h.FabricAddress); err == nil {
				out[h.Node] = a
			}
		}
	}
	return out
}
