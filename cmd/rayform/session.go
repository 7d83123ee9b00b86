package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/names"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
	"github.com/rayform/rayform/engine/transport/ssh"
	"github.com/rayform/rayform/resources"
)

// runOptions are the flags plan, apply and destroy share.
type runOptions struct {
	vars          varFlags
	parallelism   int
	targets       stringList
	replace       stringList
	trustNewHosts bool
	sshConfig     string
	knownHosts    string
	project       string
	stateFile     string
	json          bool
	noLock        bool
	input         bool
	lockTimeout   time.Duration
	rotateToken   bool
	// readOnly loads the configuration as validate does, a variable
	// without a value unknown: status and logs need no value they do not
	// use (a secret they never send).
	readOnly bool
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func (o *runOptions) register(fs *flag.FlagSet) {
	o.vars.register(fs)
	fs.IntVar(&o.parallelism, "parallelism", 0, "limit the number of hosts and resources worked on at once to `N` (default: every host at once when observing, which is read-only; 10 when applying)")
	fs.Var(&o.targets, "target", "limit the operation to resource `ADDRESS` and its dependencies (repeatable; for destroy, the resource and what depends on it)")
	fs.Var(&o.replace, "replace", "replace resource `ADDRESS` even if it matches the configuration: a vllm_serve restarts its process, a ray_cluster recreates its containers and its serves (repeatable)")
	fs.BoolVar(&o.trustNewHosts, "trust-new-hosts", false, "record unknown SSH host keys in known_hosts instead of refusing them (like StrictHostKeyChecking=accept-new); a changed key is always refused")
	fs.StringVar(&o.sshConfig, "ssh-config", "", "read SSH client settings from `FILE` instead of ~/.ssh/config")
	fs.StringVar(&o.knownHosts, "known-hosts", "", "check host keys against `FILE` instead of ~/.ssh/known_hosts")
	fs.StringVar(&o.project, "project", "", "label rayform's containers with project `NAME` (default: the configuration's rayform { project = ... }, then the name the state recorded, then the configuration directory's name)")
	fs.BoolVar(&o.input, "input", true, "ask for input (-input=false: never prompt; apply and destroy then need -auto-approve or a saved plan)")
	fs.StringVar(&o.stateFile, "state", state.DefaultPath, "local state `FILE`, relative to the configuration directory")
	fs.BoolVar(&o.json, "json", false, "print machine-readable NDJSON events instead of text")
}

// session is what one plan, apply or destroy run shares: the configuration,
// the state, and one connection per host for the whole run; run is the
// engine's run over them (engine/run), which plan, apply and destroy call.
type session struct {
	c       *cli
	opts    *runOptions
	cfg     *config.Config // as loaded, before observed facts
	st      *state.State
	project string
	dialer  transport.Dialer
	conns   map[string]transport.Conn
	closers []func() error
	run     *run.Runner
	// statusProbes adds status's probes (kind.Observation.Status) to the
	// observation.
	statusProbes bool
}

// openSession loads the configuration and state and prepares (but does not
// dial) the connections. Problems are printed; the int is the exit code.
func openSession(c *cli, opts *runOptions) (*session, int) {
	load := loadConfig
	if opts.readOnly {
		load = loadConfigChecking
	}
	cfg, diags := load(c, &opts.vars)
	if diags.HasErrors() {
		writeDiagnostics(c, c.stderr, cfg.Files, diags)
		return nil, exitError
	}
	writeDiagnostics(c, c.stderr, cfg.Files, diags)
	statePath := c.statePath(opts.stateFile)
	st, err := state.Load(statePath)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return nil, exitError
	}
	project, err := resolveProject(c.dir, opts.project, cfg, st)
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return nil, exitError
	}
	st.Project = project
	s := &session{c: c, opts: opts, cfg: cfg, st: st, project: project, conns: map[string]transport.Conn{}}
	if err := s.prepareDialer(); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return nil, exitError
	}
	s.run = &run.Runner{
		Kinds:     resources.Kinds(),
		Config:    cfg,
		State:     st,
		StatePath: c.statePath(opts.stateFile),
		Project:   project,
		Conns:     s.conns,
		Options: run.Options{Parallelism: opts.parallelism, Targets: opts.targets, Replace: opts.replace,
			NoLock: opts.noLock, LockTimeout: opts.lockTimeout, RotateToken: opts.rotateToken},
		Log:     c.log,
		Dir:     c.dir,
		Version: version,
		Diagnostics: func(cfg *config.Config, diags hcl.Diagnostics) {
			writeDiagnostics(c, c.stderr, cfg.Files, diags)
		},
		Poll:         time.Second,
		ReadyTimeout: 2 * time.Minute,
	}
	return s, exitOK
}

// resolveProject decides the deployment's project name, the label that
// tells this deployment's containers from any other's. In order: the
// -project flag, the configuration's `rayform { project = "NAME" }`, the
// name the state recorded at the last apply, and last the configuration
// directory's name (which changes with where the repository is cloned,
// hence the documented advice to declare it). A declared name that differs
// from the one the state recorded for applied resources is refused: it
// would disown the running containers.
func resolveProject(dir, flagValue string, cfg *config.Config, st *state.State) (string, error) {
	applied := st.Project != "" && len(st.Addresses()) > 0
	switch {
	case flagValue != "":
		if !config.ValidProject(flagValue) {
			return "", fmt.Errorf("-project %q: a project name holds only letters, digits, '-', '_' and '.', starting with a letter or digit", flagValue)
		}
		return flagValue, nil
	case cfg.Project != "":
		if applied && st.Project != cfg.Project {
			return "", fmt.Errorf("%s: the configuration declares project %q, but the state records that its resources were applied as project %q: containers are found by this name, so changing it would disown them.\n\nSet project = %q back, or destroy with it first and then apply under the new name", cfg.ProjectRange, cfg.Project, st.Project, st.Project)
		}
		return cfg.Project, nil
	case st.Project != "":
		return st.Project, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return projectFromDir(filepath.Base(abs)), nil
}

// projectFromDir is the project a configuration directory's name gives:
// the name as one safe segment (names.Segment) without the '-', '_' and
// '.' at its ends, as a project starts with a letter or digit; "rayform"
// where nothing is left.
func projectFromDir(base string) string {
	out := strings.Trim(names.Segment(base), "-_.")
	if out == "" {
		return "rayform"
	}
	return out
}

// prepareDialer builds the SSH dialer from the nodes (and the hosts the
// state remembers), and a local runner for nodes whose host is "localhost"
// (sshHosts).
func (s *session) prepareDialer() error {
	hosts, localNodes := sshHosts(s.cfg, s.st)
	opts := ssh.Options{Hosts: hosts, TrustNewHosts: s.opts.trustNewHosts, Logger: s.c.log.Named("ssh")}
	if s.opts.sshConfig != "" {
		opts.ConfigFile = s.opts.sshConfig
	}
	if s.opts.knownHosts != "" {
		opts.KnownHostsFiles = []string{s.opts.knownHosts}
	}
	d, err := ssh.NewDialer(opts)
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	s.closers = append(s.closers, d.Close)
	s.dialer = d
	for name := range hosts {
		s.conns[name] = transport.Lazy(d, name)
	}
	for name := range localNodes {
		s.conns[name] = local.New(local.Options{Host: name, Logger: s.c.log.Named("local")})
	}
	return nil
}

// close closes every connection.
func (s *session) close() {
	for _, c := range s.conns {
		c.Close()
	}
	for _, f := range s.closers {
		f()
	}
}

// observed is one observation of the hosts and the plan made from it, seen
// through the resources.
type observed struct {
	facts   *observe.Facts
	cfg     *config.Config // evaluated with the facts
	result  *run.Result
	elapsed time.Duration
}

// observeAndPlan observes every host and computes the plan (run.Runner's
// Observe), seen through the resources.
func (s *session) observeAndPlan(ctx context.Context, refreshOnly bool) (*observed, error) {
	s.run.Options.StatusProbes = s.statusProbes
	obs, err := s.run.Observe(ctx, refreshOnly)
	if err != nil {
		return nil, err
	}
	return &observed{facts: obs.Facts, cfg: obs.Config, result: obs.Result, elapsed: obs.Elapsed}, nil
}

// stats sums the transport counters of every connection.
func (s *session) stats() map[string]transport.Stats {
	out := map[string]transport.Stats{}
	for h, c := range s.conns {
		out[h] = c.Stats()
	}
	return out
}
