package transport

import (
	"context"
	"sync"
)

// Lazy returns a Conn that dials host through d on its first use, so that
// callers which fan out over hosts (observe, apply) overlap the handshakes
// with the work instead of dialling everything first. Calls made while a
// dial is in flight wait for it and share its outcome; after a failed dial
// the next call dials again. Connect (see the function) dials ahead of use.
func Lazy(d Dialer, host string) Conn {
	return &lazyConn{d: d, host: host}
}

type lazyConn struct {
	d    Dialer
	host string

	mu      sync.Mutex
	conn    Conn
	dialing chan struct{} // closed when the dial in flight ends
	err     error         // the outcome of the last dial, for its waiters
	waiters int           // calls waiting for the dial in flight
}

func (l *lazyConn) get(ctx context.Context) (Conn, error) {
	l.mu.Lock()
	if l.conn != nil {
		defer l.mu.Unlock()
		return l.conn, nil
	}
	if wait := l.dialing; wait != nil {
		l.waiters++
		l.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			l.mu.Lock()
			l.waiters--
			l.mu.Unlock()
			return nil, ctx.Err()
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.waiters--
		if l.conn != nil {
			return l.conn, nil
		}
		return nil, l.err
	}
	done := make(chan struct{})
	l.dialing = done
	l.mu.Unlock()

	c, err := l.d.Dial(ctx, l.host)

	l.mu.Lock()
	defer l.mu.Unlock()
	l.conn, l.err, l.dialing = c, err, nil
	close(done)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Connect dials conn now if it is a Lazy conn that has not dialled yet
// (other Conns are connected already): apply uses it to overlap every
// host's handshake with taking the cluster locks. The dial's outcome is
// shared with the calls that wait for it.
func Connect(ctx context.Context, conn Conn) error {
	if l, ok := conn.(*lazyConn); ok {
		_, err := l.get(ctx)
		return err
	}
	return nil
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
