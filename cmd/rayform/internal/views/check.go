package views

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/resources/serve"
)

// Check shows the data-plane check: for a person (CheckHuman) or as one
// JSON list of the clusters' reports (CheckJSON).
type Check interface {
	// Start says a cluster's check begins.
	Start(addr string, nodes int, master netip.Addr)
	// Report shows a cluster's check.
	Report(cc *serve.ClusterCheck)
	// Done ends the output.
	Done() error
	// ClusterError says a cluster's check could not run.
	ClusterError(addr string, err error)
	Error(err error)
}

// NewCheck is the check view vt chooses.
func NewCheck(vt arguments.ViewType, v *View) Check {
	if vt == arguments.ViewJSON {
		return &CheckJSON{View: v}
	}
	return &CheckHuman{View: v}
}

// ClusterError prints "Error: ADDR: ERR" on stderr.
func (v *View) ClusterError(addr string, err error) {
	v.Error(fmt.Errorf("%s: %w", addr, err))
}

// CheckHuman prints each cluster's table, warnings and verdict.
type CheckHuman struct{ *View }

// Start says a cluster's check begins.
func (v *CheckHuman) Start(addr string, nodes int, master netip.Addr) {
	fmt.Fprintf(v.stdout, "%s: data-plane check on %d nodes, rendezvous on %s...\n", addr, nodes, master)
}

// Report prints the cluster's table, warnings and verdict.
func (v *CheckHuman) Report(cc *serve.ClusterCheck) {
	rep := cc.Report
	fmt.Fprint(v.stdout, rep.Table())
	for _, p := range rep.Problems() {
		if p.Warning {
			fmt.Fprintf(v.stdout, "Warning: %s\n", p.Text)
		}
	}
	if cc.Failure != nil {
		fmt.Fprintf(v.stdout, "\nError: %s\n", cc.Failure)
	} else {
		fmt.Fprintf(v.stdout, "%s: data plane ok (rendezvous port %d; %s)\n", cc.Address, rep.Port, rep.Timing())
	}
}

// Done ends the output.
func (*CheckHuman) Done() error { return nil }

// CheckJSON collects the reports and prints them as one list.
type CheckJSON struct {
	*View
	reports []serve.CheckJSON
}

// Start shows nothing.
func (*CheckJSON) Start(string, int, netip.Addr) {}

// Report keeps the cluster's report.
func (v *CheckJSON) Report(cc *serve.ClusterCheck) { v.reports = append(v.reports, cc.JSON()) }

// Done prints the reports.
func (v *CheckJSON) Done() error {
	enc := json.NewEncoder(v.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v.reports)
}
