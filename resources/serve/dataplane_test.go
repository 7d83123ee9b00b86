package serve_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/internal/steplab"
	"github.com/rayform/rayform/resources/serve"
	"github.com/rayform/rayform/resources/stepenv"
)

// Result lines as check.py prints them (torch 1.13 in the lab's image).
const (
	dpHealthy    = `RAYFORM_CHECK {"backends": {"gloo": {"addr": "%ADDR%", "algbw_gbps": 0.3, "busbw_gbps": 0.3, "bytes": 8388608, "connections": 1, "iface": "enp1s0f1np1", "iters": 5, "ok": true, "peers": ["192.168.200.12"], "time_s": 0.027}}, "env": {"GLOO_SOCKET_IFNAME": "enp1s0f1np1", "VLLM_HOST_IP": "%ADDR%"}, "link": {"iface": "enp1s0f1np1", "speed_mbps": 10000}, "master": "192.168.200.12:29417", "node": "%NODE%", "ok": true, "phase": "done", "rank": 0, "rendezvous_s": 0.5, "torch": "1.13.0a0", "version": 1, "world_size": 2}` + "\n"
	dpGlooStderr = `Traceback (most recent call last):
  File "<stdin>", line 346, in main
RuntimeError: [enforce fail at ./gloo/transport/tcp/device.cc:80] ifa != nullptr. Unable to find address for: eth9
`
	dpGlooFailed = `RAYFORM_CHECK {"env": {"GLOO_SOCKET_IFNAME": "eth9"}, "error": "RuntimeError: [enforce fail at ./gloo/transport/tcp/device.cc:80] ifa != nullptr. Unable to find address for: eth9", "master": "192.168.200.12:29417", "node": "spark2", "ok": false, "phase": "gloo", "rank": 1, "world_size": 2}` + "\n"
)

// dpConn plays one node for the check's runner: it reads check.py from
// stdin, prints the ready line, waits for "go" and answers with res.
type dpConn struct {
	t     *testing.T
	host  string
	res   transport.Result
	mu    sync.Mutex
	calls []transport.Cmd
	got   []byte // what came on stdin before "go"
}

func dpHost(t *testing.T, node, addr string, res transport.Result) *dpConn {
	r := strings.NewReplacer("%ADDR%", addr, "%NODE%", node)
	res.Stdout = []byte(r.Replace(string(res.Stdout)))
	return &dpConn{t: t, host: node, res: res}
}

func (c *dpConn) Host() string { return c.host }
func (c *dpConn) Upload(context.Context, string, []byte, uint32) error {
	return errors.New("no upload")
}
func (c *dpConn) Stats() transport.Stats { return transport.Stats{} }
func (c *dpConn) Close() error           { return nil }

func (c *dpConn) Run(ctx context.Context, cmd transport.Cmd) (transport.Result, error) {
	c.mu.Lock()
	c.calls = append(c.calls, cmd)
	c.mu.Unlock()
	script := make([]byte, len(dataplane.Script))
	if _, err := io.ReadFull(cmd.Stdin, script); err != nil {
		return transport.Result{}, err
	}
	c.got = script
	if c.res.ExitCode == 127 { // docker exec found no python3: nothing started
		return c.res, &transport.ExitError{Host: c.host, Cmd: cmd.String(), Result: c.res}
	}
	if cmd.Stdout != nil {
		fmt.Fprintln(cmd.Stdout, dataplane.ReadyLine)
	}
	line, _ := bufio.NewReader(cmd.Stdin).ReadString('\n')
	if line != "go\n" {
		res := transport.Result{ExitCode: 3, Stdout: []byte(`RAYFORM_CHECK {"ok": false, "phase": "ready", "error": "cancelled before the rendezvous"}` + "\n")}
		return res, &transport.ExitError{Host: c.host, Cmd: cmd.String(), Result: res}
	}
	if c.res.ExitCode != 0 {
		return c.res, &transport.ExitError{Host: c.host, Cmd: cmd.String(), Result: c.res}
	}
	return c.res, nil
}

func dpWork() *kind.Work {
	w := steplab.QwenWork(plan.Create, steplab.QwenServe(), false)
	serve.WorkOf(w).Check = []dataplane.Node{
		{Name: "spark1", Container: "rayform-main", Addr: netip.MustParseAddr("192.168.200.12"), Iface: "enp1s0f1np1"},
		{Name: "spark2", Container: "rayform-main", Addr: netip.MustParseAddr("192.168.200.13"), Iface: "enp1s0f1np1"},
	}
	return w
}

// TestDataplaneStep: the check runs right before vllm serve starts, every
// rank gets check.py on stdin in its Ray container; a failed rank stops
// the apply with the classifier's cause.
func TestDataplaneStep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spark2 transport.Result
		cause  diagnose.Cause // "" for success
	}{
		{"healthy", transport.Result{Stdout: []byte(dpHealthy)}, ""},
		{"gloo interface", transport.Result{ExitCode: 1, Stdout: []byte(dpGlooFailed), Stderr: []byte(dpGlooStderr)}, diagnose.GlooInterface},
		{"no python3", transport.Result{ExitCode: 127, Stderr: []byte(`OCI runtime exec failed: exec failed: unable to start container process: exec: "python3": executable file not found in $PATH: unknown`)}, "dataplane-no-torch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f1 := dpHost(t, "spark1", "192.168.200.12", transport.Result{Stdout: []byte(dpHealthy)})
			f2 := dpHost(t, "spark2", "192.168.200.13", tc.spark2)
			env := &stepenv.StepEnv{Conns: map[string]transport.Conn{"spark1": f1, "spark2": f2}, Diagnose: diagnose.Context{Cluster: "ray_cluster.main"}}
			steps := serve.StepsWith(env.WithDefaults(), dpWork())
			if len(steps) < 2 || !strings.HasPrefix(steps[0].Name(), "data-plane check") || !strings.HasPrefix(steps[1].Name(), "start vllm serve") {
				var names []string
				for _, s := range steps {
					names = append(names, s.Name())
				}
				t.Fatalf("steps %q: want the data-plane check right before the serve starts", names)
			}
			var progress []string
			err := steps[0].Run(context.Background(), func(s string) { progress = append(progress, s) })
			for _, c := range []*dpConn{f1, f2} {
				if len(c.calls) != 1 || string(c.got) != string(dataplane.Script) || c.calls[0].Mutating ||
					!strings.HasPrefix(c.calls[0].String(), "docker exec -i ") || !strings.Contains(c.calls[0].String(), " rayform-main python3 -c ") {
					t.Errorf("%s: calls %v, want one read-only docker exec of python3 with check.py on stdin", c.host, c.calls)
				}
			}
			out := strings.Join(progress, "\n")
			if tc.cause == "" {
				if err != nil {
					t.Fatalf("check failed: %v", err)
				}
				if !strings.Contains(out, "spark2  gloo     192.168.200.13  enp1s0f1np1  0.50 s      0.300 GB/s  10 Gb/s  ok") || !strings.Contains(out, "data plane ok on 2 nodes") {
					t.Errorf("progress:\n%s", out)
				}
				return
			}
			var de *stepenv.DiagnosedError
			if !errors.As(err, &de) || de.Diagnosis.Cause != tc.cause {
				t.Fatalf("error %v, want a diagnosed %s", err, tc.cause)
			}
			if !strings.Contains(err.Error(), "vllm serve qwen was not started") || !strings.Contains(err.Error(), "spark2: ") {
				t.Errorf("error:\n%v", err)
			}
			if tc.name == "no python3" {
				// spark2 ended before it was ready: spark1 was cancelled
				// instead of waiting for a rendezvous that cannot happen.
				if !strings.Contains(err.Error(), "dataplane_check = false on ray_cluster.main") || !strings.Contains(err.Error(), "spark1: waiting for the other nodes failed: cancelled") {
					t.Errorf("error:\n%v", err)
				}
			}
		})
	}
}

// TestServeWithoutCheck: dataplane_check = false (or a single node) plans
// no check.
func TestServeWithoutCheck(t *testing.T) {
	steps := serve.StepsWith((&stepenv.StepEnv{}).WithDefaults(), steplab.QwenWork(plan.Create, steplab.QwenServe(), false))
	for _, s := range steps {
		if strings.Contains(s.Name(), "data-plane") {
			t.Errorf("step %q without Check", s.Name())
		}
	}
}
