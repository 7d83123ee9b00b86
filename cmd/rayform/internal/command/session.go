package command

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
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

// session is what one plan, apply or destroy run shares: the configuration,
// the state, and one connection per host for the whole run; run is the
// engine's run over them (engine/run), which plan, apply and destroy call.
type session struct {
	m       *Meta
	opts    *arguments.Run
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
// dial) the connections. Problems are shown on v; the int is the exit
// code. readOnly loads the configuration as validate does, a variable
// without a value unknown: status and logs need no value they do not use
// (a secret they never send).
func openSession(m *Meta, v *views.View, opts *arguments.Run, readOnly bool) (*session, int) {
	load := loadConfig
	if readOnly {
		load = loadConfigChecking
	}
	cfg, diags := load(m, &opts.Vars)
	v.Diagnostics(cfg.Files, diags)
	if diags.HasErrors() {
		return nil, ExitError
	}
	st, err := state.Load(m.statePath(opts.StateFile))
	if err != nil {
		v.Error(err)
		return nil, ExitError
	}
	project, err := resolveProject(m.dir, opts.Project, cfg, st)
	if err != nil {
		v.Error(err)
		return nil, ExitError
	}
	st.Project = project
	s := &session{m: m, opts: opts, cfg: cfg, st: st, project: project, conns: map[string]transport.Conn{}}
	if err := s.prepareDialer(); err != nil {
		v.Error(err)
		return nil, ExitError
	}
	s.run = s.runner(v)
	return s, ExitOK
}

// runner is the engine's run over the session.
func (s *session) runner(v *views.View) *run.Runner {
	m, opts := s.m, s.opts
	return &run.Runner{
		Kinds:     resources.Kinds(),
		Config:    s.cfg,
		State:     s.st,
		StatePath: m.statePath(opts.StateFile),
		Project:   s.project,
		Conns:     s.conns,
		Options: run.Options{Parallelism: opts.Parallelism, Targets: opts.Targets, Replace: opts.Replace,
			NoLock: opts.NoLock, LockTimeout: opts.LockTimeout, RotateToken: opts.RotateToken},
		Log:          m.log,
		Dir:          m.dir,
		Version:      m.version,
		Poll:         time.Second,
		ReadyTimeout: 2 * time.Minute,
		Diagnostics: func(cfg *config.Config, diags hcl.Diagnostics) {
			v.Diagnostics(cfg.Files, diags)
		},
	}
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
	opts := ssh.Options{Hosts: hosts, TrustNewHosts: s.opts.TrustNewHosts, Logger: s.m.log.Named("ssh")}
	if s.opts.SSHConfig != "" {
		opts.ConfigFile = s.opts.SSHConfig
	}
	if s.opts.KnownHosts != "" {
		opts.KnownHostsFiles = []string{s.opts.KnownHosts}
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
		s.conns[name] = local.New(local.Options{Host: name, Logger: s.m.log.Named("local")})
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
