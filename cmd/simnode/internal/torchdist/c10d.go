// Package torchdist plays torch.distributed's rendezvous as vLLM workers use
// it: the c10d TCPStore (rank 0 listens on the init method's port on all
// interfaces, the other ranks connect over real TCP from their own network
// namespace, retrying with torch's backoff and warning lines), the Gloo
// interface lookup (GLOO_SOCKET_IFNAME) and NCCL's bootstrap (interface
// selection by NCCL_SOCKET_IFNAME and a real ring of TCP connections over
// the chosen interfaces), with the exact lines torch and NCCL print.
package torchdist

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/netx"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
)

// PyError is a Python exception raised by the simulated library: Type is
// the qualified class ("torch.distributed.DistNetworkError").
type PyError struct {
	Type string
	Msg  string
}

func (e *PyError) Error() string { return e.Type + ": " + e.Msg }

// Env is what the rendezvous needs from its process.
type Env struct {
	// Log receives torch's and NCCL's lines (the worker's stderr).
	Log io.Writer
	Now func() time.Time
	// Host and Pid appear in NCCL lines.
	Host string
	Pid  int
	Rand *rand.Rand
}

func (e *Env) glog(level byte, file, msg string) {
	fmt.Fprintln(e.Log, pylog.Glog(e.Now(), level, file, msg))
}

// Store is a joined c10d TCPStore.
type Store struct {
	rank, world int
	// server side
	ln      net.Listener
	mu      sync.Mutex
	kv      map[string]string
	cond    *sync.Cond
	clients []net.Conn
	// client side
	conn net.Conn
	rd   *bufio.Reader
	enc  *json.Encoder
}

type storeMsg struct {
	Op    string `json:"op"`
	Rank  int    `json:"rank,omitempty"`
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
}

// Rendezvous joins the TCPStore at host:port as rank of world, within
// timeout: rank 0 serves it, the others connect to it.
func Rendezvous(ctx context.Context, e *Env, host string, port, rank, world int, timeout time.Duration) (*Store, error) {
	if rank == 0 {
		return serve(ctx, e, port, world, timeout)
	}
	return connect(ctx, e, host, port, rank, world, timeout)
}

func serve(ctx context.Context, e *Env, port, world int, timeout time.Duration) (*Store, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		num, text, _ := netx.Errno(err)
		return nil, &PyError{Type: "torch.distributed.DistNetworkError", Msg: fmt.Sprintf("The server socket has failed to listen on any local network address. port: %d, useIpv6: 0, code: -%d, name: %s, message: %s", port, num, "EADDRINUSE", text)}
	}
	s := &Store{rank: 0, world: world, ln: ln, kv: map[string]string{}}
	s.cond = sync.NewCond(&s.mu)
	joined := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				rd := bufio.NewReader(c)
				line, err := rd.ReadBytes('\n')
				if err != nil {
					c.Close()
					return
				}
				var m storeMsg
				if json.Unmarshal(line, &m) != nil || m.Op != "join" {
					c.Close()
					return
				}
				select {
				case joined <- c:
					go s.serveClient(c, rd)
				case <-ctx.Done():
					c.Close()
				}
			}()
		}
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	n := 1
	for n < world {
		select {
		case c := <-joined:
			s.mu.Lock()
			s.clients = append(s.clients, c)
			s.mu.Unlock()
			n++
		case <-deadline.C:
			s.Close()
			return nil, &PyError{Type: "torch.distributed.DistStoreError", Msg: fmt.Sprintf("Timed out after %d seconds waiting for clients. %d/%d clients joined.", int(timeout.Seconds())+1, n, world)}
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	for _, c := range s.clients {
		_ = json.NewEncoder(c).Encode(storeMsg{Op: "ready"})
	}
	s.mu.Unlock()
	return s, nil
}

func (s *Store) serveClient(c net.Conn, rd *bufio.Reader) {
	enc := json.NewEncoder(c)
	var wmu sync.Mutex
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return
		}
		var m storeMsg
		if json.Unmarshal(line, &m) != nil {
			return
		}
		switch m.Op {
		case "set":
			s.Set(m.Key, m.Value)
		case "get":
			go func(key string) {
				v, ok := s.waitKey(key)
				if !ok {
					return
				}
				wmu.Lock()
				_ = enc.Encode(storeMsg{Op: "value", Key: key, Value: v})
				wmu.Unlock()
			}(m.Key)
		}
	}
}

func (s *Store) waitKey(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if v, ok := s.kv[key]; ok {
			return v, true
		}
		if s.kv == nil {
			return "", false
		}
		s.cond.Wait()
	}
}

// backoff returns torch's client retry delays: exponential with jitter,
// starting near 400 ms for long timeouts (scaled down for short ones).
func backoff(r *rand.Rand, try int, timeout time.Duration) time.Duration {
	base := timeout / 60
	base = min(max(base, 100*time.Millisecond), 400*time.Millisecond)
	d := float64(base)
	for i := 0; i < try; i++ {
		d *= 1.5
	}
	return time.Duration(d * (0.75 + 0.5*r.Float64()))
}

func garbageV6(r *rand.Rand) string {
	return fmt.Sprintf("[%x:%x::%x:0:%x:0]", r.Intn(0xffff), r.Intn(0xffff), r.Intn(0xfff), r.Intn(0xffff))
}

func connect(ctx context.Context, e *Env, host string, port, rank, world int, timeout time.Duration) (*Store, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	start := time.Now()
	any := fmt.Sprintf("The client socket has failed to connect to any network address of (%s, %d).", host, port)
	var lastDetail, lastShort string
	for try := 0; ; try++ {
		remaining := timeout - time.Since(start)
		if remaining <= 0 {
			break
		}
		d := net.Dialer{Timeout: remaining}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			s := &Store{rank: rank, world: world, conn: c, rd: bufio.NewReader(c), enc: json.NewEncoder(c)}
			if err := s.enc.Encode(storeMsg{Op: "join", Rank: rank}); err != nil {
				c.Close()
				return nil, &PyError{Type: "torch.distributed.DistNetworkError", Msg: err.Error()}
			}
			_ = c.SetReadDeadline(start.Add(timeout))
			line, err := s.rd.ReadBytes('\n')
			_ = c.SetReadDeadline(time.Time{})
			if err != nil {
				c.Close()
				return nil, &PyError{Type: "torch.distributed.DistStoreError", Msg: fmt.Sprintf("Timed out after %d seconds waiting for clients.", int(timeout.Seconds())+1)}
			}
			var m storeMsg
			if json.Unmarshal(line, &m) != nil || m.Op != "ready" {
				c.Close()
				return nil, &PyError{Type: "torch.distributed.DistStoreError", Msg: "bad store handshake"}
			}
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		num, text, _ := netx.Errno(err)
		gport := 1024 + e.Rand.Intn(60000)
		e.glog('W', "socket.cpp:764", fmt.Sprintf("[c10d] The client socket has failed to connect to %s:%d (errno: %d - %s).", garbageV6(e.Rand), gport, num, text))
		e.glog('W', "socket.cpp:764", fmt.Sprintf("[c10d] The client socket has failed to connect to 0.0.0.0:%d (errno: %d - %s).", gport, num, text))
		e.glog('E', "socket.cpp:818", "[c10d] "+any)
		lastShort = fmt.Sprintf("%s The client socket has failed to connect to 0.0.0.0:%d", any, gport)
		lastDetail = fmt.Sprintf("%s (errno: %d - %s).", lastShort, num, text)
		delay := backoff(e.Rand, try, timeout)
		remaining = timeout - time.Since(start)
		if remaining <= 0 {
			break
		}
		e.glog('W', "TCPStore.cpp:340", fmt.Sprintf("[c10d] TCP client failed to connect/validate to host %s - retrying (try=%d, timeout=%dms, delay=%dms): %s", addr, try, timeout.Milliseconds(), delay.Milliseconds(), lastDetail))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(delay, remaining)):
		}
		if time.Since(start) >= timeout {
			e.glog('E', "TCPStore.cpp:328", fmt.Sprintf("[c10d] TCP client failed to connect/validate to host %s - timed out (try=%d, timeout=%dms): %s", addr, try+1, timeout.Milliseconds(), lastShort))
			fmt.Fprintln(e.Log, "Exception raised from run at /pytorch/torch/csrc/distributed/c10d/socket.cpp:820 (most recent call first):")
			return nil, &PyError{Type: "torch.distributed.DistNetworkError", Msg: lastDetail}
		}
	}
	if lastDetail == "" {
		lastDetail = fmt.Sprintf("The client socket has timed out after %ds while trying to connect to (%s, %d).", int(timeout.Seconds()), host, port)
	}
	return nil, &PyError{Type: "torch.distributed.DistNetworkError", Msg: lastDetail}
}

// Set stores a key (visible to every rank).
func (s *Store) Set(key, value string) error {
	if s.conn != nil {
		return s.enc.Encode(storeMsg{Op: "set", Key: key, Value: value})
	}
	s.mu.Lock()
	if s.kv != nil {
		s.kv[key] = value
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	return nil
}

// ErrStoreClosed reports the store's server went away.
var ErrStoreClosed = errors.New("store closed")

// Get waits for a key until timeout.
func (s *Store) Get(key string, timeout time.Duration) (string, error) {
	if s.conn == nil {
		ch := make(chan string, 1)
		go func() {
			if v, ok := s.waitKey(key); ok {
				ch <- v
			}
		}()
		select {
		case v := <-ch:
			return v, nil
		case <-time.After(timeout):
			return "", errors.New("timeout")
		}
	}
	if err := s.enc.Encode(storeMsg{Op: "get", Key: key}); err != nil {
		return "", ErrStoreClosed
	}
	_ = s.conn.SetReadDeadline(time.Now().Add(timeout))
	line, err := s.rd.ReadBytes('\n')
	_ = s.conn.SetReadDeadline(time.Time{})
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return "", errors.New("timeout")
		}
		return "", ErrStoreClosed
	}
	var m storeMsg
	if err := json.Unmarshal(line, &m); err != nil {
		return "", err
	}
	return m.Value, nil
}

// LocalAddr returns the client connection's addresses (for torch's
// recvValueWithTimeout warning).
func (s *Store) LocalAddr() (string, string) {
	if s.conn == nil {
		return "", ""
	}
	return s.conn.LocalAddr().String(), s.conn.RemoteAddr().String()
}

// Close tears the store down (a server closes every client connection).
func (s *Store) Close() {
	if s.conn != nil {
		s.conn.Close()
		return
	}
	s.mu.Lock()
	s.kv = nil
	for _, c := range s.clients {
		c.Close()
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
	}
}
