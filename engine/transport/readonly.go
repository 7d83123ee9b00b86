package transport

import (
	"context"
	"fmt"
)

// ReadOnly wraps conn so that it refuses to change the host: Run of a command
// marked Mutating and every Upload fail with an error wrapping ErrReadOnly,
// without reaching the host. Everything else passes through, so `plan` can be
// handed read-only connections and "plan changes nothing" becomes a property
// the transport checks rather than a promise.
func ReadOnly(conn Conn) Conn {
	if ro, ok := conn.(readOnlyConn); ok {
		return ro
	}
	return readOnlyConn{conn: conn}
}

// ReadOnlyDialer wraps d so that every connection it opens is ReadOnly.
func ReadOnlyDialer(d Dialer) Dialer {
	return readOnlyDialer{d: d}
}

type readOnlyConn struct {
	conn Conn
}

var _ Conn = readOnlyConn{}

func (r readOnlyConn) Host() string { return r.conn.Host() }

func (r readOnlyConn) Run(ctx context.Context, cmd Cmd) (Result, error) {
	if cmd.Mutating {
		return Result{}, fmt.Errorf("%s: %q: %w", r.conn.Host(), shorten(cmd.String()), ErrReadOnly)
	}
	return r.conn.Run(ctx, cmd)
}

func (r readOnlyConn) Upload(ctx context.Context, path string, data []byte, mode uint32) error {
	return fmt.Errorf("%s: upload %s: %w", r.conn.Host(), path, ErrReadOnly)
}

func (r readOnlyConn) Stats() Stats { return r.conn.Stats() }

func (r readOnlyConn) Close() error { return r.conn.Close() }

type readOnlyDialer struct {
	d Dialer
}

func (r readOnlyDialer) Dial(ctx context.Context, host string) (Conn, error) {
	c, err := r.d.Dial(ctx, host)
	if err != nil {
		return nil, err
	}
	return ReadOnly(c), nil
}
