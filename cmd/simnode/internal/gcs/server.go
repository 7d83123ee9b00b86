package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/wire"
)

// Options configure a Server.
type Options struct {
	SessionName string
	ClusterID   string
	// HeartbeatTimeout marks a silent node DEAD.
	HeartbeatTimeout time.Duration
	// Now is the clock.
	Now func() time.Time
	// Log receives gcs_server.out lines.
	Log io.Writer
	// Pid is printed in log lines.
	Pid int
}

type node struct {
	info     NodeInfo
	conn     *wire.Conn
	lastBeat time.Time
}

type pg struct {
	id          string
	bundles     []map[string]float64
	strategy    string
	bundleNodes []string // node id per bundle once scheduled
	owner       *wire.Conn
	ready       chan struct{}
}

type actor struct {
	info  ActorInfo
	owner *wire.Conn
}

// Server is the GCS.
type Server struct {
	opt Options

	mu      sync.Mutex
	nodes   []*node
	pgs     []*pg
	actors  map[string]*actor
	drivers map[*wire.Conn]bool
	jobs    int
}

// NewServer returns a GCS with no nodes.
func NewServer(opt Options) *Server {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if opt.HeartbeatTimeout <= 0 {
		opt.HeartbeatTimeout = 10 * time.Second
	}
	return &Server{opt: opt, actors: map[string]*actor{}, drivers: map[*wire.Conn]bool{}}
}

func (s *Server) logf(level byte, file, format string, args ...any) {
	fmt.Fprintln(s.opt.Log, pylog.RayCpp(s.opt.Now(), level, s.opt.Pid, s.opt.Pid, file, fmt.Sprintf(format, args...)))
}

// Serve accepts connections on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	go s.healthCheck(ctx)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	s.logf('I', "gcs_server.cc:274", "Gcs Server started on %s", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("gcs accept: %w", err)
		}
		wc := wire.New(c)
		go func() {
			_ = wc.Serve(ctx, s.handle)
			s.disconnected(wc)
		}()
	}
}

func (s *Server) healthCheck(ctx context.Context) {
	period := s.opt.HeartbeatTimeout / 4
	if period < 10*time.Millisecond {
		period = 10 * time.Millisecond
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		s.mu.Lock()
		var dead []*node
		for _, n := range s.nodes {
			if n.info.State == Alive && now.Sub(n.lastBeat) > s.opt.HeartbeatTimeout {
				dead = append(dead, n)
			}
		}
		s.mu.Unlock()
		for _, n := range dead {
			s.markDead(n, "Unexpected termination: health check failed due to missing too many heartbeats")
		}
	}
}

func (s *Server) markDead(n *node, msg string) {
	s.mu.Lock()
	if n.info.State == Dead {
		s.mu.Unlock()
		return
	}
	n.info.State = Dead
	n.info.StateMessage = msg
	n.info.EndTimeMs = s.opt.Now().UnixMilli()
	var lost []*actor
	for _, a := range s.actors {
		if a.info.NodeID == n.info.NodeID {
			lost = append(lost, a)
		}
	}
	s.mu.Unlock()
	s.logf('W', "gcs_node_manager.cc:326", "Node %s (%s) is dead: %s", n.info.NodeID, n.info.NodeIP, msg)
	for _, a := range lost {
		s.forward(a.info.ActorID, ActorEvent{ActorID: a.info.ActorID, Kind: EventDied, PID: a.info.PID, NodeIP: a.info.NodeIP,
			ExitType: "NODE_DIED", ExitDetail: fmt.Sprintf("The node with node id: %s and address: %s and node name: %s has been marked dead because the detector has missed too many heartbeats from it.", n.info.NodeID, n.info.NodeIP, n.info.NodeName)})
	}
}

func (s *Server) disconnected(c *wire.Conn) {
	s.mu.Lock()
	var kills []*actor
	if s.drivers[c] {
		delete(s.drivers, c)
		for id, a := range s.actors {
			if a.owner == c {
				kills = append(kills, a)
				delete(s.actors, id)
			}
		}
		kept := s.pgs[:0]
		for _, p := range s.pgs {
			if p.owner != c {
				kept = append(kept, p)
			}
		}
		s.pgs = kept
	}
	s.mu.Unlock()
	for _, a := range kills {
		if rc := s.nodeConn(a.info.NodeID); rc != nil {
			_ = rc.Send("kill_actor", ActorMsg{ActorID: a.info.ActorID})
		}
	}
	// A lost raylet connection is only noticed through missed heartbeats,
	// as in Ray; freed driver resources may let a pending placement group
	// through.
	s.schedule()
}

func (s *Server) nodeConn(id string) *wire.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		if n.info.NodeID == id && n.info.State == Alive {
			return n.conn
		}
	}
	return nil
}

func (s *Server) handle(ctx context.Context, c *wire.Conn, m *wire.Msg) (any, error) {
	switch m.Op {
	case "hello":
		var h Hello
		if err := m.Decode(&h); err != nil {
			return nil, err
		}
		return s.hello(c, &h)
	case "heartbeat":
		var hb Heartbeat
		if err := m.Decode(&hb); err != nil {
			return nil, err
		}
		s.mu.Lock()
		for _, n := range s.nodes {
			if n.info.NodeID == hb.NodeID && n.info.State == Alive {
				n.lastBeat = time.Now()
				n.info.MemUsed, n.info.MemTotal = hb.MemUsed, hb.MemTotal
			}
		}
		s.mu.Unlock()
		return nil, nil
	case "unregister":
		var hb Heartbeat
		if err := m.Decode(&hb); err != nil {
			return nil, err
		}
		s.mu.Lock()
		var n *node
		for _, x := range s.nodes {
			if x.info.NodeID == hb.NodeID {
				n = x
			}
		}
		s.mu.Unlock()
		if n != nil {
			s.markDead(n, "Expected termination: received SIGTERM")
		}
		return struct{}{}, nil
	case "status":
		return s.status(), nil
	case "create_pg":
		var r PGRequest
		if err := m.Decode(&r); err != nil {
			return nil, err
		}
		p := &pg{id: NewID(18), bundles: r.Bundles, strategy: r.Strategy, owner: c, ready: make(chan struct{})}
		s.mu.Lock()
		s.pgs = append(s.pgs, p)
		s.mu.Unlock()
		s.schedule()
		return PGState{ID: p.id}, nil
	case "wait_pg":
		var r PGWait
		if err := m.Decode(&r); err != nil {
			return nil, err
		}
		return s.waitPG(ctx, &r)
	case "create_actor":
		var r ActorRequest
		if err := m.Decode(&r); err != nil {
			return nil, err
		}
		return s.createActor(ctx, c, &r)
	case "actor_msg":
		var r ActorMsg
		if err := m.Decode(&r); err != nil {
			return nil, err
		}
		s.mu.Lock()
		a := s.actors[r.ActorID]
		s.mu.Unlock()
		if a == nil {
			return nil, nil
		}
		if rc := s.nodeConn(a.info.NodeID); rc != nil {
			_ = rc.Send("actor_msg", r)
		}
		return nil, nil
	case "actor_event":
		var ev ActorEvent
		if err := m.Decode(&ev); err != nil {
			return nil, err
		}
		s.forward(ev.ActorID, ev)
		if ev.Kind == EventDied {
			s.mu.Lock()
			delete(s.actors, ev.ActorID)
			s.mu.Unlock()
		}
		return nil, nil
	case "broadcast_log":
		var l LogLine
		if err := m.Decode(&l); err != nil {
			return nil, err
		}
		s.mu.Lock()
		var ds []*wire.Conn
		for d := range s.drivers {
			ds = append(ds, d)
		}
		s.mu.Unlock()
		for _, d := range ds {
			_ = d.Send("log", l)
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unknown op %q", m.Op)
}

func (s *Server) forward(actorID string, ev ActorEvent) {
	s.mu.Lock()
	a := s.actors[actorID]
	s.mu.Unlock()
	if a != nil && a.owner != nil {
		_ = a.owner.Send("actor_event", ev)
	}
}

func (s *Server) hello(c *wire.Conn, h *Hello) (any, error) {
	w := Welcome{SessionName: s.opt.SessionName, RayVersion: RayVersion, ClusterID: s.opt.ClusterID}
	if h.RayVersion != "" && h.RayVersion != RayVersion {
		return nil, fmt.Errorf("Ray version mismatch: cluster has Ray version %s but local Ray version is %s", RayVersion, h.RayVersion)
	}
	switch h.Role {
	case "raylet":
		if h.Node == nil {
			return nil, errors.New("raylet hello without node")
		}
		info := *h.Node
		info.NodeID = NewID(28)
		info.State = Alive
		info.StartTimeMs = s.opt.Now().UnixMilli()
		if info.NodeName == "" {
			info.NodeName = info.NodeIP
		}
		if info.Labels == nil {
			info.Labels = map[string]string{}
		}
		info.Labels["ray.io/node-id"] = info.NodeID
		s.mu.Lock()
		s.nodes = append(s.nodes, &node{info: info, conn: c, lastBeat: time.Now()})
		s.mu.Unlock()
		s.logf('I', "gcs_node_manager.cc:86", "Registering node info, address: %s, node name: %s node_id=%s", info.NodeIP, info.NodeName, info.NodeID)
		w.NodeID = info.NodeID
		s.schedule()
	case "driver":
		s.mu.Lock()
		s.drivers[c] = true
		s.jobs++
		w.JobID = fmt.Sprintf("%02x000000", s.jobs)
		s.mu.Unlock()
	case "client":
	default:
		return nil, fmt.Errorf("unknown role %q", h.Role)
	}
	return w, nil
}

// available returns node resources minus what placement groups hold.
func (s *Server) availableLocked() map[string]map[string]float64 {
	av := map[string]map[string]float64{}
	for _, n := range s.nodes {
		if n.info.State != Alive {
			continue
		}
		m := map[string]float64{}
		for k, v := range n.info.Resources {
			m[k] = v
		}
		av[n.info.NodeID] = m
	}
	for _, p := range s.pgs {
		for i, nid := range p.bundleNodes {
			if m, ok := av[nid]; ok {
				for k, v := range p.bundles[i] {
					m[k] -= v
				}
			}
		}
	}
	return av
}

func fits(av, need map[string]float64) bool {
	for k, v := range need {
		if av[k]+1e-9 < v {
			return false
		}
	}
	return true
}

// schedule places pending placement groups (PACK: as few nodes as possible,
// best effort; STRICT_PACK: one node; SPREAD: round robin).
func (s *Server) schedule() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pgs {
		if p.bundleNodes != nil {
			continue
		}
		av := s.availableLocked()
		var order []string
		for _, n := range s.nodes {
			if n.info.State == Alive {
				order = append(order, n.info.NodeID)
			}
		}
		placed := make([]string, len(p.bundles))
		ok := true
		used := map[string]bool{}
		for i, b := range p.bundles {
			choice := ""
			if p.strategy != "SPREAD" && p.strategy != "STRICT_SPREAD" {
				for _, nid := range order {
					if used[nid] && fits(av[nid], b) {
						choice = nid
						break
					}
				}
			}
			if choice == "" && !(p.strategy == "STRICT_PACK" && len(used) > 0) {
				for _, nid := range order {
					if (p.strategy == "STRICT_SPREAD" && used[nid]) || !fits(av[nid], b) {
						continue
					}
					if p.strategy == "SPREAD" && used[nid] {
						continue
					}
					choice = nid
					break
				}
			}
			if choice == "" && p.strategy == "SPREAD" {
				for _, nid := range order {
					if fits(av[nid], b) {
						choice = nid
						break
					}
				}
			}
			if choice == "" {
				ok = false
				break
			}
			placed[i] = choice
			used[choice] = true
			for k, v := range b {
				av[choice][k] -= v
			}
		}
		if ok {
			p.bundleNodes = placed
			close(p.ready)
		}
	}
}

func (s *Server) waitPG(ctx context.Context, r *PGWait) (*PGState, error) {
	s.mu.Lock()
	var p *pg
	for _, x := range s.pgs {
		if x.id == r.ID {
			p = x
		}
	}
	s.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("placement group %s not found", r.ID)
	}
	t := time.NewTimer(time.Duration(r.TimeoutMs) * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.ready:
	case <-t.C:
		return &PGState{ID: p.id}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &PGState{ID: p.id, Ready: true, BundleNodes: append([]string(nil), p.bundleNodes...)}, nil
}

func (s *Server) createActor(ctx context.Context, owner *wire.Conn, r *ActorRequest) (*ActorInfo, error) {
	s.mu.Lock()
	var p *pg
	for _, x := range s.pgs {
		if x.id == r.PG {
			p = x
		}
	}
	if p == nil || p.bundleNodes == nil || r.BundleIndex >= len(p.bundleNodes) {
		s.mu.Unlock()
		return nil, fmt.Errorf("placement group %s bundle %d is not scheduled", r.PG, r.BundleIndex)
	}
	nid := p.bundleNodes[r.BundleIndex]
	var n *node
	for _, x := range s.nodes {
		if x.info.NodeID == nid {
			n = x
		}
	}
	job := "01000000"
	s.mu.Unlock()
	if n == nil || n.info.State != Alive {
		return nil, fmt.Errorf("node %s is dead", nid)
	}
	id := NewID(16)
	a := &actor{owner: owner, info: ActorInfo{ActorID: id, NodeID: nid, NodeIP: n.info.NodeIP}}
	s.mu.Lock()
	s.actors[id] = a
	s.mu.Unlock()
	var rep SpawnReply
	if err := n.conn.Call(ctx, "spawn_actor", SpawnRequest{ActorID: id, ClassName: r.ClassName, JobID: job, Env: r.Env, Args: r.Args, Spec: r.Spec}, &rep); err != nil {
		s.mu.Lock()
		delete(s.actors, id)
		s.mu.Unlock()
		return nil, fmt.Errorf("spawn actor on %s: %w", n.info.NodeIP, err)
	}
	s.mu.Lock()
	a.info.PID, a.info.WorkerID = rep.PID, rep.WorkerID
	info := a.info
	s.mu.Unlock()
	return &info, nil
}

func (s *Server) status() *Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	av := s.availableLocked()
	st := &Status{SessionName: s.opt.SessionName, RayVersion: RayVersion}
	for _, n := range s.nodes {
		info := n.info
		info.Available = av[info.NodeID]
		st.Nodes = append(st.Nodes, info)
	}
	for _, p := range s.pgs {
		if p.bundleNodes == nil {
			st.PendingPGs = append(st.PendingPGs, PGPending{ID: p.id, Bundles: p.bundles, Strategy: p.strategy})
		}
	}
	return st
}

// Nodes returns a snapshot of the node table (for in-process callers such as
// the dashboard).
func (s *Server) Nodes() []NodeInfo { return s.status().Nodes }

// Status returns a snapshot of the cluster.
func (s *Server) Status() *Status { return s.status() }

// SortNodes orders nodes head first, then by start time, as Ray lists them.
func SortNodes(ns []NodeInfo) {
	sort.SliceStable(ns, func(i, j int) bool {
		if ns[i].IsHead != ns[j].IsHead {
			return ns[i].IsHead
		}
		if ns[i].StartTimeMs != ns[j].StartTimeMs {
			return ns[i].StartTimeMs < ns[j].StartTimeMs
		}
		return strings.Compare(ns[i].NodeID, ns[j].NodeID) < 0
	})
}
