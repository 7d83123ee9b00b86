package stepenv

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/dataplane"
)

// RunCheck runs the data-plane check on nodes over e's connections.
func RunCheck(ctx context.Context, e *StepEnv, nodes []dataplane.Node) (*dataplane.Report, error) {
	ns, err := Connected(e.Conns, nodes)
	if err != nil {
		return nil, err
	}
	return dataplane.Run(ctx, ns, e.Dataplane), nil
}

// Connected returns nodes with each node's connection from conns.
func Connected(conns map[string]transport.Conn, nodes []dataplane.Node) ([]dataplane.Node, error) {
	ns := make([]dataplane.Node, len(nodes))
	for i, n := range nodes {
		n.Conn = conns[n.Name]
		if n.Conn == nil {
			return nil, fmt.Errorf("data-plane check: no connection to %s", n.Name)
		}
		ns[i] = n
	}
	return ns, nil
}

// CheckStarts are the data-plane checks of one apply whose ranks start
// ahead, as the containers they run in start: importing torch (seconds
// per process) then overlaps the rest of the cluster's start, and the
// check step before the serve only waits for what is left, then runs the
// rendezvous and the collectives. The rendezvous itself still happens
// after Ray's node table is verified. A nil *CheckStarts starts nothing
// ahead.
type CheckStarts struct {
	mu       sync.Mutex
	sessions map[string]*checkStart // by vllm_serve address
}

type checkStart struct {
	nodes []dataplane.Node
	s     *dataplane.Session
}

// CheckAhead is implemented by the Do of a Work that waits for a
// data-plane check before it starts (a vllm_serve that starts): the
// check's ranks, which NewCheckStarts launches ahead. Nil or empty for
// no check.
type CheckAhead interface {
	CheckAhead() []dataplane.Node
}

// NewCheckStarts prepares, for each work of ws whose Do asks for a check
// ahead (CheckAhead), a session whose ranks launch as their containers
// start (ContainerStarted); its processes live within ctx until the check
// step takes them or Close cancels them.
func NewCheckStarts(ctx context.Context, conns map[string]transport.Conn, ws map[string]*kind.Work, o dataplane.Options) *CheckStarts {
	cs := &CheckStarts{sessions: map[string]*checkStart{}}
	for addr, w := range ws {
		ca, ok := w.Do.(CheckAhead)
		if !ok {
			continue
		}
		nodes := ca.CheckAhead()
		if len(nodes) == 0 {
			continue
		}
		ns, err := Connected(conns, nodes)
		if err != nil {
			continue // the check step reports it
		}
		cs.sessions[addr] = &checkStart{nodes: nodes, s: dataplane.Start(ctx, ns, o)}
	}
	return cs
}

// ContainerStarted launches the ranks that run in container on node.
func (cs *CheckStarts) ContainerStarted(node, container string) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, st := range cs.sessions {
		st.s.Launch(node, container)
	}
}

// Take hands the session of serve over to its check step, once, when it
// checks the same nodes; nil otherwise.
func (cs *CheckStarts) Take(serve string, nodes []dataplane.Node) *dataplane.Session {
	if cs == nil {
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st := cs.sessions[serve]
	delete(cs.sessions, serve)
	if st == nil {
		return nil
	}
	if !slices.EqualFunc(st.nodes, nodes, func(a, b dataplane.Node) bool {
		return a.Name == b.Name && a.Container == b.Container && a.Addr == b.Addr && a.Iface == b.Iface
	}) {
		st.s.Close()
		return nil
	}
	return st.s
}

// Close cancels the ranks of every check no step took (the apply ended
// before its serve's check) and waits for them.
func (cs *CheckStarts) Close() {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	sessions := cs.sessions
	cs.sessions = map[string]*checkStart{}
	cs.mu.Unlock()
	for _, st := range sessions {
		st.s.Close()
	}
}

// checksKey keeps a walk's CheckStarts in its kind.Shared.
type checksKey struct{}

// OpenChecks starts the data-plane checks of the walk of req
// (NewCheckStarts) and keeps them where New finds them; the returned
// function closes them.
func OpenChecks(ctx context.Context, req kind.WalkRequest) func() {
	cs := NewCheckStarts(ctx, req.Env.Conns, req.Work, dataplane.Options{})
	req.Env.Shared.Set(checksKey{}, cs)
	return cs.Close
}
