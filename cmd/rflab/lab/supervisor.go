//go:build linux

package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor is one process per lab. It is the parent of every process
// the lab runs (sshd, dockerd, the registry) and, as a child subreaper, of
// everything they leave behind (containerd shims), so exited processes are
// reaped even where pid 1 does not reap orphans. It serves a small HTTP API
// on <dir>/supervisor.sock and hosts the userspace packet-delay queues.
//
// It must not use os/exec: its reaper collects every child with wait4(-1).

const supervisorSock = "supervisor.sock"

// procSpec describes one process the supervisor runs.
type procSpec struct {
	ID   string   `json:"id"`
	Argv []string `json:"argv"` // Argv[0] is an absolute path
	Env  []string `json:"env"`
	Log  string   `json:"log"`
}

// ProcStatus is what the supervisor knows about one of its processes.
type ProcStatus struct {
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	Running bool      `json:"running"`
	Exit    string    `json:"exit,omitempty"` // "exit status 1", "signal: killed"
	Started time.Time `json:"started"`
	Log     string    `json:"log"`
}

type sproc struct {
	spec   procSpec
	proc   *os.Process
	status ProcStatus
}

type supervisor struct {
	mu      sync.Mutex
	changed *sync.Cond
	procs   map[string]*sproc
	byPID   map[int]*sproc
	delays  *delayQueues
	hub     string // the lab hub's address once it serves
	stop    chan struct{}
	once    sync.Once
}

// SuperviseCommand is the argument that makes an executable run the
// supervisor, followed by the lab directory: rflab's hidden subcommand, and
// what Up runs by default (Config.SupervisorCommand).
const SuperviseCommand = "supervise"

// SupervisorMain runs the supervisor when args (without the program name) are
// SuperviseCommand and a lab directory. It reports whether it handled args; a
// test binary calls it first thing in TestMain so Up can re-execute the test
// binary as the supervisor.
func SupervisorMain(args []string) (exitCode int, handled bool) {
	if len(args) != 2 || args[0] != SuperviseCommand {
		return 0, false
	}
	if err := Supervise(context.Background(), args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
		return 1, true
	}
	return 0, true
}

// Supervise runs the supervisor of the lab in dir until it is told to exit
// (POST /exit), gets SIGTERM or SIGINT, or ctx ends; then it stops every
// process it started.
func Supervise(ctx context.Context, dir string) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	sock := filepath.Join(dir, supervisorSock)
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", sock, err)
	}
	s := &supervisor{
		procs:  map[string]*sproc{},
		byPID:  map[int]*sproc{},
		delays: newDelayQueues(),
		stop:   make(chan struct{}),
	}
	s.changed = sync.NewCond(&s.mu)

	sigc := make(chan os.Signal, 16)
	signal.Notify(sigc, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigc)
	go func() {
		for {
			select {
			case sig := <-sigc:
				switch sig {
				case syscall.SIGCHLD:
					s.reap()
				case syscall.SIGHUP:
					// The terminal that started `lab up` went away: keep running.
				default:
					s.shutdown()
				}
			case <-s.stop:
				return
			}
		}
	}()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /start", s.handleStart)
	mux.HandleFunc("POST /stop", s.handleStop)
	mux.HandleFunc("GET /procs", s.handleProcs)
	mux.HandleFunc("POST /delay", s.handleDelay)
	mux.HandleFunc("POST /hub", s.handleHub)
	mux.HandleFunc("POST /exit", func(w http.ResponseWriter, r *http.Request) {
		s.stopAll(5 * time.Second)
		writeJSON(w, map[string]int{"pid": os.Getpid()})
		s.shutdown()
	})
	srv := &http.Server{Handler: mux}
	go func() {
		select {
		case <-ctx.Done():
		case <-s.stop:
		}
		srv.Close()
	}()
	err = srv.Serve(ln)
	s.shutdown()
	s.stopAll(5 * time.Second)
	s.delays.closeAll()
	_ = os.Remove(sock)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *supervisor) shutdown() { s.once.Do(func() { close(s.stop) }) }

// reap collects every exited child; the lock makes a start and the reaping
// of its pid mutually exclusive, so no exit status is lost.
func (s *supervisor) reap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			break
		}
		p := s.byPID[pid]
		if p == nil {
			continue // an orphan we adopted as subreaper
		}
		delete(s.byPID, pid)
		p.status.Running = false
		switch {
		case ws.Exited():
			p.status.Exit = fmt.Sprintf("exit status %d", ws.ExitStatus())
		case ws.Signaled():
			p.status.Exit = "signal: " + ws.Signal().String()
		default:
			p.status.Exit = "ended"
		}
		p.proc.Release()
	}
	s.changed.Broadcast()
}

func (s *supervisor) handleStart(w http.ResponseWriter, r *http.Request) {
	var spec procSpec
	if err := json.NewDecoder(r.Body).Decode(&spec); err != nil {
		http.Error(w, "decode spec: "+err.Error(), http.StatusBadRequest)
		return
	}
	st, err := s.start(spec)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, st)
}

func (s *supervisor) start(spec procSpec) (ProcStatus, error) {
	if spec.ID == "" || len(spec.Argv) == 0 || !filepath.IsAbs(spec.Argv[0]) {
		return ProcStatus{}, fmt.Errorf("bad process spec %q %v: want an id and an absolute argv[0]", spec.ID, spec.Argv)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.procs[spec.ID]; p != nil && p.status.Running {
		return p.status, nil
	}
	logf, err := os.OpenFile(spec.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return ProcStatus{}, fmt.Errorf("open log of %s: %w", spec.ID, err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return ProcStatus{}, err
	}
	defer devnull.Close()
	fmt.Fprintf(logf, "--- %s supervisor: start %q\n", time.Now().Format(time.RFC3339), spec.Argv)
	proc, err := os.StartProcess(spec.Argv[0], spec.Argv, &os.ProcAttr{
		Dir:   "/",
		Env:   spec.Env,
		Files: []*os.File{devnull, logf, logf},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return ProcStatus{}, fmt.Errorf("start %s %q: %w", spec.ID, spec.Argv, err)
	}
	p := &sproc{spec: spec, proc: proc, status: ProcStatus{
		ID: spec.ID, PID: proc.Pid, Running: true, Started: time.Now(), Log: spec.Log,
	}}
	s.procs[spec.ID] = p
	s.byPID[proc.Pid] = p
	return p.status, nil
}

// stopRequest asks the supervisor to stop processes: SIGTERM (or Signal),
// then SIGKILL to the whole process group after Grace.
type stopRequest struct {
	IDs    []string      `json:"ids"`
	Signal int           `json:"signal,omitempty"`
	Grace  time.Duration `json:"grace"`
}

func (s *supervisor) handleStop(w http.ResponseWriter, r *http.Request) {
	var req stopRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "decode stop request: "+err.Error(), http.StatusBadRequest)
		return
	}
	sig := syscall.SIGTERM
	if req.Signal != 0 {
		sig = syscall.Signal(req.Signal)
	}
	writeJSON(w, s.stopProcs(req.IDs, sig, req.Grace))
}

func (s *supervisor) stopAll(grace time.Duration) {
	s.mu.Lock()
	var ids []string
	for id, p := range s.procs {
		if p.status.Running {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	s.stopProcs(ids, syscall.SIGTERM, grace)
}

// stopProcs signals the processes, waits up to grace, SIGKILLs their process
// groups, and waits (bounded) for the reaper.
func (s *supervisor) stopProcs(ids []string, sig syscall.Signal, grace time.Duration) []ProcStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if p := s.procs[id]; p != nil && p.status.Running {
			_ = p.proc.Signal(sig)
		}
	}
	running := func() []*sproc {
		var out []*sproc
		for _, id := range ids {
			if p := s.procs[id]; p != nil && p.status.Running {
				out = append(out, p)
			}
		}
		return out
	}
	s.waitLocked(grace, func() bool { return len(running()) == 0 })
	for _, p := range running() {
		_ = syscall.Kill(-p.status.PID, syscall.SIGKILL)
		_ = p.proc.Signal(syscall.SIGKILL)
	}
	s.waitLocked(10*time.Second, func() bool { return len(running()) == 0 })
	var out []ProcStatus
	for _, id := range ids {
		if p := s.procs[id]; p != nil {
			out = append(out, p.status)
		}
	}
	return out
}

// waitLocked waits on the condition variable until done() or d elapses.
func (s *supervisor) waitLocked(d time.Duration, done func() bool) {
	if done() {
		return
	}
	t := time.AfterFunc(d, func() {
		s.mu.Lock()
		s.changed.Broadcast()
		s.mu.Unlock()
	})
	defer t.Stop()
	deadline := time.Now().Add(d)
	for !done() && time.Now().Before(deadline) {
		s.changed.Wait()
	}
}

func (s *supervisor) handleProcs(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := make([]ProcStatus, 0, len(s.procs))
	for _, p := range s.procs {
		out = append(out, p.status)
	}
	s.mu.Unlock()
	out = append(out, s.delays.status()...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// supClient talks to a supervisor over its unix socket.
type supClient struct {
	sock string
	hc   *http.Client
}

func newSupClient(sock string) *supClient {
	return &supClient{sock: sock, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}}
}

func (c *supClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://supervisor"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("supervisor %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("supervisor %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("supervisor %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("supervisor %s %s: decode %q: %w", method, path, b, err)
		}
	}
	return nil
}

func (c *supClient) start(ctx context.Context, spec procSpec) (ProcStatus, error) {
	var st ProcStatus
	err := c.call(ctx, http.MethodPost, "/start", spec, &st)
	return st, err
}

func (c *supClient) stop(ctx context.Context, grace time.Duration, ids ...string) ([]ProcStatus, error) {
	var st []ProcStatus
	err := c.call(ctx, http.MethodPost, "/stop", stopRequest{IDs: ids, Grace: grace}, &st)
	return st, err
}

func (c *supClient) kill(ctx context.Context, ids ...string) ([]ProcStatus, error) {
	var st []ProcStatus
	err := c.call(ctx, http.MethodPost, "/stop", stopRequest{IDs: ids, Signal: int(syscall.SIGKILL)}, &st)
	return st, err
}

func (c *supClient) procs(ctx context.Context) ([]ProcStatus, error) {
	var st []ProcStatus
	err := c.call(ctx, http.MethodGet, "/procs", nil, &st)
	return st, err
}

// startSupervisor starts the supervisor of the lab in dir, detached from the
// caller's session, and waits until it answers.
func startSupervisor(ctx context.Context, argv []string, dir string) (int, error) {
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return 0, fmt.Errorf("find own executable to run the supervisor: %w", err)
		}
		argv = []string{exe, SuperviseCommand}
	}
	logPath := filepath.Join(dir, "supervisor.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("open supervisor log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], append(append([]string{}, argv[1:]...), dir)...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start supervisor %q: %w", cmd.Args, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it if we outlive it
	c := newSupClient(filepath.Join(dir, supervisorSock))
	err = waitFor(ctx, "lab supervisor", 15*time.Second, func(ctx context.Context) error {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(logPath)
			return backoffStop{fmt.Errorf("supervisor %q exited (%v): %s", cmd.Args, err, bytes.TrimSpace(b))}
		default:
		}
		_, err := c.procs(ctx)
		return err
	})
	if err != nil {
		_ = cmd.Process.Kill()
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// backoffStop marks an error that retrying cannot fix.
type backoffStop struct{ error }
