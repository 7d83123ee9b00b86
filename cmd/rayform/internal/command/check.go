package command

import (
	"context"
	"net/netip"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/resources/serve"
)

// runCheck runs the data-plane check on running clusters.
func runCheck(ctx context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseCheck, args)
	if !ok {
		return code
	}
	view := views.NewCheck(a.ViewType, m.View)
	s, code := openSession(m, m.View, a.Run, false)
	if s == nil {
		return code
	}
	defer s.close()
	clusters, err := serve.CheckClusters(serve.View(s.cfg), a.Clusters)
	if err != nil {
		view.Error(err)
		return ExitError
	}
	obs, err := s.observeAndPlan(ctx, true)
	if err != nil {
		view.Error(err)
		return ExitError
	}
	checker := serve.NewChecker(s.conns, obs.cfg, obs.facts, obs.result.Fabric, a.Options)
	failed := false
	for _, name := range clusters {
		addr := checker.Address(name)
		cc, err := checker.Check(ctx, name, func(nodes int, master netip.Addr) { view.Start(addr, nodes, master) })
		if err != nil {
			view.ClusterError(addr, err)
			failed = true
			continue
		}
		if cc.Failure != nil {
			failed = true
		}
		view.Report(cc)
	}
	if err := view.Done(); err != nil {
		view.Error(err)
		return ExitError
	}
	if failed {
		return ExitError
	}
	return ExitOK
}
