// Package sim holds what every simulated tool receives instead of reaching for
// process globals: its arguments, environment, standard streams, a clock and
// its process id. Tools are functions of a *Proc, so tests run them in-process
// with a fixed clock and captured output.
package sim

import (
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Env is a process environment as a map. The zero value is an empty
// environment.
type Env map[string]string

// EnvFrom parses "KEY=VALUE" entries (as os.Environ returns them). Later
// entries win.
func EnvFrom(list []string) Env {
	e := make(Env, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		e[k] = v
	}
	return e
}

// Get returns the value of key, or "" when unset.
func (e Env) Get(key string) string { return e[key] }

// Lookup returns the value of key and whether it is set.
func (e Env) Lookup(key string) (string, bool) {
	v, ok := e[key]
	return v, ok
}

// Clone returns an independent copy.
func (e Env) Clone() Env {
	c := make(Env, len(e))
	for k, v := range e {
		c[k] = v
	}
	return c
}

// List renders the environment as sorted "KEY=VALUE" entries, the form
// exec.Cmd.Env takes.
func (e Env) List() []string {
	out := make([]string, 0, len(e))
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Proc is one invocation of a simulated tool.
type Proc struct {
	// Args are the arguments after the tool name (argv[1:] for a symlinked
	// tool, argv[2:] for `simnode <tool> ...`).
	Args []string
	// Env is the process environment.
	Env Env
	// Stdin, Stdout and Stderr are the standard streams.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Now is the clock used for every timestamp printed.
	Now func() time.Time
	// Pid is the process id printed in log prefixes.
	Pid int
	// Exe is the path of the simnode binary, used to re-execute itself for
	// daemons and Ray workers.
	Exe string
	// Hostname is printed where the real tools print the host name.
	Hostname string
}

// FromOS builds a Proc from the real process state.
func FromOS(args []string) *Proc {
	exe, err := os.Executable()
	if err != nil {
		exe = "/proc/self/exe"
	}
	host, _ := os.Hostname()
	return &Proc{
		Args:     args,
		Env:      EnvFrom(os.Environ()),
		Stdin:    os.Stdin,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Now:      time.Now,
		Pid:      os.Getpid(),
		Exe:      exe,
		Hostname: host,
	}
}

// IsTerminal reports whether w is a character device (a TTY). Tools whose
// real counterpart changes format on a TTY (Ray's cli_logger) consult it.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil {
		return false
	}
	return st.Mode()&os.ModeCharDevice != 0
}
