package kindstest

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/serve"
)

// benchProject is the project label of the synthetic cluster.
const benchProject = "bench"

// benchConfig renders n GPU servers in the shape of examples/h100-4x8-pp
// (the same shape as engine/config's BenchmarkLoad64): one node block with
// for_each, a fabric network, one Ray cluster of every node, one vllm_serve
// with a pipeline stage per node.
func benchConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("variable \"hosts\" {\n  type = map(string)\n  default = {\n")
	for i := range n {
		fmt.Fprintf(&b, "    h%d = \"10.1.%d.%d\"\n", i+1, 230+i/200, 10+i%200)
	}
	b.WriteString("  }\n}\n\n")
	b.WriteString(`variable "hf_token" {
  type      = string
  default   = "hf_not_a_real_token"
  sensitive = true
}

node "gpu" {
  for_each = var.hosts

  host          = each.value
  user          = "root"
  identity_file = "/root/.ssh/id_ed25519"
  gpus          = 8
}

network "fabric" {
  cidr      = "192.168.0.0/16"
  interface = "ib0"
  mtu       = 4092
}

ray_cluster "main" {
  image          = "vllm/vllm-openai:v0.11.0"
  head           = node.gpu["h1"]
  workers        = [for k, n in node.gpu : n if k != "h1"]
  network        = network.fabric
  shm_size       = "64g"
  memory_monitor = false
  env = {
    HF_TOKEN = var.hf_token
  }
}

vllm_serve "llama" {
  cluster                = ray_cluster.main
  model                  = "meta-llama/Llama-3.1-405B-Instruct-FP8"
  served_model_name      = "llama-405b"
  tensor_parallel_size   = 8
  pipeline_parallel_size = length(var.hosts)
  max_model_len          = 32768
}

output "endpoint" {
  value = vllm_serve.llama.endpoint
}
`)
	return []byte(b.String())
}

// converged is a configuration and the facts of a cluster that matches it:
// what rayform plan sees on a converged cluster after observing it.
type converged struct {
	loaded *Blocks // as loaded, before facts
	addrs  map[string]netip.Addr
	facts  *observe.Facts
}

// convergedCluster loads benchConfig(n) and builds, in Go and without I/O,
// the observed facts of every host of a running cluster: fabric links and
// addresses, 8 GPUs, docker, rayform's labelled container, routes to every
// peer, and on the head Ray's node table, the serve record and vLLM's
// health.
func convergedCluster(tb testing.TB, n int) converged {
	tb.Helper()
	return convergedFrom(tb, benchConfig(n), nil)
}

// convergedFrom is convergedCluster of the configuration src, whose
// containers and serve were made with the secret-digest keys keys (nil: by
// a rayform that digested secrets unkeyed).
func convergedFrom(tb testing.TB, src []byte, keys map[string][]byte) converged {
	tb.Helper()
	loaded, diags := LoadFiles(map[string][]byte{"main.hcl": src}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		tb.Fatalf("bench config: %s", diags.Error())
	}
	rc := loaded.RayClusters["main"]
	nodes := rc.Nodes()
	addrs := map[string]netip.Addr{}
	ifaces := map[string]string{}
	for i, node := range nodes {
		addrs[node] = netip.AddrFrom4([4]byte{192, 168, byte(i / 250), byte(10 + i%250)})
		ifaces[node] = "ib0"
	}
	cfg, diags := loaded.WithFacts(Facts{FabricAddrs: addrs})
	if diags.HasErrors() {
		tb.Fatalf("bench config with facts: %s", diags.Error())
	}
	cfg.SetSecretKeys(keys)
	rc = cfg.RayClusters["main"]
	specs := cluster.ClusterSpecs(cluster.View(cfg.Config), rc, addrs, ifaces)
	sv := cfg.Serves["llama"]
	svSpec, err := serve.ServeSpecFor(serve.View(cfg.Config), sv)
	if err != nil {
		tb.Fatal(err)
	}
	facts := &observe.Facts{Hosts: map[string]*observe.HostFacts{}, Errors: map[string]error{}, RoundTrips: map[string]int{}}
	up := []string{"BROADCAST", "MULTICAST", "UP", "LOWER_UP"}
	var rayNodes []cluster.RayNode
	for i, spec := range specs {
		node := spec.Node
		mgmt := netip.MustParseAddr(cfg.Nodes[node].Host)
		hf := &observe.HostFacts{
			Host: node, Complete: true, Hostname: fmt.Sprintf("gpu%02d", i), Arch: "x86_64",
			Links: observe.LinkFacts{List: []observe.Link{
				{Index: 1, Name: "lo", MTU: 65536, OperState: "UNKNOWN", Flags: []string{"LOOPBACK", "UP", "LOWER_UP"}},
				{Index: 2, Name: "eth0", MTU: 1500, OperState: "UP", Flags: up},
				{Index: 3, Name: "ib0", MTU: 4092, OperState: "UP", Flags: up, LinkType: "infiniband"},
			}},
			Addresses: observe.AddressFacts{List: []observe.Address{
				{Interface: "lo", Prefix: netip.MustParsePrefix("127.0.0.1/8"), Scope: "host"},
				{Interface: "eth0", Prefix: netip.PrefixFrom(mgmt, 24), Scope: "global"},
				{Interface: "ib0", Prefix: netip.PrefixFrom(addrs[node], 16), Scope: "global"},
			}},
			Routes: observe.RouteFacts{List: []observe.Route{
				{Dst: "default", Gateway: netip.MustParseAddr("10.1.230.1"), Dev: "eth0"},
				{Dst: "192.168.0.0/16", Dev: "ib0", PrefSrc: addrs[node], Protocol: "kernel", Scope: "link"},
			}},
			DefaultRoute: observe.DefaultRoute{Src: mgmt, Dev: "eth0", Gateway: netip.MustParseAddr("10.1.230.1")},
			Memory:       observe.Memory{TotalBytes: 2 << 40, AvailableBytes: 1 << 40},
			Docker:       observe.Docker{Installed: true, Available: true, ClientVersion: "26.1.5", ServerVersion: "26.1.5"},
			Images: []observe.Image{{Ref: spec.Image, Present: true, ID: "sha256:" + strings.Repeat("ab", 32),
				RepoTags: []string{spec.Image}, Arch: "amd64"}},
		}
		for g := range 8 {
			hf.GPUs.List = append(hf.GPUs.List, observe.GPU{Index: g, Name: "NVIDIA H100 80GB HBM3",
				UUID: fmt.Sprintf("GPU-%08x-%04x", i, g), MemoryTotalMiB: 81559, MemoryUsedMiB: 70000, MemoryFreeMiB: 11559, Driver: "550.54.15"})
		}
		env := map[string]string{}
		for k, v := range spec.Env {
			env[k] = v
		}
		for _, k := range spec.SecretEnv {
			env[k] = observe.RedactedValue
		}
		labels := spec.Labels(benchProject)
		hf.Containers.List = []observe.Container{{
			ID: fmt.Sprintf("%064x", i+1), Name: spec.Name, Image: spec.Image, ImageID: "sha256:" + strings.Repeat("ab", 32),
			Status: "Up 2 hours", State: "running", Running: true, Labels: labels,
			Resource: labels[cluster.LabelResource], SpecHash: labels[cluster.LabelSpecHash], Env: env,
			Entrypoint: []string{"/bin/sh", "-c"}, Cmd: spec.RayStartArgs(), NetworkMode: "host", IpcMode: "host", GPUs: true,
		}}
		for _, peer := range nodes {
			if peer != node {
				hf.RouteChecks = append(hf.RouteChecks, observe.RouteCheck{Peer: peer, Addr: addrs[peer], Dev: "ib0", Src: addrs[node]})
			}
		}
		rayNodes = append(rayNodes, cluster.RayNode{NodeID: fmt.Sprintf("%056x", i+1), NodeIP: spec.NodeIP, IsHead: i == 0,
			State: "ALIVE", NodeName: spec.NodeIP, Resources: map[string]float64{"CPU": 224, "GPU": 8, "memory": 1.5e12}})
		facts.Hosts[node] = hf
		facts.RoundTrips[node] = 2
	}
	head := facts.Hosts[rc.Head]
	setRayTable(head, benchDashPort, cluster.RayNodeFacts{Source: "dashboard", List: rayNodes})
	setServeAnswer(head, benchServePort, serve.VLLM{Observed: true, Health: observe.HTTPCheck{Status: 200}, ModelsCheck: observe.HTTPCheck{Status: 200},
		Models: []serve.Model{{ID: svSpec.ServedName, Root: sv.Model, MaxModelLen: sv.MaxModelLen, OwnedBy: "vllm"}}})
	attrs := map[string]string{}
	for k, v := range svSpec.Attrs {
		attrs[k] = string(v)
	}
	head.Records = map[string]observe.ProcessRecord{"serve-" + sv.Name: {Found: true, Resource: sv.Addr, SpecHash: svSpec.Hash(), Attrs: attrs, Sensitive: svSpec.Sensitive, Alive: true}}
	return converged{loaded: loaded, addrs: addrs, facts: facts}
}

// planConfig loads src and evaluates it with the fabric addresses facts
// show, as rayform plan does before planning.
func planConfig(tb testing.TB, src string, facts *observe.Facts) *Blocks {
	tb.Helper()
	loaded, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		tb.Fatalf("config: %s", diags.Error())
	}
	addrs, _ := cluster.FabricAddrs(cluster.View(loaded.Config), facts)
	cfg, diags := loaded.WithFacts(Facts{FabricAddrs: addrs})
	if diags.HasErrors() {
		tb.Fatalf("config with facts: %s", diags.Error())
	}
	return cfg
}

// checkNoChanges fails unless the plan is empty and error-free: the
// benchmarks must measure the converged path, not an early exit.
func checkNoChanges(tb testing.TB, p *plan.Plan) {
	tb.Helper()
	if p.HasChanges() || len(p.Errors()) > 0 || len(p.Drift) > 0 {
		var lines []string
		for _, ch := range p.Changes {
			lines = append(lines, fmt.Sprintf("%s %s %v", ch.Action, ch.Address, ch.Reasons))
		}
		for _, f := range p.Findings {
			lines = append(lines, fmt.Sprintf("finding %s: %s", f.Severity, f.Summary))
		}
		for _, d := range p.Drift {
			lines = append(lines, "drift "+d.Address+": "+d.Summary)
		}
		tb.Fatalf("synthetic converged cluster does not plan empty:\n%s", strings.Join(lines, "\n"))
	}
}

// BenchmarkPlan64 is Plan on a converged 64-node cluster: the pure
// planning step, given the configuration evaluated with the observed facts.
func BenchmarkPlan64(b *testing.B) {
	c := convergedCluster(b, 64)
	cfg, diags := c.loaded.WithFacts(Facts{FabricAddrs: c.addrs})
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	in := PlanInput{Config: cfg, Facts: c.facts, Project: benchProject}
	checkNoChanges(b, Plan(in).Plan)
	b.ReportAllocs()
	for b.Loop() {
		Plan(in)
	}
}

// BenchmarkPlan64WithFacts is everything rayform plan computes between the
// last probe answer and rendering: the fabric addresses from the facts, the
// configuration re-evaluated with them (config.WithFacts), and the plan.
func BenchmarkPlan64WithFacts(b *testing.B) {
	c := convergedCluster(b, 64)
	b.ReportAllocs()
	for b.Loop() {
		addrs, _ := cluster.FabricAddrs(cluster.View(c.loaded.Config), c.facts)
		cfg, diags := c.loaded.WithFacts(Facts{FabricAddrs: addrs})
		if diags.HasErrors() {
			b.Fatal(diags.Error())
		}
		Plan(PlanInput{Config: cfg, Facts: c.facts, Project: benchProject})
	}
}

// TestConvergedClusterPlansEmpty keeps the benchmarks honest in `go test`:
// the synthetic facts describe a converged cluster, so the plan is empty.
func TestConvergedClusterPlansEmpty(t *testing.T) {
	c := convergedCluster(t, 4)
	addrs, _ := cluster.FabricAddrs(cluster.View(c.loaded.Config), c.facts)
	cfg, diags := c.loaded.WithFacts(Facts{FabricAddrs: addrs})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	checkNoChanges(t, Plan(PlanInput{Config: cfg, Facts: c.facts, Project: benchProject}).Plan)
}

// BenchmarkObserveSpec64 is what plan computes before the first probe of a
// converged 64-node cluster: the observe spec with the fabric addresses the
// state recorded, which evaluates the configuration with them to give each
// probe its containers' wanted spec hashes.
func BenchmarkObserveSpec64(b *testing.B) {
	c := convergedCluster(b, 64)
	rc := c.loaded.RayClusters["main"]
	st, err := state.New(benchProject)
	if err != nil {
		b.Fatal(err)
	}
	r := state.Resource{Type: "ray_cluster", Container: cluster.ContainerName(rc)}
	for _, node := range rc.Nodes() {
		r.Hosts = append(r.Hosts, state.Host{Node: node, FabricAddress: c.addrs[node].String(), FabricInterface: "ib0"})
	}
	st.Set(rc.Addr, r)
	if spec := ObserveSpec(c.loaded, st, benchProject); len(spec.Hosts[rc.Head].SpecHashes) != 1 {
		b.Fatalf("head spec hashes %v, want the head container's", spec.Hosts[rc.Head].SpecHashes)
	}
	b.ReportAllocs()
	for b.Loop() {
		ObserveSpec(c.loaded, st, benchProject)
	}
}
