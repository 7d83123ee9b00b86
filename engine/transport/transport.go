// Package transport defines how rayform reaches a host: run a command, upload a
// file atomically, close. Implementations live in sub-packages (ssh, local,
// transporttest); the engine only ever sees these interfaces.
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/rayform/rayform/engine/transport/shell"
)

// Cmd is one command to run on a host.
//
// Exactly one of Argv or Script is set. Argv is quoted with shell.Join before it
// crosses the wire; Script is handed to `sh -c` (or fed to `sh -s` on stdin when
// Stdin is nil) unchanged. Env is exported before the command runs; values in
// Env never appear in argv or in a remote process list (they are sent on stdin
// or through a 0600 env file by the implementation).
type Cmd struct {
	Argv   []string
	Script string
	Stdin  io.Reader
	Env    map[string]string
	// Timeout bounds this command alone; zero means only ctx bounds it.
	Timeout time.Duration
	// Mutating marks a command that changes the host. The read-only wrapper
	// refuses such commands; plan must never issue one.
	Mutating bool
	// Stdout and Stderr, when set, also receive the output as it arrives
	// (for following logs); Result still holds everything.
	Stdout io.Writer
	Stderr io.Writer
}

// String renders the command as the shell line that runs it: the Script, or
// Argv quoted with shell.Join. Env values are never part of it.
func (c Cmd) String() string {
	if c.Script != "" {
		return c.Script
	}
	return shell.Join(c.Argv)
}

// EnvKeys returns the names of the variables in Env, sorted (for logs and
// transcripts, which must never show the values).
func (c Cmd) EnvKeys() []string {
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Validate reports a command no implementation can run: neither or both of
// Argv and Script set, a NUL byte in an argument, or an Env name that is not
// a shell identifier ([A-Za-z_][A-Za-z0-9_]*) or a value containing NUL.
func (c Cmd) Validate() error {
	switch {
	case len(c.Argv) == 0 && c.Script == "":
		return errors.New("transport: command has neither Argv nor Script")
	case len(c.Argv) > 0 && c.Script != "":
		return errors.New("transport: command has both Argv and Script")
	}
	if err := shell.Valid(c.Argv); err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	if err := shell.Valid([]string{c.Script}); err != nil {
		return fmt.Errorf("transport: script: %w", err)
	}
	for k, v := range c.Env {
		if !isIdentifier(k) {
			return fmt.Errorf("transport: env name %q is not a shell identifier", k)
		}
		if err := shell.Valid([]string{v}); err != nil {
			return fmt.Errorf("transport: env %s: %w", k, err)
		}
	}
	return nil
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Result is what a finished command produced.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
	Duration time.Duration
}

// Conn is an open connection to one host. It is safe for concurrent use:
// commands are multiplexed over one underlying connection.
type Conn interface {
	// Host is the name the connection was opened for (the node name).
	Host() string
	// Run runs cmd and waits for it. A command that ran and exited non-zero
	// returns its Result and an *ExitError.
	Run(ctx context.Context, cmd Cmd) (Result, error)
	// Upload writes data to path atomically (temp file in the same directory,
	// then rename) with the given mode.
	Upload(ctx context.Context, path string, data []byte, mode uint32) error
	// Stats reports the connection's counters.
	Stats() Stats
	// Close releases the connection.
	Close() error
}

// Dialer opens connections to hosts by node name.
type Dialer interface {
	Dial(ctx context.Context, host string) (Conn, error)
}

// Stats counts the cost of talking to one host.
type Stats struct {
	// Handshakes counts connections established to the host itself (SSH
	// handshakes, including a reconnect; jump hosts are not included).
	Handshakes int
	// RoundTrips counts commands and uploads issued (one each), whatever
	// their outcome; the helper sessions an implementation opens to kill a
	// cancelled command are not counted.
	RoundTrips int
}

// ExitError is returned by Run when the command ran and exited non-zero.
// A command killed by a signal reports ExitCode 128+signal, as a shell would.
type ExitError struct {
	Host   string
	Cmd    string
	Result Result
}

func (e *ExitError) Error() string {
	msg := lastLine(e.Result.Stderr)
	if msg == "" {
		msg = lastLine(e.Result.Stdout)
	}
	if msg != "" {
		return fmt.Sprintf("%s: %q exited %d: %s", e.Host, shorten(e.Cmd), e.Result.ExitCode, msg)
	}
	return fmt.Sprintf("%s: %q exited %d", e.Host, shorten(e.Cmd), e.Result.ExitCode)
}

// Error kinds, tested with errors.Is. Implementations wrap them together with
// the host and the cause, for example
//
//	gpu-1: dial 10.0.0.5:22: host unreachable: connect: connection refused
//
// ErrAuthFailed is not necessarily permanent: a freshly provisioned host may
// accept connections before its authorized_keys is written. ErrTimeout is
// also reported (together with context.DeadlineExceeded) when a command's
// Timeout or its ctx deadline ends it; a cancelled ctx reports
// context.Canceled. ErrDisconnected means the connection dropped while a
// command was running, so whether it finished is unknown.
var (
	ErrUnknownHostKey  = errors.New("unknown host key")
	ErrHostKeyMismatch = errors.New("host key mismatch")
	ErrAuthFailed      = errors.New("authentication failed")
	ErrUnreachable     = errors.New("host unreachable")
	ErrTimeout         = errors.New("timed out")
	ErrDisconnected    = errors.New("disconnected")
	ErrReadOnly        = errors.New("mutating command refused by read-only transport")
)

func lastLine(b []byte) string {
	end := len(b)
	for end > 0 && (b[end-1] == '\n' || b[end-1] == '\r' || b[end-1] == ' ') {
		end--
	}
	start := end
	for start > 0 && b[start-1] != '\n' {
		start--
	}
	return string(b[start:end])
}

func shorten(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
