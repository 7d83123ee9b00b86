//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// errHelp is returned by parseOptions after printing the usage.
var errHelp = errors.New("help requested")

// Case names, in the order a repetition runs them.
const (
	caseSSHTrue      = "ssh-true"
	caseFloor        = "floor"
	casePlan         = "plan"
	caseAnsibleSetup = "ansible-setup"
	caseAnsibleCheck = "ansible-check"
	caseApplyNoop    = "apply-noop"
	caseApplyE2E     = "apply-e2e"
)

// allCases lists every case rfbench knows, in table order.
func allCases() []string {
	return []string{caseSSHTrue, caseFloor, casePlan, caseAnsibleSetup, caseAnsibleCheck, caseApplyNoop, caseApplyE2E}
}

// options are rfbench's flags.
type options struct {
	nodes    []int
	delays   []time.Duration
	reps     int
	e2eReps  int
	slowReps int
	warmup   int
	cases    []string
	rayform  string
	rflab    string
	simnode  string
	workDir  string
	out      string
	labName  string
	keep     bool
	timeout  time.Duration
	planPar  int
	timing   map[string]time.Duration
	micro    bool
	verbose  bool
	ansibleF bool
	forEach  bool
}

// defaultTiming is the simulator's model-load timing used for the labs: short
// enough that an end-to-end apply of 32 nodes fits the run, long enough to
// be seen. The sum is subtracted from end-to-end apply.
func defaultTiming() map[string]time.Duration {
	return map[string]time.Duration{
		"engine_init":   500 * time.Millisecond,
		"weight_load":   2 * time.Second,
		"profile_run":   500 * time.Millisecond,
		"graph_capture": 1 * time.Second,
	}
}

// parseOptions parses the command line.
func parseOptions(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("rfbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{timing: defaultTiming()}
	nodes := fs.String("nodes", "2,8,32", "comma-separated node `COUNTS` (1-64), one lab each")
	delays := fs.String("delays", "0,20ms", "comma-separated management `DELAYS` added by the lab, one lab each")
	fs.IntVar(&o.reps, "reps", 5, "measured repetitions of every case (interleaved); medians are reported")
	fs.IntVar(&o.e2eReps, "e2e-reps", 2, "repetitions of the end-to-end apply (destroy, then apply from nothing)")
	fs.IntVar(&o.slowReps, "ansible-reps", 3, "run the Ansible cases in only the first `N` measured rounds (0: every round); a --check run takes ~50 s at N = 32")
	fs.IntVar(&o.warmup, "warmup", 1, "unmeasured rounds before the measured ones")
	cases := fs.String("cases", strings.Join(allCases(), ","), "comma-separated `CASES` to run: "+strings.Join(allCases(), ", "))
	fs.StringVar(&o.rayform, "rayform", "bin/rayform", "rayform binary `PATH` (make build)")
	fs.StringVar(&o.rflab, "rflab", "", "rflab binary `PATH`, the lab's command (default: rflab next to -rayform)")
	fs.StringVar(&o.simnode, "simnode", "", "simnode binary `PATH` (default: simnode next to -rayform)")
	fs.StringVar(&o.workDir, "workdir", "/tmp/rfbench", "`DIR` for the generated configurations, inventories and logs")
	fs.StringVar(&o.out, "out", "", "also write the markdown table to `FILE`")
	fs.StringVar(&o.labName, "lab", "rfbench", "lab name `PREFIX` (the lab of N nodes and delay D is PREFIX-N-D)")
	fs.BoolVar(&o.keep, "keep", false, "leave the last lab up")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on any one measured command")
	fs.IntVar(&o.planPar, "plan-parallelism", 0, "pass -parallelism `N` to rayform plan and apply (0: rayform's default)")
	fs.BoolVar(&o.micro, "micro", false, "also run the Go micro-benchmarks (go test -bench) and print them")
	fs.BoolVar(&o.verbose, "v", false, "print every measured command and its time")
	fs.BoolVar(&o.ansibleF, "ansible", true, "run the Ansible cases (needs Debian's ansible package)")
	fs.BoolVar(&o.forEach, "for-each", false, "declare the nodes with one for_each block instead of one block per node")
	var timing stringList
	fs.Var(&timing, "timing", "simnode timing override `KEY=DURATION` (repeatable; model-load keys are subtracted from end-to-end apply)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: rfbench [flags]\n\nMeasure rayform plan/apply against the OpenSSH floor and Ansible on the lab (root).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.nodes, err = parseInts(*nodes); err != nil {
		return nil, fmt.Errorf("-nodes: %w", err)
	}
	for _, n := range o.nodes {
		if n < 1 || n > 64 {
			return nil, fmt.Errorf("-nodes: %d is outside 1-64", n)
		}
	}
	if o.delays, err = parseDurations(*delays); err != nil {
		return nil, fmt.Errorf("-delays: %w", err)
	}
	for _, c := range splitList(*cases) {
		if !slices.Contains(allCases(), c) {
			return nil, fmt.Errorf("-cases: unknown case %q (known: %s)", c, strings.Join(allCases(), ", "))
		}
		o.cases = append(o.cases, c)
	}
	if !o.ansibleF {
		o.cases = slices.DeleteFunc(o.cases, func(c string) bool { return c == caseAnsibleSetup || c == caseAnsibleCheck })
	}
	for _, kv := range timing {
		k, v, ok := strings.Cut(kv, "=")
		d, perr := time.ParseDuration(v)
		if !ok || perr != nil {
			return nil, fmt.Errorf("-timing %q: want KEY=DURATION", kv)
		}
		o.timing[k] = d
	}
	if o.reps < 1 {
		return nil, errors.New("-reps must be at least 1")
	}
	if o.rayform, err = resolveBinary(o.rayform); err != nil {
		return nil, fmt.Errorf("-rayform: %w", err)
	}
	if o.rflab == "" {
		o.rflab = filepath.Join(filepath.Dir(o.rayform), "rflab")
	}
	if o.rflab, err = resolveBinary(o.rflab); err != nil {
		return nil, fmt.Errorf("-rflab: %w", err)
	}
	if o.simnode == "" {
		o.simnode = filepath.Join(filepath.Dir(o.rayform), "simnode")
	}
	if o.simnode, err = resolveBinary(o.simnode); err != nil {
		return nil, fmt.Errorf("-simnode: %w", err)
	}
	return o, nil
}

// has reports whether case c is selected.
func (o *options) has(c string) bool { return slices.Contains(o.cases, c) }

// resolveBinary makes p absolute (the commands run with -chdir elsewhere).
func resolveBinary(p string) (string, error) {
	if !strings.Contains(p, "/") {
		return exec.LookPath(p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath(abs); err != nil {
		return "", fmt.Errorf("%s: %w (run make build)", abs, err)
	}
	return abs, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range splitList(s) {
		if f == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
