package resources

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
	"github.com/rayform/rayform/resources/dataplane"
	"github.com/rayform/rayform/resources/diagnose"
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

func dpHost(t *testing.T, node, addr string, res transport.Result) *transporttest.Fake {
	f := transporttest.NewFake(t, node)
	r := strings.NewReplacer("%ADDR%", addr, "%NODE%", node)
	res.Stdout = []byte(r.Replace(string(res.Stdout)))
	f.Expect(transporttest.Contains("rayform-main python3 -")).ReturnResult(res).Times(1)
	return f
}

func dpWork() *Work {
	w := qwenWork(plan.Create, qwenServe(), false)
	w.Serve.Check = []dataplane.Node{
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
			env := &StepEnv{Conns: map[string]transport.Conn{"spark1": f1, "spark2": f2}, Diagnose: diagnose.Context{Cluster: "ray_cluster.main"}}
			steps := Steps(env, dpWork())
			if len(steps) < 2 || !strings.HasPrefix(steps[0].Name, "data-plane check") || !strings.HasPrefix(steps[1].Name, "start vllm serve") {
				var names []string
				for _, s := range steps {
					names = append(names, s.Name)
				}
				t.Fatalf("steps %q: want the data-plane check right before the serve starts", names)
			}
			var progress []string
			err := steps[0].Run(context.Background(), func(s string) { progress = append(progress, s) })
			for _, f := range []*transporttest.Fake{f1, f2} {
				c := f.Calls()
				if len(c) != 1 || string(c[0].Stdin) != string(dataplane.Script) || c[0].Cmd.Mutating {
					t.Errorf("%s: calls %s, want one read-only docker exec with check.py on stdin", f.Host(), f.Transcript())
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
			var de *DiagnosedError
			if !errors.As(err, &de) || de.Diagnosis.Cause != tc.cause {
				t.Fatalf("error %v, want a diagnosed %s", err, tc.cause)
			}
			if !strings.Contains(err.Error(), "vllm serve qwen was not started") || !strings.Contains(err.Error(), "spark2: ") {
				t.Errorf("error:\n%v", err)
			}
			if tc.name == "no python3" && !strings.Contains(err.Error(), "dataplane_check = false on ray_cluster.main") {
				t.Errorf("error:\n%v", err)
			}
		})
	}
}

// TestServeWithoutCheck: dataplane_check = false (or a single node) plans
// no check.
func TestServeWithoutCheck(t *testing.T) {
	steps := Steps(&StepEnv{}, qwenWork(plan.Create, qwenServe(), false))
	for _, s := range steps {
		if strings.Contains(s.Name, "data-plane") {
			t.Errorf("step %q without Check", s.Name)
		}
	}
}
