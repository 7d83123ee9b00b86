//go:build linux

package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Delay and loss on the management links. This kernel has no netem qdisc,
// so a node's management egress goes through iptables in the node's
// namespace: `-m statistic --mode random` drops a share of the packets and
// `-j NFQUEUE --queue-bypass` hands the rest to a queue that the lab's
// supervisor (see nfqueue.go) holds for the delay before accepting them.
// The delay is one way (node → client), so a round trip from the client
// grows by the delay, as with netem on the node's interface.

const delayQueueNum = 0

// delayQueues are the NFQUEUE handlers a supervisor runs, by id.
type delayQueues struct {
	mu     sync.Mutex
	queues map[string]*nfQueue
}

func newDelayQueues() *delayQueues { return &delayQueues{queues: map[string]*nfQueue{}} }

func (d *delayQueues) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, q := range d.queues {
		q.close()
		delete(d.queues, id)
	}
}

// status reports the queues as processes of the supervisor.
func (d *delayQueues) status() []ProcStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []ProcStatus
	for id, q := range d.queues {
		ok, why := q.alive()
		st := ProcStatus{ID: id, PID: os.Getpid(), Running: ok, Exit: why}
		st.Exit = strings.TrimSpace(st.Exit + " " + strconv.FormatUint(q.packets.Load(), 10) + " packets delayed")
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// delayRequest asks the supervisor to delay a namespace's queued packets.
type delayRequest struct {
	ID    string        `json:"id"`
	Netns string        `json:"netns"` // path
	Queue uint16        `json:"queue"`
	Delay time.Duration `json:"delay"`
}

func (s *supervisor) handleDelay(w http.ResponseWriter, r *http.Request) {
	var req delayRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "decode delay request: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.delays.mu.Lock()
	defer s.delays.mu.Unlock()
	if old := s.delays.queues[req.ID]; old != nil {
		if ok, _ := old.alive(); ok && old.delay == req.Delay {
			writeJSON(w, map[string]string{"id": req.ID})
			return
		}
		old.close()
	}
	q, err := openNFQueue(req.Netns, req.Queue, req.Delay)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.delays.queues[req.ID] = q
	writeJSON(w, map[string]string{"id": req.ID})
}

// impairRules renders the iptables-restore input for a node.
func impairRules(n Node, delay time.Duration, loss float64) string {
	var b strings.Builder
	b.WriteString("*filter\n")
	if loss > 0 {
		fmt.Fprintf(&b, "-A OUTPUT -o %s -m statistic --mode random --probability %.6f -j DROP\n", n.MgmtIfname, loss/100)
	}
	if delay > 0 {
		fmt.Fprintf(&b, "-A OUTPUT -o %s -j NFQUEUE --queue-num %d --queue-bypass\n", n.MgmtIfname, delayQueueNum)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// applyImpairments installs the loss and delay rules on every node and
// starts the delay queues in the supervisor.
func (l *Lab) applyImpairments(ctx context.Context, sup *supClient, t tools) error {
	for _, n := range l.Nodes {
		if l.Delay > 0 {
			req := delayRequest{ID: nodeProcID(n.Name, "delay"), Netns: n.NetnsPath(), Queue: delayQueueNum, Delay: l.Delay}
			if err := sup.call(ctx, http.MethodPost, "/delay", req, nil); err != nil {
				return fmt.Errorf("delay queue of %s: %w", n.Name, err)
			}
		}
		if _, err := run(ctx, impairRules(n, l.Delay, l.Loss), t.ip, "netns", "exec", n.Netns, t.iptablesRestore, "--noflush"); err != nil {
			return fmt.Errorf("impairment rules of %s: %w", n.Name, err)
		}
	}
	return nil
}
