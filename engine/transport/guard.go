package transport

import (
	"context"
	"fmt"
)

// Guard wraps conn so that every command marked Mutating and every Upload
// first calls check, and fails without reaching the host when check returns
// an error (apply uses it to prove it still holds the cluster locks before
// each change). Everything else passes through.
func Guard(conn Conn, check func() error) Conn {
	return guardConn{conn: conn, check: check}
}

type guardConn struct {
	conn  Conn
	check func() error
}

var _ Conn = guardConn{}

func (g guardConn) Host() string { return g.conn.Host() }

func (g guardConn) Run(ctx context.Context, cmd Cmd) (Result, error) {
	if cmd.Mutating {
		if err := g.check(); err != nil {
			return Result{}, fmt.Errorf("%s: not running %q: %w", g.conn.Host(), shorten(cmd.String()), err)
		}
	}
	return g.conn.Run(ctx, cmd)
}

func (g guardConn) Upload(ctx context.Context, path string, data []byte, mode uint32) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("%s: not uploading %s: %w", g.conn.Host(), path, err)
	}
	return g.conn.Upload(ctx, path, data, mode)
}

func (g guardConn) Stats() Stats { return g.conn.Stats() }

func (g guardConn) Close() error { return g.conn.Close() }
