package transport

import (
	"context"
	"sync"
)

// Lazy returns a Conn that dials host through d on its first use, so that
// callers which fan out over hosts (observe, apply) overlap the handshakes
// with the work instead of dialling everything first. A failed dial is
// returned by every call until one succeeds.
func Lazy(d Dialer, host string) Conn {
	return &lazyConn{d: d, host: host}
}

type lazyConn struct {
	d    Dialer
	host string

	mu   sync.Mutex
	conn Conn
}

func (l *lazyConn) get(ctx context.Context) (Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		return l.conn, nil
	}
	c, err := l.d.Dial(ctx, l.host)
	if err != nil {
		return nil, err
	}
	l.conn = c
	return c, nil
}

func (l *lazyConn) Host() string { return l.host }

func (l *lazyConn) Run(ctx context.Context, cmd Cmd) (Result, error) {
	c, err := l.get(ctx)
	if err != nil {
		return Result{}, err
	}
	return c.Run(ctx, cmd)
}

func (l *lazyConn) Upload(ctx context.Context, path string, data []byte, mode uint32) error {
	c, err := l.get(ctx)
	if err != nil {
		return err
	}
	return c.Upload(ctx, path, data, mode)
}

// Stats reports the underlying connection's counters (zero before dialling).
func (l *lazyConn) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return Stats{}
	}
	return l.conn.Stats()
}

// Close closes the underlying connection, if one was opened.
func (l *lazyConn) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	return l.conn.Close()
}
