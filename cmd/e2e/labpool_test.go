//go:build linux

package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rayform/rayform/cmd/rflab/labslots"
)

// defaultLabSlots is how many labs this package's lab tests keep up at once
// unless RAYFORM_E2E_LABS says otherwise: what a 2-core, 24 GB machine
// carries with cmd/rflab/lab's tests running beside this package (go test
// runs packages side by side).
const defaultLabSlots = 4

// labPool limits the labs that are up at once (acquireLab).
var labPool *labslots.Pool

// acquireLab makes the test a parallel test with a lab slot: it queues the
// test with its lab's weight (heavy: a real-Ray lab, which counts against
// the pool's heavy share too; a real-vLLM lab takes the whole heavy
// share, so that only simnode's Ray runs beside it), calls t.Parallel,
// builds the binaries every lab test runs (once per process), opens the
// queue and waits for the
// slot, and returns the binaries' directory. The slot is given back in the
// test's cleanup, after the lab's own (register that after this).
//
// The test joins the queue before t.Parallel: go test resumes the parallel
// tests only once every top-level test has run up to its t.Parallel, so
// every lab test is in the queue before the first slot is granted, and the
// heaviest go first.
func acquireLab(t *testing.T, args []string) string {
	t.Helper()
	var tk *labslots.Ticket
	if realVLLMLab(args) {
		tk = labPool.JoinHeavyShare(t, labWeight(args))
	} else {
		tk = labPool.Join(t, labWeight(args), heavyLab(args))
	}
	labslots.Parallel(t) // t.Parallel, unless the test called it itself
	bin := buildLabBinaries(t)
	labPool.Open()
	tk.Wait()
	return bin
}

// heavyLab reports whether a lab with these `lab up` arguments (labRay's)
// runs the real Ray: CPU-bound, so only the pool's heavy share of them run
// at once.
func heavyLab(args []string) bool {
	for i, a := range args {
		if a == "-ray" && i+1 < len(args) && args[i+1] == "real" {
			return true
		}
	}
	return false
}

// realVLLMLab reports whether a lab with these `rflab up` arguments runs
// the real vLLM: besides Ray, its nodes run vLLM's API server, engine core
// and a Ray worker per node, each importing torch and vLLM (about 0.85 GB
// each; serving, the head's container held 3.0 GiB and the worker's 1.2
// GiB, a real-Ray lab's about 2.1 GB together), and each node's dockerd
// first unpacks the 4.7 GiB image: on a 2-core machine it takes the pool's
// whole heavy share (JoinHeavyShare), so no real-Ray lab of the package
// runs beside it; light labs (simnode's Ray, mostly waiting) use the slots
// left (2 of the default 4) rather than wait the 6 minutes it runs.
func realVLLMLab(args []string) bool {
	for i, a := range args {
		if a == "-vllm" && i+1 < len(args) && args[i+1] == "real" {
			return true
		}
	}
	return false
}

// labWeight ranks a lab by how long its test tends to run, from its `lab
// up` arguments (labRay's), so that the longest tests start first: the
// real vLLM counts most (it runs alone, and first: it is the longest), then
// the real Ray (its start and every ray CLI call are Python processes) and a
// delayed management network (every SSH round trip waits),
// then the torch image and clusters of 3 or more nodes.
func labWeight(args []string) int {
	w := 0
	for i, a := range args {
		switch {
		case a == "-ray" && i+1 < len(args) && args[i+1] == "real":
			w += 2
		case a == "-delay":
			w += 2
		case a == "-vllm" && i+1 < len(args) && args[i+1] == "real":
			w += 10
		case a == "-torch":
			w++
		case a == "-nodes" && i+1 < len(args):
			if n, err := strconv.Atoi(args[i+1]); err == nil && n >= 3 {
				w++
			}
		}
	}
	return w
}

// TestMain runs the lab tests side by side, at most labPool's size at once
// (see startLab), and removes the binaries they built.
func TestMain(m *testing.M) {
	labslots.Main(m, defaultLabSlots, &labPool, func() {
		if labBins.dir != "" {
			os.RemoveAll(labBins.dir)
		}
	})
}

func TestLabWeight(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"-ray", "simnode"}, 0},
		{[]string{"-nodes", "2", "-ray", "simnode"}, 0},
		{[]string{"-torch", "-ray", "simnode"}, 1},
		{[]string{"-nodes", "12", "-ray", "simnode"}, 1},
		{[]string{"-ray", "real"}, 2},
		{[]string{"-nodes", "3", "-set", "spark2.fabric-ifname=x", "-ray", "real"}, 3},
		{[]string{"-delay", "500ms", "-ray", "simnode"}, 2},
		{[]string{"-vllm", "real", "-ray", "real"}, 12},
	}
	for _, tt := range tests {
		if got := labWeight(tt.args); got != tt.want {
			t.Errorf("labWeight(%q) = %d, want %d", tt.args, got, tt.want)
		}
		if got, want := heavyLab(tt.args), strings.Contains(strings.Join(tt.args, " "), "-ray real"); got != want {
			t.Errorf("heavyLab(%q) = %v, want %v", tt.args, got, want)
		}
		if got, want := realVLLMLab(tt.args), strings.Contains(strings.Join(tt.args, " "), "-vllm real"); got != want {
			t.Errorf("realVLLMLab(%q) = %v, want %v", tt.args, got, want)
		}
	}
}
