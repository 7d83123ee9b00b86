//go:build linux

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// shape is one lab: N nodes with a management delay.
type shape struct {
	nodes int
	delay time.Duration
}

func (s shape) String() string { return fmt.Sprintf("N=%d, delay %s", s.nodes, fmtDelay(s.delay)) }

// result is every sample of one case on one shape.
type result struct {
	shape   shape
	name    string
	samples []sample
	// note replaces the figures when the case did not run ("pending: ...").
	note string
	// subtracted is the simulator's model-load time taken off each sample
	// (end-to-end apply), already applied to the samples' wall times.
	subtracted time.Duration
}

// median is the median wall time (the mean of the middle two for an even
// count).
func (r *result) median() time.Duration {
	if len(r.samples) == 0 {
		return 0
	}
	ws := make([]time.Duration, len(r.samples))
	for i, s := range r.samples {
		ws[i] = s.wall
	}
	slices.Sort(ws)
	m := len(ws) / 2
	if len(ws)%2 == 0 {
		return (ws[m-1] + ws[m]) / 2
	}
	return ws[m]
}

// spread is the fastest and slowest sample.
func (r *result) spread() (lo, hi time.Duration) {
	for i, s := range r.samples {
		if i == 0 || s.wall < lo {
			lo = s.wall
		}
		if s.wall > hi {
			hi = s.wall
		}
	}
	return lo, hi
}

// peakRSS is the largest Maxrss over the samples.
func (r *result) peakRSS() int64 {
	var m int64
	for _, s := range r.samples {
		m = max(m, s.maxRSS)
	}
	return m
}

// perHost is the largest connections and round trips per host seen, or -1.
func (r *result) perHost() (conns, rts int) {
	conns, rts = -1, -1
	for _, s := range r.samples {
		conns = max(conns, s.conns)
		rts = max(rts, s.rts)
	}
	return conns, rts
}

// caseLabels are the table's names of the cases.
var caseLabels = map[string]string{
	caseSSHTrue:      "OpenSSH, `true` per host",
	caseFloor:        "floor: OpenSSH, probe per host",
	casePlan:         "rayform plan (no changes)",
	caseAnsibleSetup: "ansible all -m setup",
	caseAnsibleCheck: "ansible-playbook --check",
	caseApplyNoop:    "rayform apply (no-op)",
	caseApplyE2E:     "rayform apply from nothing − sim load",
}

// writeTable renders the results as one markdown table. Ratios are against
// the floor and against `ansible -m setup` of the same shape.
func writeTable(w io.Writer, results []*result) {
	fmt.Fprintln(w, "| N | delay | case | median | min – max | × floor | setup ÷ case | conn/host | RT/host | peak RSS |")
	fmt.Fprintln(w, "|--:|------:|------|-------:|----------:|--------:|-------------:|----------:|--------:|---------:|")
	find := func(sh shape, name string) *result {
		for _, r := range results {
			if r.shape == sh && r.name == name && len(r.samples) > 0 {
				return r
			}
		}
		return nil
	}
	for _, r := range results {
		head := fmt.Sprintf("| %d | %s | %s |", r.shape.nodes, fmtDelay(r.shape.delay), caseLabels[r.name])
		if len(r.samples) == 0 {
			fmt.Fprintf(w, "%s %s | | | | | | |\n", head, r.note)
			continue
		}
		lo, hi := r.spread()
		med := r.median()
		vsFloor, vsSetup := "", ""
		if f := find(r.shape, caseFloor); f != nil && r.name != caseFloor {
			vsFloor = fmt.Sprintf("%.2f×", ratio(med, f.median()))
		}
		if a := find(r.shape, caseAnsibleSetup); a != nil && r.name != caseAnsibleSetup {
			vsSetup = fmt.Sprintf("%.1f×", ratio(a.median(), med))
		}
		conns, rts := r.perHost()
		rss := ""
		if strings.HasPrefix(r.name, "plan") || strings.HasPrefix(r.name, "apply") {
			rss = fmt.Sprintf("%.1f MB", float64(r.peakRSS())/1e6)
		}
		fmt.Fprintf(w, "%s %s | %s – %s | %s | %s | %s | %s | %s |\n", head, fmtDur(med), fmtDur(lo), fmtDur(hi),
			vsFloor, vsSetup, fmtCount(conns), fmtCount(rts), rss)
	}
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func fmtCount(n int) string {
	if n < 0 {
		return "—"
	}
	return fmt.Sprint(n)
}

// fmtDur prints milliseconds below 10 s and seconds above.
func fmtDur(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func fmtDelay(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}
