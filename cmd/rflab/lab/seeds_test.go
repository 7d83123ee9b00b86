//go:build linux

package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/resources/diagnose"
)

// The seeds (shared/seeds/) are an engineer bringing up Qwen3.5-122B on two
// DGX Sparks with plain docker, ray and vllm over SSH. These tests do the
// same against the lab, with simnode playing Ray and vLLM, and check that
// each failure of the seeds happens here for the same reason, and that each
// fix fixes it.

const seedModel = "Qwen/Qwen3.5-122B-A10B-FP8"

// seedRun is one attempt of the seeds' launch script.
type seedRun struct {
	image string
	// pin is the seeds' fix: --node-ip-address, VLLM_HOST_IP and the
	// NCCL/Gloo interface on the fabric.
	pin bool
	// monitorOff sets RAY_memory_monitor_refresh_ms=0 in `ray start`'s env.
	monitorOff bool
	util       string
	// tp is --tensor-parallel-size (default 2, the seeds').
	tp int
}

// startRay starts the Ray head and worker containers as the seeds' script
// did and returns the node IPs Ray registered.
func (r seedRun) startRay(t *testing.T, l *Lab) []string {
	t.Helper()
	for _, n := range l.Nodes {
		sshOK(t, l, n.Name, "docker rm -f ray-node >/dev/null 2>&1; true")
	}
	head := l.Nodes[0]
	for _, n := range l.Nodes {
		env := ""
		start := "ray start --head --port=6379 --block"
		if !n.Head {
			start = "ray start --address=" + head.FabricIP + ":6379 --block"
		}
		if r.pin {
			env += fmt.Sprintf(" -e VLLM_HOST_IP=%s -e NCCL_SOCKET_IFNAME=%s -e GLOO_SOCKET_IFNAME=%s", n.FabricIP, n.FabricIfname, n.FabricIfname)
			start = strings.Replace(start, " --block", " --node-ip-address="+n.FabricIP+" --block", 1)
		}
		if r.monitorOff {
			env += " -e RAY_memory_monitor_refresh_ms=0"
		}
		sshOK(t, l, n.Name, fmt.Sprintf("docker run -d --name ray-node --gpus all --network host --shm-size 10.24g%s %s bash -c '%s'",
			env, r.image, start))
		if n.Head {
			// Workers join once the head's GCS answers.
			waitLab(t, "Ray head", func() error {
				out, err := sshErr(t, l, head.Name, "docker exec ray-node ray status")
				if err != nil {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			})
		}
	}
	var ips []string
	waitLab(t, "both Ray nodes", func() error {
		out, err := sshErr(t, l, head.Name, "docker exec ray-node ray list nodes --format json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		var nodes []struct {
			NodeIP string `json:"node_ip"`
			IsHead bool   `json:"is_head_node"`
			State  string `json:"state"`
		}
		if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &nodes); err != nil {
			return fmt.Errorf("parse %q: %v", out, err)
		}
		ips = ips[:0]
		for _, n := range nodes {
			if n.State == "ALIVE" {
				if n.IsHead {
					ips = append([]string{n.NodeIP}, ips...)
				} else {
					ips = append(ips, n.NodeIP)
				}
			}
		}
		if len(ips) != len(l.Nodes) {
			return fmt.Errorf("%d alive nodes: %s", len(ips), out)
		}
		return nil
	})
	return ips
}

// serve runs `vllm serve` with TP=2 in the head container, as the seeds
// did, and waits until it is up or has failed; it returns the log.
func (r seedRun) serve(t *testing.T, l *Lab) (string, bool) {
	t.Helper()
	head := l.Nodes[0].Name
	tp := r.tp
	if tp == 0 {
		tp = 2
	}
	sshOK(t, l, head, "docker exec -d ray-node bash -c 'vllm serve "+seedModel+
		fmt.Sprintf(" --tensor-parallel-size %d", tp)+" --distributed-executor-backend ray --gpu-memory-utilization "+r.util+
		" --max-model-len 32768 --port 8000 > /tmp/serve.log 2>&1'")
	var log string
	var up bool
	waitLab(t, "vllm serve", func() error {
		out, err := sshErr(t, l, head, "docker exec ray-node cat /tmp/serve.log")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		log = out
		switch {
		case strings.Contains(out, "Application startup complete"):
			up = true
			return nil
		case strings.Contains(out, "Engine core initialization failed"):
			return nil
		}
		return fmt.Errorf("still starting:\n%s", lastLines(out, 5))
	})
	return log, up
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitLab polls check, a second apart, for up to three minutes. Each check
// runs a command in a node's container over SSH, most of them the ray CLI
// (a Python process, seconds of CPU): polled back to back, as waitFor's
// short intervals would, a few waiting tests fill this machine's cores and
// slow the Ray they wait for.
func waitLab(t *testing.T, what string, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not ready after 3m: %v", what, err)
		case <-time.After(time.Second):
		}
	}
}

// complete asks the server on the head for a completion from the client
// namespace.
func complete(t *testing.T, l *Lab) string {
	t.Helper()
	body := `{"model": "` + seedModel + `", "prompt": "The capital of France is", "max_tokens": 5}`
	resp, err := l.clientHTTP().Post("http://"+l.Nodes[0].MgmtIP+":8000/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("completion: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: %s: %s", resp.Status, b)
	}
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Object != "text_completion" || len(out.Choices) != 1 {
		t.Fatalf("completion response %s: %v", b, err)
	}
	return out.Choices[0].Text
}

func TestSeeds(t *testing.T) {
	l := upLab(t, Config{Name: testLabName("rfl-seeds"), Timing: map[string]string{
		"weight_load": "2s", "graph_capture": "1s", "c10d_timeout": "6s",
		"placement_group_timeout": "20s", "tokens_per_second": "1000",
	}})
	ray := strings.Split(ImageRayVLLM, ":")[0]
	c10d := regexp.MustCompile(`\[c10d\] The client socket has failed to connect to any network address of \(10\.1\.230\.180, \d+\)`)
	oom := regexp.MustCompile(`(Task was|worker\(s\) were) killed due to the node running low on memory[\s\S]*\(0\.9\d+\), which exceeds the memory usage threshold of 0\.95`)

	t.Run("1 auto-detected head address: c10d cannot reach it", func(t *testing.T) {
		r := seedRun{image: ray, util: "0.90"}
		ips := r.startRay(t, l)
		if ips[0] != "10.1.230.180" || ips[1] != "192.168.200.13" {
			t.Errorf("Ray registered %v, want the head under its management address 10.1.230.180 and the worker as 192.168.200.13", ips)
		}
		log, up := r.serve(t, l)
		if up || !c10d.MatchString(log) || !strings.Contains(log, "Engine core initialization failed") {
			t.Errorf("vllm serve (up=%v) log lacks the c10d failure to 10.1.230.180:\n%s", up, lastLines(log, 30))
		}
		// rayform's classifier names the root cause from this real log.
		d := diagnose.Classify(diagnose.Input{Logs: []diagnose.Log{{Host: "spark1", Source: "vllm serve log", Text: []byte(log)}}, Context: seedContext(false)})
		if d.Cause != diagnose.C10dUnreachable || !strings.Contains(d.Text(), "10.1.230.180") {
			t.Errorf("classified as %s, want %s naming 10.1.230.180:\n%s", d.Cause, diagnose.C10dUnreachable, d.Text())
		}
	})

	t.Run("2 fabric pinned: serves and completes", func(t *testing.T) {
		r := seedRun{image: ray, pin: true, util: "0.85"}
		if ips := r.startRay(t, l); ips[0] != "192.168.200.12" || ips[1] != "192.168.200.13" {
			t.Errorf("Ray registered %v, want the fabric addresses", ips)
		}
		log, up := r.serve(t, l)
		if !up {
			t.Fatalf("vllm serve did not come up:\n%s", lastLines(log, 30))
		}
		if text := complete(t, l); text == "" {
			t.Error("empty completion")
		}
	})

	t.Run("3 memory monitor on, 0.90 of unified memory: Ray OOM kill", func(t *testing.T) {
		r := seedRun{image: ray, pin: true, util: "0.90"}
		r.startRay(t, l)
		log, up := r.serve(t, l)
		if up || !oom.MatchString(log) || !strings.Contains(log, "Engine core initialization failed") {
			t.Errorf("vllm serve (up=%v) log lacks Ray's OOM kill and the engine failure:\n%s", up, lastLines(log, 30))
		}
		d := diagnose.Classify(diagnose.Input{Logs: []diagnose.Log{{Host: "spark1", Source: "vllm serve log", Text: []byte(log)}}, Context: seedContext(true)})
		if d.Cause != diagnose.RayOOM || !strings.Contains(d.Text(), "memory_monitor = false") {
			t.Errorf("classified as %s, want %s with the memory_monitor fix:\n%s", d.Cause, diagnose.RayOOM, d.Text())
		}
	})

	t.Run("4 memory monitor off: serves", func(t *testing.T) {
		r := seedRun{image: ray, pin: true, monitorOff: true, util: "0.90"}
		r.startRay(t, l)
		log, up := r.serve(t, l)
		if !up {
			t.Fatalf("vllm serve did not come up:\n%s", lastLines(log, 30))
		}
		if strings.Contains(log, "low on memory") {
			t.Errorf("memory monitor killed a task with RAY_memory_monitor_refresh_ms=0:\n%s", lastLines(log, 30))
		}
		complete(t, l)
	})

	t.Run("5 image without Ray: ray not found", func(t *testing.T) {
		out, err := sshErr(t, l, "spark1", "docker rm -f ray-node >/dev/null 2>&1; docker run --name ray-node --gpus all --network host --entrypoint /bin/bash "+
			ImageNoRay+" -c 'ray start --head --port=6379 --block'; echo exit=$?")
		if err != nil || !strings.Contains(out, "ray: not found") || !strings.Contains(out, "exit=127") {
			t.Errorf("ray in %s: err=%v\n%s\nwant `ray: not found` and exit 127", ImageNoRay, err, out)
		}
	})
}

// seedContext is what rayform would know about the seeds' topology when it
// classifies a failure.
func seedContext(monitor bool) diagnose.Context {
	return diagnose.Context{
		FabricCIDR:           netip.MustParsePrefix("192.168.200.0/24"),
		FabricInterface:      "enp1s0f1np1",
		NodeAddrs:            map[string]string{"spark1": "192.168.200.12", "spark2": "192.168.200.13"},
		MgmtAddrs:            map[string]string{"spark1": "10.1.230.180", "spark2": "10.1.230.181"},
		HeadNode:             "spark1",
		RayPort:              6379,
		MemoryMonitorOn:      monitor,
		UnifiedMemory:        true,
		GPUMemoryUtilization: 0.90,
		Cluster:              "ray_cluster.spark",
		Network:              "network.fabric",
		Serve:                "vllm_serve.qwen",
	}
}
