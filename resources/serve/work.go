package serve

import (
	"net/netip"
	"time"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/hostplan"
)

// ServeWork is the work of a vllm_serve.
type ServeWork struct {
	Spec ServeSpec
	// Stop is set when a serve process may be running and must be stopped
	// first.
	Stop bool
	// Start is false for a delete.
	Start        bool
	HeadIP       netip.Addr
	ReadyTimeout time.Duration
	// Check are the ranks of the data-plane check that runs before the
	// serve starts (CheckNodes); nil when it is off.
	Check []dataplane.Node
	// Arch is the architecture check before the serve starts; nil when
	// plan judged it from the state or could not read config.json.
	Arch *ArchCheck
	// Model is the model preflight that runs after staging, before the
	// serve starts, when plan could not run it (the weights arrive in the
	// same apply); nil otherwise.
	Model *ModelCheck
	// Cluster is the address of its Ray cluster ("" when unknown).
	Cluster string
	// ClusterNodes are the nodes of its Ray cluster, head first: their
	// container logs are read when the serve fails. Nil (a serve the
	// state remembers) reads the logs of every node of the apply that has
	// the container.
	ClusterNodes []string
	// StopBefore, when set, is the serve whose start waits for this
	// serve's stop: the GPU budget counted this serve's GPUs free for it
	// (clusterBudget). The stop then runs ahead, as a node of its own.
	StopBefore string
	// BlueGreen replaces the running serve by starting the new one beside
	// it and switching its endpoint (bluegreen.go); Stop is then false.
	BlueGreen bool
	// stoppedAt is when apply stopped the serve that ran (zero when none
	// ran): the start of the outage a failed replacement reports.
	stoppedAt time.Time
}

// Container is the serve's cluster's head container (kind.WorkDetail).
func (w *ServeWork) Container() string { return w.Spec.Container }

// CheckAhead are the ranks of the data-plane check whose ranks start ahead,
// as their containers start (stepenv.CheckAhead): the check of a serve
// that starts, nil otherwise.
func (w *ServeWork) CheckAhead() []dataplane.Node {
	if !w.Start {
		return nil
	}
	return w.Check
}

// Commands is the serve's docker exec, when it starts (hostplan.Commander).
func (w *ServeWork) Commands(project string) []hostplan.NamedCmd {
	if !w.Start {
		return nil
	}
	return []hostplan.NamedCmd{{Name: "vllm serve " + w.Spec.Name + " on " + w.Spec.Node, Node: w.Spec.Node,
		Cmd: transport.Cmd{Argv: w.Spec.ExecArgs("0"), Env: w.Spec.SecretEnvValues()}}}
}

// WorkOf is w's serve work, nil when w is not a serve's.
func WorkOf(w *kind.Work) *ServeWork {
	if w == nil {
		return nil
	}
	sw, _ := w.Do.(*ServeWork)
	return sw
}
