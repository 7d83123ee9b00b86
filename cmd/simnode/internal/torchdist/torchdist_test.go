package torchdist

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/netx"
)

func testEnv() (*Env, *bytes.Buffer) {
	var b bytes.Buffer
	return &Env{Log: &syncWriter{w: &b}, Now: time.Now, Host: "vm", Pid: 1004, Rand: rand.New(rand.NewSource(1))}, &b
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestRendezvousAndNCCLOnLoopback(t *testing.T) {
	port := freePort(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	logs := make([]*bytes.Buffer, 2)
	stores := make([]*Store, 2)
	defer func() {
		for _, s := range stores {
			if s != nil {
				s.Close()
			}
		}
	}()
	for rank := 0; rank < 2; rank++ {
		wg.Add(1)
		go func(rank int) {
			defer wg.Done()
			e, b := testEnv()
			logs[rank] = b
			s, err := Rendezvous(ctx, e, "127.0.0.1", port, rank, 2, 5*time.Second)
			if err != nil {
				errs[rank] = err
				return
			}
			stores[rank] = s
			errs[rank] = NCCLInit(ctx, e, NCCLConfig{SocketIfname: "lo", Debug: "INFO"}, s, rank, 2, 0, 5*time.Second)
		}(rank)
	}
	wg.Wait()
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v\n%s", rank, err, logs[rank])
		}
	}
	// real-outputs.md, success bound to the chosen interface.
	for _, want := range []string{
		"vm:1004:1004 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to lo",
		"vm:1004:1004 [0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>",
		"vm:1004:1004 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>",
		"vm:1004:1004 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0",
		"vm:1004:1004 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
	} {
		if !strings.Contains(logs[0].String(), want) {
			t.Errorf("rank 0 log lacks %q:\n%s", want, logs[0])
		}
	}
}

// real-outputs.md: the master is unreachable; here nothing listens, so the
// errno is ECONNREFUSED instead of ENETUNREACH (the netns test covers that).
func TestClientGivesUpWithTorchLines(t *testing.T) {
	port := freePort(t)
	e, b := testEnv()
	_, err := Rendezvous(context.Background(), e, "127.0.0.1", port, 1, 2, 400*time.Millisecond)
	var pe *PyError
	if !errors.As(err, &pe) || pe.Type != "torch.distributed.DistNetworkError" {
		t.Fatalf("err = %v, want DistNetworkError", err)
	}
	addr := regexp.QuoteMeta(net.JoinHostPort("127.0.0.1", itoa(port)))
	any := `The client socket has failed to connect to any network address of \(127\.0\.0\.1, ` + itoa(port) + `\)\.`
	for _, re := range []string{
		`(?m)^\[W\d{4} \d\d:\d\d:\d\d\.\d{9} socket\.cpp:764\] \[c10d\] The client socket has failed to connect to \[[0-9a-f:]+\]:\d+ \(errno: 111 - Connection refused\)\.$`,
		`(?m)^\[W\d{4} \d\d:\d\d:\d\d\.\d{9} socket\.cpp:764\] \[c10d\] The client socket has failed to connect to 0\.0\.0\.0:\d+ \(errno: 111 - Connection refused\)\.$`,
		`(?m)^\[E\d{4} \d\d:\d\d:\d\d\.\d{9} socket\.cpp:818\] \[c10d\] ` + any + `$`,
		`(?m)^\[W\d{4} \d\d:\d\d:\d\d\.\d{9} TCPStore\.cpp:340\] \[c10d\] TCP client failed to connect/validate to host ` + addr + ` - retrying \(try=0, timeout=400ms, delay=\d+ms\): ` + any + ` The client socket has failed to connect to 0\.0\.0\.0:\d+ \(errno: 111 - Connection refused\)\.$`,
		`(?m)^\[E\d{4} \d\d:\d\d:\d\d\.\d{9} TCPStore\.cpp:328\] \[c10d\] TCP client failed to connect/validate to host ` + addr + ` - timed out \(try=\d+, timeout=400ms\): ` + any + ` The client socket has failed to connect to 0\.0\.0\.0:\d+$`,
		`(?m)^Exception raised from run at /pytorch/torch/csrc/distributed/c10d/socket\.cpp:820 \(most recent call first\):$`,
	} {
		if !regexp.MustCompile(re).MatchString(b.String()) {
			t.Errorf("log lacks %s\n%s", re, b)
		}
	}
	if !regexp.MustCompile(`^` + any + ` The client socket has failed to connect to 0\.0\.0\.0:\d+ \(errno: 111 - Connection refused\)\.$`).MatchString(pe.Msg) {
		t.Errorf("message %q", pe.Msg)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestServerTimesOutWaitingForClients(t *testing.T) {
	e, _ := testEnv()
	_, err := Rendezvous(context.Background(), e, "127.0.0.1", freePort(t), 0, 2, 100*time.Millisecond)
	var pe *PyError
	if !errors.As(err, &pe) || pe.Error() != "torch.distributed.DistStoreError: Timed out after 1 seconds waiting for clients. 1/2 clients joined." {
		t.Errorf("err = %v", err)
	}
}

// real-outputs.md: NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME naming an
// interface that does not exist. The capture there leaves out the line
// torch's getNcclErrorDetailStr puts before "Last error:"
// ("ncclInvalidUsage: This usually reflects invalid usage of NCCL
// library.", pytorch NCCLUtils.cpp; quoted in vLLM issue logs).
func TestMissingInterfaces(t *testing.T) {
	ifaces, err := netx.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if err := GlooCheck("eth9", ifaces); err == nil || err.Error() != "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: eth9" {
		t.Errorf("gloo: %v", err)
	}
	if err := GlooCheck("lo", ifaces); err != nil {
		t.Errorf("gloo lo: %v", err)
	}
	e, b := testEnv()
	err = NCCLInit(context.Background(), e, NCCLConfig{SocketIfname: "eth9", Debug: "INFO"}, nil, 0, 2, 0, time.Second)
	want := "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3135, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\nBootstrap : no socket interface found"
	if err == nil || err.Error() != want {
		t.Errorf("nccl error:\n%v\nwant:\n%s", err, want)
	}
	for _, line := range []string{"vm:1004:1004 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth9", "vm:1004:1004 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, b)
		}
	}
}
