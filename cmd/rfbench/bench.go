//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
	"github.com/rayform/rayform/resources/servefiles"
)

// bench is one rfbench run.
type bench struct {
	opts           *options
	stdout, stderr io.Writer
	self           string // this executable, for the internal helpers
	hasApply       bool   // rayform has apply and destroy
	results        []*result
	// notes describe the machine and the setup, printed above the table.
	notes []string
}

// describeMachine notes the cores, the kernel and the versions measured.
func (b *bench) describeMachine(ctx context.Context) {
	b.notes = append(b.notes,
		fmt.Sprintf("machine: %d cores (shared by every simulated host, the client and the daemons), kernel %s", runtime.NumCPU(), firstLine(ctx, "uname", "-r")),
		fmt.Sprintf("%s; OpenSSH client %s", firstLine(ctx, b.opts.rayform, "version"), firstLine(ctx, "ssh", "-V")))
	if b.opts.ansibleF && b.hasAnsibleCase() {
		b.notes = append(b.notes, firstLine(ctx, "ansible", "--version")+" (Debian), Ansible's defaults but forks = N")
	}
	if b.opts.has(caseApplyE2E) {
		var parts []string
		for _, k := range []string{"engine_init", "weight_load", "profile_run", "graph_capture"} {
			parts = append(parts, fmt.Sprintf("%s %s", k, b.opts.timing[k]))
		}
		b.notes = append(b.notes, fmt.Sprintf("apply from nothing: the simulator's model load (%s = %s) is subtracted", strings.Join(parts, " + "), b.simLoad()))
	}
}

// firstLine is the first line a command prints on stdout or stderr.
func firstLine(ctx context.Context, argv ...string) string {
	p, err := measure(ctx, 30*time.Second, argv...)
	if err != nil {
		return "?"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(append(p.stdout, p.stderr...))), "\n")
	return line
}

// run measures every shape and prints the table.
func (b *bench) run(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("the lab needs root")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own executable: %w", err)
	}
	b.self = self
	if b.hasAnsibleCase() {
		if _, err := exec.LookPath("ansible"); err != nil {
			b.logf("ansible is not installed (apt-get install -y ansible): skipping the Ansible cases")
			b.opts.ansibleF = false
		}
	}
	b.hasApply = b.rayformHas(ctx, "apply") && b.rayformHas(ctx, "destroy")
	if !b.hasApply {
		b.logf("this rayform has no apply/destroy yet: plan runs on an unconverged cluster, apply rows are pending")
	}
	if err := os.MkdirAll(b.opts.workDir, 0o755); err != nil {
		return fmt.Errorf("workdir: %w", err)
	}
	b.describeMachine(ctx)
	for i, n := range b.opts.nodes {
		for j, d := range b.opts.delays {
			last := i == len(b.opts.nodes)-1 && j == len(b.opts.delays)-1
			if err := b.runShape(ctx, shape{nodes: n, delay: d}, last && b.opts.keep); err != nil {
				return fmt.Errorf("%s: %w", shape{n, d}, err)
			}
		}
	}
	var table bytes.Buffer
	for _, n := range b.notes {
		fmt.Fprintf(&table, "- %s\n", n)
	}
	fmt.Fprintln(&table)
	writeTable(&table, b.results)
	fmt.Fprintln(b.stdout)
	b.stdout.Write(table.Bytes())
	if b.opts.out != "" {
		if err := os.WriteFile(b.opts.out, table.Bytes(), 0o644); err != nil {
			return fmt.Errorf("-out: %w", err)
		}
	}
	if b.opts.micro {
		return b.micro(ctx)
	}
	return nil
}

func (b *bench) hasAnsibleCase() bool {
	return b.opts.has(caseAnsibleSetup) || b.opts.has(caseAnsibleCheck)
}

// logf prints progress on stderr.
func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "rfbench: "+format+"\n", args...)
}

// rayformHas reports whether the rayform binary has a subcommand.
func (b *bench) rayformHas(ctx context.Context, sub string) bool {
	p, err := measure(ctx, 30*time.Second, b.opts.rayform, sub, "-help")
	return err == nil && p.exit == 0
}

// labName is the lab of one shape: PREFIX-N-DELAY.
func (b *bench) labName(sh shape) string {
	return fmt.Sprintf("%s-%d-%s", b.opts.labName, sh.nodes, strings.ReplaceAll(sh.delay.String(), ".", "p"))
}

// shapeRun is what the cases of one shape share.
type shapeRun struct {
	sh      shape
	lab     *lab.Lab
	dir     string // rfbench's files for this shape
	cdir    string // the configuration directory
	algos   algorithms
	targets []string // floor helper HOST=FILE arguments
	// trueScript is a script of `true`, for the handshake-only case.
	trueScript string
	ansible    *ansibleFiles
	results    map[string]*result
}

// runShape brings up the lab of sh, converges the cluster and measures.
func (b *bench) runShape(ctx context.Context, sh shape, keep bool) (err error) {
	name := b.labName(sh)
	b.logf("%s: lab %s up", sh, name)
	l, err := b.labUp(ctx, name, sh)
	if err != nil {
		return err
	}
	if !keep {
		defer func() {
			if derr := b.labDown(context.WithoutCancel(ctx), name); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	r := &shapeRun{sh: sh, lab: l, dir: filepath.Join(b.opts.workDir, name), results: map[string]*result{}}
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("clean %s: %w", r.dir, err)
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("shape dir: %w", err)
	}
	if r.cdir, err = writeCluster(r.dir, l, b.opts.forEach); err != nil {
		return err
	}
	if r.algos, err = b.negotiated(ctx, l); err != nil {
		return err
	}
	b.logf("%s: rayform's SSH transport negotiates %s with %s", sh, r.algos, r.algos.Server)
	if note := fmt.Sprintf("SSH: rayform's transport negotiates %s with %s; the floor and Ansible are given the same (-o KexAlgorithms, HostKeyAlgorithms, Ciphers)", r.algos, r.algos.Server); !slices.Contains(b.notes, note) {
		b.notes = append(b.notes, note)
	}
	if b.hasApply {
		b.logf("%s: converging the cluster (rayform apply -auto-approve)", sh)
		p, err := b.rayformCmd(ctx, r, true, "apply", "-auto-approve")
		if err != nil {
			return err
		}
		if p.exit != 0 {
			return fmt.Errorf("first apply failed (exit %d): %s", p.exit, tail(append(p.stdout, p.stderr...), 2000))
		}
		b.logf("%s: first apply (cold: image pulls) took %s", sh, fmtDur(p.wall))
		if err := b.checkConverged(ctx, r); err != nil {
			return err
		}
	}
	if busy, err := cpuBusy(ctx, 3*time.Second); err == nil {
		b.notes = append(b.notes, fmt.Sprintf("%s: before the rounds the machine is %.0f%% busy (the converged cluster: raylets, GCS, dockerd, the delay queue; and anything else running)", sh, 100*busy))
	}
	scripts, err := probeScripts(r.cdir)
	if err != nil {
		return err
	}
	if len(scripts) != sh.nodes {
		return fmt.Errorf("%d probe scripts for %d nodes", len(scripts), sh.nodes)
	}
	if r.targets, err = writeProbes(r.dir, scripts); err != nil {
		return err
	}
	r.trueScript = filepath.Join(r.dir, "true.sh")
	if err := os.WriteFile(r.trueScript, []byte("true"), 0o644); err != nil {
		return fmt.Errorf("write true.sh: %w", err)
	}
	if b.opts.ansibleF && b.hasAnsibleCase() {
		if r.ansible, err = writeAnsible(r.dir, l, r.algos); err != nil {
			return err
		}
	}
	for _, c := range allCases() {
		if b.opts.has(c) {
			res := &result{shape: sh, name: c}
			r.results[c] = res
			b.results = append(b.results, res)
		}
	}
	if !b.hasApply {
		for _, c := range []string{caseApplyNoop, caseApplyE2E} {
			if res := r.results[c]; res != nil {
				res.note = "pending: rayform apply has not landed"
			}
		}
	}
	// Interleaved rounds: every case once per round, so drift in the
	// machine's load spreads over all of them.
	rounds := b.opts.warmup + b.opts.reps
	for round := range rounds {
		measured := round >= b.opts.warmup
		for _, c := range []string{caseSSHTrue, caseFloor, casePlan, caseAnsibleSetup, caseAnsibleCheck, caseApplyNoop} {
			res := r.results[c]
			if res == nil || res.note != "" {
				continue
			}
			if (c == caseAnsibleSetup || c == caseAnsibleCheck) && b.opts.slowReps > 0 && round >= b.opts.warmup+b.opts.slowReps {
				continue
			}
			s, err := b.runCase(ctx, r, c)
			if err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
			if b.opts.verbose || !measured {
				b.logf("%s: round %d %s %s%s", sh, round+1, c, fmtDur(s.wall), map[bool]string{false: " (warm-up)", true: ""}[measured])
			}
			if measured {
				res.samples = append(res.samples, s)
			}
		}
	}
	if res := r.results[caseApplyNoop]; res != nil && res.note == "" {
		if err := b.countApply(ctx, r, res); err != nil {
			return fmt.Errorf("%s: %w", caseApplyNoop, err)
		}
	}
	if res := r.results[caseApplyE2E]; res != nil && res.note == "" {
		if err := b.endToEnd(ctx, r, res); err != nil {
			return fmt.Errorf("%s: %w", caseApplyE2E, err)
		}
	}
	var summary bytes.Buffer
	var mine []*result
	for _, c := range allCases() {
		if res := r.results[c]; res != nil {
			mine = append(mine, res)
		}
	}
	writeTable(&summary, mine)
	fmt.Fprintf(b.stderr, "\n%s", summary.String())
	return nil
}

// labUp brings the lab of sh up with the benchmark's simulator timing.
func (b *bench) labUp(ctx context.Context, name string, sh shape) (*lab.Lab, error) {
	// A lab of another shape under the same name is replaced.
	if err := b.labDown(ctx, name); err != nil {
		return nil, err
	}
	args := []string{b.opts.rflab, "up", "-name", name, "-nodes", strconv.Itoa(sh.nodes),
		"-delay", sh.delay.String(), "-simnode", b.opts.simnode}
	keys := make([]string, 0, len(b.opts.timing))
	for k := range b.opts.timing {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-timing", k+"="+b.opts.timing[k].String())
	}
	p, err := measure(ctx, 10*time.Minute, args...)
	if err != nil {
		return nil, fmt.Errorf("lab up: %w", err)
	}
	if p.exit != 0 {
		return nil, fmt.Errorf("lab up failed (exit %d): %s", p.exit, tail(p.stderr, 2000))
	}
	b.logf("%s: lab up took %s", sh, fmtDur(p.wall))
	return lab.Load(lab.DefaultDir(name))
}

// labDown removes the lab (idempotent).
func (b *bench) labDown(ctx context.Context, name string) error {
	p, err := measure(ctx, 5*time.Minute, b.opts.rflab, "down", "-name", name)
	if err != nil {
		return fmt.Errorf("lab down: %w", err)
	}
	if p.exit != 0 {
		return fmt.Errorf("lab down failed (exit %d): %s", p.exit, tail(p.stderr, 2000))
	}
	// The serve records of the benchmark's project, bind-mounted from this
	// machine's /var/tmp (the lab's hosts share its filesystem).
	return os.RemoveAll(servefiles.HostProject(projectName))
}

// negotiated runs the kex helper in the client namespace against the head.
func (b *bench) negotiated(ctx context.Context, l *lab.Lab) (algorithms, error) {
	n := l.Nodes[0]
	p, err := inNetns(ctx, time.Minute, l.ClientNetns, nil, b.self, internalKex,
		"-home", l.ClientHome, "-name", nodeName(n.Name, b.opts.forEach), "-host", n.MgmtIP, "-key", l.Key)
	if err != nil {
		return algorithms{}, fmt.Errorf("negotiation probe: %w", err)
	}
	if p.exit != 0 {
		return algorithms{}, fmt.Errorf("negotiation probe failed: %s", tail(p.stderr, 2000))
	}
	var a algorithms
	if err := json.Unmarshal(p.stdout, &a); err != nil {
		return algorithms{}, fmt.Errorf("negotiation probe output: %w", err)
	}
	return a, nil
}

// rayformCmd runs rayform in the client namespace on the configuration.
// debug turns on the transport's debug log (stderr), from which SSH
// connections and round trips are counted.
func (b *bench) rayformCmd(ctx context.Context, r *shapeRun, debug bool, args ...string) (proc, error) {
	argv := []string{b.opts.rayform, "-no-color", "-chdir", r.cdir}
	if debug {
		argv = append(argv, "-log-level=debug")
	}
	argv = append(argv, args[0])
	if b.opts.planPar > 0 {
		argv = append(argv, "-parallelism", strconv.Itoa(b.opts.planPar))
	}
	argv = append(argv, args[1:]...)
	return inNetns(ctx, b.opts.timeout, r.lab.ClientNetns, []string{"HOME=" + r.lab.ClientHome}, argv...)
}

// checkConverged fails unless plan on the cluster has no changes.
func (b *bench) checkConverged(ctx context.Context, r *shapeRun) error {
	p, err := b.rayformCmd(ctx, r, false, "plan", "-detailed-exitcode")
	if err != nil {
		return err
	}
	if p.exit != 0 {
		return fmt.Errorf("plan after apply is not empty (exit %d): %s", p.exit, tail(append(p.stdout, p.stderr...), 3000))
	}
	return nil
}

// runCase runs one measured repetition of case c.
func (b *bench) runCase(ctx context.Context, r *shapeRun, c string) (sample, error) {
	switch c {
	case caseFloor:
		args := append([]string{b.self, internalFloor}, floorSSHArgs(r.lab.SSHConfig, r.algos)...)
		args = append(append(args, "--"), r.targets...)
		p, err := inNetns(ctx, b.opts.timeout, r.lab.ClientNetns, nil, args...)
		if err != nil {
			return sample{}, err
		}
		if p.exit != 0 {
			return sample{}, fmt.Errorf("floor failed: %s", tail(p.stderr, 2000))
		}
		p.conns, p.rts = 1, 1
		return p.sample, nil
	case casePlan:
		p, err := b.rayformCmd(ctx, r, false, "plan", "-detailed-exitcode")
		if err != nil {
			return sample{}, err
		}
		// Exit 2 (changes) is expected only before apply exists.
		if p.exit != 0 && !(p.exit == 2 && !b.hasApply) {
			return sample{}, fmt.Errorf("plan exit %d: %s", p.exit, tail(append(p.stdout, p.stderr...), 3000))
		}
		hosts, conns, rts, ok := parseObserved(p.stdout)
		if !ok || hosts != r.sh.nodes {
			return sample{}, fmt.Errorf("plan printed no Observed line for %d hosts: %s", r.sh.nodes, tail(p.stdout, 500))
		}
		p.conns, p.rts = perHostConns(conns, hosts), rts
		return p.sample, nil
	case caseAnsibleSetup:
		return b.ansible(ctx, r, "ansible", "all", "-m", "ansible.builtin.setup", "-f", strconv.Itoa(r.sh.nodes))
	case caseAnsibleCheck:
		return b.ansible(ctx, r, "ansible-playbook", "--check", "-f", strconv.Itoa(r.sh.nodes), r.ansible.playbook)
	case caseApplyNoop:
		// Measured without the debug log (plan runs without it too);
		// countApply counts connections and round trips in a run of its own.
		p, err := b.rayformCmd(ctx, r, false, "apply", "-auto-approve")
		if err != nil {
			return sample{}, err
		}
		if p.exit != 0 {
			return sample{}, fmt.Errorf("apply exit %d: %s", p.exit, tail(append(p.stdout, p.stderr...), 3000))
		}
		if !bytes.Contains(p.stdout, []byte("0 added, 0 changed, 0 destroyed")) {
			return sample{}, fmt.Errorf("apply on the converged cluster was not a no-op: %s", tail(p.stdout, 2000))
		}
		return p.sample, nil
	case caseSSHTrue:
		hosts := make([]string, 0, len(r.targets))
		for _, t := range r.targets {
			h, _, _ := strings.Cut(t, "=")
			hosts = append(hosts, h+"="+r.trueScript)
		}
		args := append([]string{b.self, internalFloor, "-any-output"}, floorSSHArgs(r.lab.SSHConfig, r.algos)...)
		args = append(append(args, "--"), hosts...)
		p, err := inNetns(ctx, b.opts.timeout, r.lab.ClientNetns, nil, args...)
		if err != nil {
			return sample{}, err
		}
		if p.exit != 0 {
			return sample{}, fmt.Errorf("ssh true failed: %s", tail(p.stderr, 2000))
		}
		p.conns, p.rts = 1, 1
		return p.sample, nil
	}
	return sample{}, fmt.Errorf("unknown case %q", c)
}

// countApply runs a no-op apply once more with the transport's debug log
// and gives every sample its SSH connections and round trips per host.
func (b *bench) countApply(ctx context.Context, r *shapeRun, res *result) error {
	p, err := b.rayformCmd(ctx, r, true, "apply", "-auto-approve")
	if err != nil {
		return err
	}
	if p.exit != 0 {
		return fmt.Errorf("apply exit %d: %s", p.exit, tail(append(p.stdout, p.stderr...), 3000))
	}
	hosts, conns, rts := parseClosed(p.stderr)
	if hosts != r.sh.nodes {
		return fmt.Errorf("apply's debug log closed connections to %d hosts, want %d", hosts, r.sh.nodes)
	}
	for i := range res.samples {
		res.samples[i].conns, res.samples[i].rts = conns, rts
	}
	return nil
}

// perHostConns is connections per host, rounded up.
func perHostConns(conns, hosts int) int {
	if hosts == 0 {
		return -1
	}
	return (conns + hosts - 1) / hosts
}

// ansible runs one Ansible command with a fresh ControlMaster directory and
// ends the masters it left behind afterwards (not measured).
func (b *bench) ansible(ctx context.Context, r *shapeRun, argv ...string) (sample, error) {
	cp, err := os.MkdirTemp("", "rfbench-cp-")
	if err != nil {
		return sample{}, fmt.Errorf("control path dir: %w", err)
	}
	defer func() {
		_, _ = measure(context.WithoutCancel(ctx), time.Minute, "sh", "-c", stopMastersScript(cp))
	}()
	p, err := inNetns(ctx, b.opts.timeout, r.lab.ClientNetns, r.ansible.env(cp), argv...)
	if err != nil {
		return sample{}, err
	}
	if p.exit != 0 {
		return sample{}, fmt.Errorf("%s exit %d: %s", argv[0], p.exit, tail(append(p.stdout, p.stderr...), 3000))
	}
	return p.sample, nil
}

// simLoad is the simulator's own model-load time: what vLLM would spend
// loading and warming up on real GPUs, not rayform's doing.
func (b *bench) simLoad() time.Duration {
	var d time.Duration
	for _, k := range []string{"engine_init", "weight_load", "profile_run", "graph_capture"} {
		d += b.opts.timing[k]
	}
	return d
}

// endToEnd destroys the cluster and applies it from nothing, e2eReps
// times, recording apply's time less the simulator's model-load time.
func (b *bench) endToEnd(ctx context.Context, r *shapeRun, res *result) error {
	res.subtracted = b.simLoad()
	for i := range b.opts.e2eReps {
		p, err := b.rayformCmd(ctx, r, false, "destroy", "-auto-approve")
		if err != nil {
			return err
		}
		if p.exit != 0 {
			return fmt.Errorf("destroy exit %d: %s", p.exit, tail(append(p.stdout, p.stderr...), 3000))
		}
		p, err = b.rayformCmd(ctx, r, true, "apply", "-auto-approve")
		if err != nil {
			return err
		}
		if p.exit != 0 {
			return fmt.Errorf("apply exit %d: %s", p.exit, tail(append(p.stdout, p.stderr...), 3000))
		}
		_, p.conns, p.rts = parseClosed(p.stderr)
		b.logf("%s: apply from nothing %d/%d: %s (less %s of simulated model load)", r.sh, i+1, b.opts.e2eReps, fmtDur(p.wall), fmtDur(res.subtracted))
		p.wall -= res.subtracted
		res.samples = append(res.samples, p.sample)
	}
	return b.checkConverged(ctx, r)
}

// micro runs the Go micro-benchmarks of the hot paths and prints them.
func (b *bench) micro(ctx context.Context) error {
	fmt.Fprintln(b.stdout, "\nGo micro-benchmarks:")
	p, err := measure(ctx, 10*time.Minute, "go", "test", "-run", "^$", "-bench", "Load64|Plan64|Parse$|Observe64|ObserveSpec64", "-benchmem",
		"./engine/config", "./resources", "./engine/observe")
	if err != nil {
		return fmt.Errorf("go test -bench: %w", err)
	}
	for _, line := range strings.Split(string(p.stdout), "\n") {
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "pkg:") {
			fmt.Fprintln(b.stdout, line)
		}
	}
	if p.exit != 0 {
		return fmt.Errorf("go test -bench exit %d: %s", p.exit, tail(append(p.stdout, p.stderr...), 2000))
	}
	return nil
}

// cpuBusy is the share of the machine's CPU time that was not idle over d
// (from /proc/stat): the background load the measurements run on.
func cpuBusy(ctx context.Context, d time.Duration) (float64, error) {
	read := func() (busy, total uint64, err error) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0, err
		}
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			return 0, 0, errors.New("/proc/stat: no cpu line")
		}
		for i, x := range f[1:] {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/stat: %w", err)
			}
			total += v
			if i != 3 && i != 4 { // idle, iowait
				busy += v
			}
		}
		return busy, total, nil
	}
	b0, t0, err := read()
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	b1, t1, err := read()
	if err != nil {
		return 0, err
	}
	if t1 == t0 {
		return 0, errors.New("/proc/stat did not advance")
	}
	return float64(b1-b0) / float64(t1-t0), nil
}
