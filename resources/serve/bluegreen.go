package serve

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/cluster"
)

// Blue/green replacement of a serve on one cluster: when Ray's free GPUs
// (the budget's judgment, placeServes on what Ray reports free with the
// running serves kept) hold the new serve beside the old one, apply
// starts the new generation first on a loopback port of its own, proves
// it (the start's /health and /v1/models checks), points the serve's
// front (front.go) at it, stops the old generation, and makes the new
// one the serve (its pid, record, lock and log take the serve's names).
// Clients keep one endpoint, the serve's port, and no connection is
// refused. When the GPUs do not hold both, or anything else of the
// cluster changes in the same plan, it is stop-then-start as before
// (plan says which, and the downtime to expect).
//
// A new generation that fails to start is stopped; the old one never
// stopped serving (nothing to put back). An interrupted switch leaves a
// state the next plan replaces: the old process alive (blue/green
// again, after the leftover new generation is stopped), or the record's
// process dead (stop-then-start, whose stopFrontStep also stops the
// front and the leftover generation).

// nextSuffix names the new generation's files while both run: a name no
// vllm_serve can have (HCL labels of rayform's blocks are identifiers).
const nextSuffix = ".next"

// nextSpec is the new generation of s while the old one serves: its own
// files (Name + nextSuffix), vLLM on 127.0.0.1:port, and the record of s
// (its hash), so that once promoted it is s as plan sees it.
func (s ServeSpec) nextSpec(port int) ServeSpec {
	n := s.generationSpec(port)
	n.Name = s.Name + nextSuffix
	return n
}

// generationSpec is s as a generation behind its front runs it: vLLM on
// 127.0.0.1:port, with the record of s (its hash) and its files.
func (s ServeSpec) generationSpec(port int) ServeSpec {
	n := s
	n.Port = port
	n.recordAs = s.Hash()
	n.Args = slices.Clone(s.Args)
	for i := 0; i+1 < len(n.Args); i++ {
		switch n.Args[i] {
		case "--host":
			n.Args[i+1] = "127.0.0.1"
		case "--port":
			n.Args[i+1] = strconv.Itoa(port)
		}
	}
	return n
}

// recordHash is the hash the serve's record holds: its own, or the
// serve's whose next generation it is.
func (s ServeSpec) recordHash() string {
	if s.recordAs != "" {
		return s.recordAs
	}
	return s.Hash()
}

// blueGreenReason is plan's line for a serve replaced blue/green.
func blueGreenReason(nodes []gpuNode) string {
	var free []string
	for _, n := range nodes {
		free = append(free, fmt.Sprintf("%s %d of %d", n.Name, n.Free, n.Total))
	}
	return fmt.Sprintf("blue/green: no downtime: Ray's free GPUs (%s) hold the new serve beside the running one, so apply starts it on a loopback port, switches the endpoint to it once it answers, then stops this one (if it fails, this one keeps serving)", strings.Join(free, ", "))
}

// blueGreen reports whether sv, planned as a replacement of its running
// process, can be replaced blue/green on rc, and the nodes as Ray reports
// them free: the cluster stays, every other serve of it runs current (no
// other start competes for the GPUs), Ray's report is read, it holds sv
// with the running serves kept, and on unified memory the memory holds
// both generations too (unifiedRoom).
func (p *planner) blueGreen(sv *VLLMServe, rc *cluster.RayCluster) ([]gpuNode, bool) {
	if len(rc.Workers) == 0 {
		return nil, false // one node: vLLM without Ray (deviceBudget)
	}
	if a, _ := p.Planned(rc.Addr); a != plan.NoOp {
		return nil, false
	}
	head := p.Host(rc.Head)
	if head == nil {
		return nil, false
	}
	var kept []*VLLMServe
	for _, o := range sortedServes(p.cfg) {
		if o.Cluster != rc.Name {
			continue
		}
		rec := ServeRecord(head, o.Name)
		if !rec.Found || !rec.Alive {
			return nil, false
		}
		if o != sv {
			spec, err := ServeSpecFor(p.cfg, o)
			if err != nil || !serveCurrent(spec, rec.SpecHash) || p.Replace(o.Addr) {
				return nil, false
			}
		}
		kept = append(kept, o)
	}
	version := ""
	if _, known, ok := p.imageAnswer(rc, head); ok {
		version = answerOf(known).VLLM
	}
	headGPU := func(s *VLLMServe) bool { return needsHeadGPU(s, rc, version) }
	nodes, source := p.freeGPUs(rc, kept, nil, headGPU)
	if source != "ray" {
		return nil, false
	}
	v := placeServes(nodes, []*VLLMServe{sv}, headGPU)
	if v.Failed != nil || !p.unifiedRoom(rc, nodes, v.Order[0], kept) {
		return nil, false
	}
	return nodes, true
}

// blueGreenSteps replace the serve blue/green: the read-only checks, the
// new generation started and proven beside the running one (a leftover
// one stopped first), the switch, and the completion test through the
// endpoint.
func blueGreenSteps(r *serveRun) []apply.Step {
	var steps []apply.Step
	if r.s.Model != nil {
		steps = append(steps, newModelCheckStep(r))
	}
	if r.s.Arch != nil || r.s.Model != nil {
		steps = append(steps, newArchStep(r))
	}
	g := &greenRun{r: r}
	return append(steps, &greenStartStep{g}, &switchStep{g}, newCompletionStep(r))
}

// greenRun is the new generation of a blue/green replacement, shared by
// its start and switch steps.
type greenRun struct {
	r    *serveRun
	next *serveRun
	// l is how the new generation's start went; loaded how long it took.
	l      launch
	loaded time.Duration
	// stopStart is set when the head container cannot run the front: the
	// start step replaced the serve stop-then-start.
	stopStart bool
}

// frontTakeOver bounds the front's take-over of the port at a serve's
// first switch: up to 10 s of the old serve's connections draining
// (frontPy), and the start of python3.
const frontTakeOver = 30 * time.Second

// freePortScript prints a free loopback port of the head container.
const freePortScript = `python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'`

// nextStopScript stops the new generation of s (its pid file under the
// next name) and removes its pid, record and lock.
func nextStopScript(s ServeSpec) string {
	n := s.nextSpec(0)
	return stopPidScript(n.pidPath(), 30, n.specPath(), n.lockPath())
}

// promoteScript makes the new generation the serve: the old log kept as
// the previous one, the new one's log, record, lock and pid renamed to
// the serve's names (the pid last: until then the record's process is
// the old one, which is stopped).
func promoteScript(s ServeSpec) string {
	n := s.nextSpec(0)
	mv := func(from, to string) string { return fmt.Sprintf("mv -f %s %s", shell.Quote(from), shell.Quote(to)) }
	return strings.Join([]string{
		fmt.Sprintf("if [ -s %[1]s ]; then mv -f %[1]s %[2]s; fi", shell.Quote(s.LogPath()), shell.Quote(s.PreviousLogPath())),
		mv(n.LogPath(), s.LogPath()),
		mv(n.specPath(), s.specPath()),
		fmt.Sprintf("{ [ ! -f %s ] || %s; }", shell.Quote(n.lockPath()), mv(n.lockPath(), s.lockPath())),
		mv(n.pidPath(), s.pidPath()),
	}, " && ")
}
