package gcs

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/wire"
)

// Client is a connection to the GCS.
type Client struct {
	Conn    *wire.Conn
	Welcome Welcome
	// Addr is the GCS address dialed.
	Addr string
}

// Dial connects to the GCS at addr (host:port) from this network namespace,
// with a per-attempt timeout, and says hello. handler receives one-way
// messages (actor events, logs, spawn requests); it may be nil.
func Dial(ctx context.Context, addr string, timeout time.Duration, hello Hello, handler wire.Handler) (*Client, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := wire.New(nc)
	go func() { _ = c.Serve(context.WithoutCancel(ctx), handler) }()
	if hello.RayVersion == "" {
		hello.RayVersion = RayVersion
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var w Welcome
	if err := c.Call(hctx, "hello", hello, &w); err != nil {
		c.Close()
		return nil, fmt.Errorf("gcs hello: %w", err)
	}
	return &Client{Conn: c, Welcome: w, Addr: addr}, nil
}

// Status fetches the node table and pending demands.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	if err := c.Conn.Call(ctx, "status", struct{}{}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.Conn.Close() }
