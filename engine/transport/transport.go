// Package transport defines how rayform reaches a host: run a command, upload a
// file atomically, close. Implementations live in sub-packages (ssh, local,
// transporttest); the engine only ever sees these interfaces.
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
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

// String renders the command for logs and errors (env values are not shown).
func (c Cmd) String() string {
	if c.Script != "" {
		return c.Script
	}
	return fmt.Sprint(c.Argv)
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
	Handshakes int // connections established (SSH handshakes)
	RoundTrips int // commands and uploads issued
}

// ExitError is returned by Run when the command ran and exited non-zero.
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

// Error kinds, tested with errors.Is.
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
