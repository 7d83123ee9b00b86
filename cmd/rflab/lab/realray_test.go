//go:build linux

package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/rayform/rayform/resources/diagnose"
)

// rayNode is one row of `ray list nodes --format json` (Ray 2.53).
type rayNode struct {
	NodeIP string `json:"node_ip"`
	IsHead bool   `json:"is_head_node"`
	State  string `json:"state"`
	// ResourcesTotal: counts are numbers, memory is a string ("16.436 GiB").
	ResourcesTotal map[string]any `json:"resources_total"`
}

// listRayNodes runs the real `ray list nodes` in node's ray-node container.
func listRayNodes(t *testing.T, l *Lab, node string) ([]rayNode, error) {
	t.Helper()
	out, err := sshErr(t, l, node, "docker exec ray-node ray list nodes --format json --limit 1000 2>/dev/null")
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	var nodes []rayNode
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		return nil, fmt.Errorf("ray list nodes: %v: %s", err, out)
	}
	return nodes, nil
}

// TestRealRay: with RealRay the lab's Ray image runs the real Ray 2.53.0.
// The seeds' launch without --node-ip-address makes Ray's own address
// detection register the head under its default route's (management)
// address and the worker under its address on the route to the head (the
// fabric); Ray counts each node's simulated GPU through the image's NVML
// shim, only in --gpus containers; the dashboard's /api/v0/nodes, `ray list
// nodes` and `ray stop` are Ray's.
func TestRealRay(t *testing.T) {
	if os.Getenv("RAYFORM_LAB_REAL_RAY") == "0" {
		t.Skip("RAYFORM_LAB_REAL_RAY=0")
	}
	l := upLab(t, Config{Name: testLabName("rfl-ray"), RealRay: true})
	img := ImageRayVLLM
	head, worker := l.Nodes[0], l.Nodes[1]

	if out := sshOK(t, l, head.Name, "docker run --rm "+img+" ray --version"); !strings.Contains(out, "ray, version "+RayVersion) {
		t.Errorf("ray --version in %s:\n%s\nwant ray, version %s", img, out, RayVersion)
	}
	count := `python3 -c 'from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager as M; print("gpus=%d type=%s" % (M.get_current_node_num_accelerators(), M.get_current_node_accelerator_type()))'`
	if out := sshOK(t, l, head.Name, "docker run --rm --gpus all "+img+" "+count); !strings.Contains(out, "gpus=1 type=GB10") {
		t.Errorf("Ray's GPU count in a --gpus container: %s, want gpus=1 type=GB10", out)
	}
	if out := sshOK(t, l, head.Name, "docker run --rm "+img+" "+count); !strings.Contains(out, "gpus=0 type=None") {
		t.Errorf("Ray's GPU count without --gpus: %s, want gpus=0 type=None", out)
	}

	for _, n := range l.Nodes {
		start := "ray start --head --port=6379 --block"
		if !n.Head {
			start = "ray start --address=" + head.FabricIP + ":6379 --block"
		}
		sshOK(t, l, n.Name, "docker rm -f ray-node >/dev/null 2>&1; docker run -d --name ray-node --gpus all --network host --shm-size 1g "+img+" bash -c '"+start+"'")
	}
	var nodes []rayNode
	waitLab(t, "2 ALIVE Ray nodes", func() error {
		var err error
		if nodes, err = listRayNodes(t, l, head.Name); err != nil {
			return err
		}
		alive := 0
		for _, n := range nodes {
			if n.State == "ALIVE" {
				alive++
			}
		}
		if alive != 2 {
			return fmt.Errorf("%d ALIVE nodes: %+v", alive, nodes)
		}
		return nil
	})
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].IsHead })
	if nodes[0].NodeIP != head.MgmtIP || !nodes[0].IsHead || nodes[1].NodeIP != worker.FabricIP {
		t.Errorf("Ray registered %+v, want the head under its management address %s (default route) and the worker as %s (route to the head)",
			nodes, head.MgmtIP, worker.FabricIP)
	}
	for _, n := range nodes {
		if n.ResourcesTotal["GPU"] != 1.0 || n.ResourcesTotal["node:"+n.NodeIP] != 1.0 {
			t.Errorf("node %s resources %v, want GPU 1 and node:%s", n.NodeIP, n.ResourcesTotal, n.NodeIP)
		}
	}
	if out := sshOK(t, l, head.Name, "docker logs ray-node 2>&1"); !strings.Contains(out, "Local node IP") || !strings.Contains(out, head.MgmtIP) {
		t.Errorf("head's ray start log lacks Ray's own `Local node IP: %s`:\n%s", head.MgmtIP, lastLines(out, 20))
	}

	procs := sshOK(t, l, head.Name, "docker exec ray-node ps -eo args")
	for _, p := range []string{"ray/core/src/ray/gcs/gcs_server", "ray/core/src/ray/raylet/raylet", "ray/dashboard/dashboard.py"} {
		if !strings.Contains(procs, p) {
			t.Errorf("no %s process in the head's container:\n%s", p, procs)
		}
	}
	api := sshOK(t, l, head.Name, "curl -sS http://127.0.0.1:8265/api/v0/nodes?limit=1000")
	var resp struct {
		Data struct {
			Result struct {
				Result []rayNode `json:"result"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(api), &resp); err != nil || len(resp.Data.Result.Result) != 2 {
		t.Errorf("dashboard /api/v0/nodes: %v\n%s", err, api)
	}

	// ray stop on the worker: its raylet leaves and the head sees it DEAD.
	sshOK(t, l, worker.Name, "docker exec ray-node ray stop")
	waitLab(t, "the stopped worker DEAD", func() error {
		nodes, err := listRayNodes(t, l, head.Name)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.NodeIP == worker.FabricIP && n.State == "DEAD" {
				return nil
			}
		}
		return fmt.Errorf("worker not DEAD: %+v", nodes)
	})
}

// TestSeedsRealRay: the seeds' failures on the real Ray 2.53 and real
// torch.distributed (simnode keeps only vLLM's engine phases). Ray's own
// address detection registers the head under its management address;
// vLLM's get_ip() makes it the c10d master, which the worker cannot reach:
// torch's own "[c10d] The client socket has failed to connect to any
// network address of (10.1.230.180, port)", which rayform's classifier
// names. Pinned to the fabric the serve comes up through a real Gloo
// rendezvous; a tensor-parallel size above the cluster's GPUs fails with
// vLLM's placement-group message. (The seeds' Ray OOM kill is simnode's
// only: the real memory monitor watches this machine's memory, not the
// node's simulated 119.70 GiB.)
func TestSeedsRealRay(t *testing.T) {
	if os.Getenv("RAYFORM_LAB_REAL_RAY") == "0" {
		t.Skip("RAYFORM_LAB_REAL_RAY=0")
	}
	// Each case starts its own Ray and serve, so each has its own lab and
	// the three run side by side (most of their time is Ray starting). The
	// test is parallel itself, as every test whose subtests take labs must
	// be (see upLab).
	t.Parallel()
	seedLab := func(t *testing.T, n string) *Lab {
		return upLab(t, Config{Name: testLabName("rfl-rseed" + n), RealRay: true, Timing: map[string]string{
			"weight_load": "2s", "graph_capture": "1s", "c10d_timeout": "8s",
			"placement_group_timeout": "15s", "tokens_per_second": "1000",
		}})
	}
	ray := strings.Split(ImageRayVLLM, ":")[0]
	c10d := regexp.MustCompile(`\[c10d\] The client socket has failed to connect to any network address of \(10\.1\.230\.180, \d+\)`)

	t.Run("1 auto-detected head address: c10d cannot reach it", func(t *testing.T) {
		l := seedLab(t, "1")
		r := seedRun{image: ray, util: "0.90", monitorOff: true}
		ips := r.startRay(t, l)
		if ips[0] != "10.1.230.180" || ips[1] != "192.168.200.13" {
			t.Errorf("Ray registered %v, want the head under its management address 10.1.230.180 and the worker as 192.168.200.13", ips)
		}
		log, up := r.serve(t, l)
		if up || !c10d.MatchString(log) || !strings.Contains(log, "Engine core initialization failed") {
			t.Errorf("vllm serve (up=%v) log lacks torch's c10d failure to 10.1.230.180:\n%s", up, lastLines(log, 30))
		}
		d := diagnose.Classify(diagnose.Input{Logs: []diagnose.Log{{Host: "spark1", Source: "vllm serve log", Text: []byte(log)}}, Context: seedContext(false)})
		if d.Cause != diagnose.C10dUnreachable || !strings.Contains(d.Text(), "10.1.230.180") {
			t.Errorf("classified as %s, want %s naming 10.1.230.180:\n%s", d.Cause, diagnose.C10dUnreachable, d.Text())
		}
	})

	t.Run("2 fabric pinned: real Gloo rendezvous, serves and completes", func(t *testing.T) {
		l := seedLab(t, "2")
		r := seedRun{image: ray, pin: true, util: "0.85", monitorOff: true}
		if ips := r.startRay(t, l); ips[0] != "192.168.200.12" || ips[1] != "192.168.200.13" {
			t.Errorf("Ray registered %v, want the fabric addresses", ips)
		}
		log, up := r.serve(t, l)
		if !up {
			t.Fatalf("vllm serve did not come up:\n%s", lastLines(log, 40))
		}
		// The remote rank is a real Ray actor on spark2: Ray prefixes its
		// output with its node's IP.
		if !strings.Contains(log, "(RayWorkerWrapper pid=") || !strings.Contains(log, "ip=192.168.200.13)") {
			t.Errorf("no output of the RayWorkerWrapper actor on 192.168.200.13 in the serve log:\n%s", lastLines(log, 40))
		}
		if text := complete(t, l); text == "" {
			t.Error("empty completion")
		}
	})

	t.Run("3 more GPUs than the cluster has: vLLM's placement-group error", func(t *testing.T) {
		l := seedLab(t, "3")
		r := seedRun{image: ray, pin: true, util: "0.85", monitorOff: true, tp: 3}
		r.startRay(t, l)
		log, up := r.serve(t, l)
		want := "Cannot provide a placement group requiring 3.0 GPUs"
		if up || !strings.Contains(log, "The number of required GPUs exceeds the total number of available GPUs in the placement group.") || !strings.Contains(log, want) {
			t.Errorf("vllm serve (up=%v) log lacks vLLM's warning and %q:\n%s", up, want, lastLines(log, 30))
		}
		d := diagnose.Classify(diagnose.Input{Logs: []diagnose.Log{{Host: "spark1", Source: "vllm serve log", Text: []byte(log)}}, Context: seedContext(false)})
		if d.Cause != diagnose.PlacementGroup {
			t.Errorf("classified as %s, want %s:\n%s", d.Cause, diagnose.PlacementGroup, d.Text())
		}
	})
}
