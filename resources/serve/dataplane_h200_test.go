package serve

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/stepenv"
)

// h200Dir holds what check.py printed on a real NVIDIA H200 (torch
// 2.11.0+cu130, NCCL 2.28.9), one rank per network namespace, the two joined
// by a veth fabric (enp1s0f1np1, 192.168.200.12/.13) beside a management veth
// from which the head's 10.1.230.180 is not routed. run.sh there is the
// command that made them; README.md says what each case is.
const h200Dir = "../../testdata/dataplane/h200"

// h200Report builds the report the runner would have built from a case's
// captured output: each rank's stdout then stderr, its result line parsed.
func h200Report(t *testing.T, name string) *dataplane.Report {
	t.Helper()
	rep := &dataplane.Report{Master: netip.MustParseAddr("192.168.200.12"), Port: 29417}
	for i, node := range []string{"gx1", "gx2"} {
		out, err := os.ReadFile(filepath.Join(h200Dir, name, node+".out"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		stderr, err := os.ReadFile(filepath.Join(h200Dir, name, node+".err"))
		if err != nil {
			t.Fatal(err)
		}
		nr := dataplane.NodeReport{Node: node, Addr: netip.MustParseAddr([]string{"192.168.200.12", "192.168.200.13"}[i]),
			Iface: "enp1s0f1np1", Output: append(out, stderr...)}
		if nr.Result, err = dataplane.ParseResult(out); err != nil {
			t.Fatalf("%s/%s: %v", name, node, err)
		}
		rep.Nodes = append(rep.Nodes, nr)
	}
	if len(rep.Nodes) == 0 {
		t.Fatalf("case %s has no captured rank", name)
	}
	return rep
}

var h200Context = diagnose.Context{
	FabricCIDR:      netip.MustParsePrefix("192.168.200.0/24"),
	FabricInterface: "enp1s0f1np1",
	NodeAddrs:       map[string]string{"gx1": "192.168.200.12", "gx2": "192.168.200.13"},
	MgmtAddrs:       map[string]string{"gx1": "10.1.230.180", "gx2": "10.1.231.181"},
	HeadNode:        "gx1",
	Cluster:         "ray_cluster.main",
	Network:         "network.fabric",
}

// TestH200CapturesPass: the good cases on the GPU report the fabric
// interface for every backend that ran, and a bandwidth figure.
func TestH200CapturesPass(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend string
		want    []string // in the table
	}{
		{"good-gloo-2ranks", "gloo", []string{"enp1s0f1np1", "192.168.200.12", "192.168.200.13", "GB/s"}},
		{"good-nccl-1rank", "nccl", []string{"enp1s0f1np1", "192.168.200.12"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := h200Report(t, tc.name)
			if !rep.OK() {
				t.Fatalf("problems: %+v", rep.Problems())
			}
			for _, n := range rep.Nodes {
				b := n.Result.Backends[tc.backend]
				if b == nil || !b.OK || b.Iface != "enp1s0f1np1" || b.Addr != n.Addr.String() {
					t.Errorf("%s: %s backend = %+v, want ok on enp1s0f1np1 %s", n.Node, tc.backend, b, n.Addr)
				}
			}
			table := rep.Table()
			t.Log("\n" + table)
			for _, w := range tc.want {
				if !strings.Contains(table, w) {
					t.Errorf("table lacks %q:\n%s", w, table)
				}
			}
		})
	}
}

// TestH200CapturesDiagnosed: the failures captured on the GPU are stopped
// and named by the same path apply takes (CheckError → diagnose.Classify).
func TestH200CapturesDiagnosed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause diagnose.Cause
		want  []string // in the error text
	}{
		// NCCL_SOCKET_IFNAME names an interface that does not exist: NCCL's
		// bootstrap on rank 0 finds no socket interface, rank 1 loses it.
		{"bad-nccl-ifname", diagnose.NCCLInterface, []string{"NCCL_SOCKET_IFNAME=enp9s0", "no socket interface found", "enp1s0f1np1"}},
		// Rank 1 is told a master address it has no route to.
		{"unreachable-master", diagnose.C10dUnreachable, []string{"10.1.230.180", "Network is unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := h200Report(t, tc.name)
			if rep.OK() {
				t.Fatal("report OK, want a failure")
			}
			err := CheckError(rep, h200Context, "vllm serve was not started")
			var de *stepenv.DiagnosedError
			if !errors.As(err, &de) {
				t.Fatalf("CheckError = %v, want a diagnosis", err)
			}
			if de.Diagnosis.Cause != tc.cause {
				t.Fatalf("cause = %q, want %q\n%s", de.Diagnosis.Cause, tc.cause, err)
			}
			text := err.Error()
			t.Log(text)
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("error lacks %q:\n%s", w, text)
				}
			}
			if strings.Contains(text, "frame #") {
				t.Errorf("the error quotes torch's C++ stack:\n%s", text)
			}
			for _, ev := range de.Diagnosis.Evidence {
				if strings.HasPrefix(strings.TrimSpace(ev.Line), "frame #") {
					t.Errorf("a stack frame is evidence: %q", ev.Line)
				}
			}
		})
	}
}

// TestH200TwoRanksOnOneGPU: the one-GPU machine cannot run NCCL across two
// ranks; NCCL's own refusal is reported as the failure, not swallowed.
func TestH200TwoRanksOnOneGPU(t *testing.T) {
	rep := h200Report(t, "nccl-2ranks-one-gpu")
	if rep.OK() {
		t.Fatal("report OK, want NCCL's duplicate-GPU failure")
	}
	var text []string
	for _, p := range rep.Problems() {
		text = append(text, p.Text)
	}
	if got := strings.Join(text, "\n"); !strings.Contains(got, "Duplicate GPU detected") {
		t.Errorf("problems do not quote NCCL's refusal:\n%s", got)
	}
	for _, n := range rep.Nodes {
		if g := n.Result.Backends["gloo"]; g == nil || !g.OK || g.Iface != "enp1s0f1np1" {
			t.Errorf("%s: gloo = %+v, want ok on the fabric before NCCL failed", n.Node, g)
		}
	}
}
