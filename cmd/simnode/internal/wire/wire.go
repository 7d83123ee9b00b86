// Package wire is the simulator's own control protocol: JSON objects, one per
// line, over a real TCP connection (or any stream). It carries Ray's control
// plane between simulated raylets, the GCS, drivers and CLI clients. Requests
// carry an id and get exactly one reply with the same id; everything else is
// a one-way message delivered to the connection's handler.
package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Msg is one line on the wire.
type Msg struct {
	Op    string          `json:"op"`
	ID    uint64          `json:"id,omitempty"`
	Reply bool            `json:"reply,omitempty"`
	Err   string          `json:"err,omitempty"`
	Body  json.RawMessage `json:"body,omitempty"`
}

// Decode unmarshals the body into v.
func (m *Msg) Decode(v any) error {
	if len(m.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(m.Body, v); err != nil {
		return fmt.Errorf("decode %s: %w", m.Op, err)
	}
	return nil
}

// ErrClosed is returned by calls on a closed connection.
var ErrClosed = errors.New("connection closed")

// RemoteError is an error reply.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }

// Handler receives one-way messages and requests. For a request (ID != 0)
// the handler's return value is sent back as the reply body (or error).
type Handler func(ctx context.Context, c *Conn, m *Msg) (any, error)

// Conn is a message connection.
type Conn struct {
	rw      io.ReadWriteCloser
	mu      sync.Mutex // guards writes and the fields below
	enc     *json.Encoder
	next    uint64
	pending map[uint64]chan *Msg
	closed  bool
	done    chan struct{}
	// Remote is the peer address, when known.
	Remote string
}

// New wraps rw. Call Serve to start reading.
func New(rw io.ReadWriteCloser) *Conn {
	c := &Conn{rw: rw, enc: json.NewEncoder(rw), pending: map[uint64]chan *Msg{}, done: make(chan struct{})}
	if nc, ok := rw.(net.Conn); ok {
		c.Remote = nc.RemoteAddr().String()
	}
	return c
}

// Done is closed when the connection ends.
func (c *Conn) Done() <-chan struct{} { return c.done }

func (c *Conn) write(m *Msg) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if err := c.enc.Encode(m); err != nil {
		return fmt.Errorf("send %s: %w", m.Op, err)
	}
	return nil
}

// Send sends a one-way message.
func (c *Conn) Send(op string, body any) error {
	m := &Msg{Op: op}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s: %w", op, err)
		}
		m.Body = b
	}
	return c.write(m)
}

// Call sends a request and waits for its reply, decoding it into out (which
// may be nil).
func (c *Conn) Call(ctx context.Context, op string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode %s: %w", op, err)
	}
	ch := make(chan *Msg, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.write(&Msg{Op: op, ID: id, Body: b}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	case r := <-ch:
		if r.Err != "" {
			return &RemoteError{Msg: r.Err}
		}
		if out != nil {
			return r.Decode(out)
		}
		return nil
	}
}

// Serve reads messages until the connection ends, dispatching replies to
// callers and everything else to h (requests each in their own goroutine).
// It closes the connection on return.
func (c *Conn) Serve(ctx context.Context, h Handler) error {
	defer c.Close()
	sc := bufio.NewScanner(c.rw)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var m Msg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return fmt.Errorf("bad message: %w", err)
		}
		if m.Reply {
			c.mu.Lock()
			ch := c.pending[m.ID]
			c.mu.Unlock()
			if ch != nil {
				ch <- &m
			}
			continue
		}
		if m.ID == 0 {
			if h != nil {
				if _, err := h(ctx, c, &m); err != nil {
					return err
				}
			}
			continue
		}
		go func(m Msg) {
			var out any
			var err error
			if h != nil {
				out, err = h(ctx, c, &m)
			}
			r := &Msg{Op: m.Op, ID: m.ID, Reply: true}
			if err != nil {
				r.Err = err.Error()
			} else if out != nil {
				if b, merr := json.Marshal(out); merr == nil {
					r.Body = b
				} else {
					r.Err = merr.Error()
				}
			}
			_ = c.write(r)
		}(m)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	return c.rw.Close()
}
