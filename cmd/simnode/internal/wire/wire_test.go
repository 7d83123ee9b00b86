package wire

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func pair(t *testing.T, h Handler) (*Conn, *Conn) {
	t.Helper()
	a, b := net.Pipe()
	ca, cb := New(a), New(b)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); ca.Close(); cb.Close() })
	go func() { _ = ca.Serve(ctx, nil) }()
	go func() { _ = cb.Serve(ctx, h) }()
	return ca, cb
}

func TestCallAndSend(t *testing.T) {
	got := make(chan string, 1)
	client, _ := pair(t, func(ctx context.Context, c *Conn, m *Msg) (any, error) {
		switch m.Op {
		case "echo":
			var s string
			if err := m.Decode(&s); err != nil {
				return nil, err
			}
			return s + "!", nil
		case "fail":
			return nil, errors.New("no such thing")
		case "note":
			var s string
			_ = m.Decode(&s)
			got <- s
		}
		return nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out string
	if err := client.Call(ctx, "echo", "hi", &out); err != nil || out != "hi!" {
		t.Errorf("echo = %q, %v", out, err)
	}
	var re *RemoteError
	if err := client.Call(ctx, "fail", nil, nil); !errors.As(err, &re) || re.Msg != "no such thing" {
		t.Errorf("fail = %v, want RemoteError", err)
	}
	if err := client.Send("note", "one-way"); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "one-way" {
			t.Errorf("note = %q", s)
		}
	case <-ctx.Done():
		t.Fatal("one-way message not delivered")
	}
	client.Close()
	if err := client.Call(ctx, "echo", "x", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call on closed conn = %v, want ErrClosed", err)
	}
}
