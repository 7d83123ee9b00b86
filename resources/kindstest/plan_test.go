package kindstest

import (
	"bytes"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/serve"
)

func updateGoldens() bool {
	if f := flag.Lookup("update"); f != nil {
		return f.Value.String() == "true"
	}
	return false
}

// planCase mutates a converged 3-node cluster (its configuration text, its
// observed facts, its state) and names what the plan must say.
type planCase struct {
	name   string
	config func(string) string
	facts  func(*observe.Facts, map[string]netip.Addr)
	state  func(*state.State)
	// replace is PlanInput.Replace (apply -replace).
	replace []string
	// want are lines the text rendering must contain; wantAction the
	// action of each named resource.
	want       []string
	notWant    []string
	wantAction map[string]plan.Action
	wantErrors int
}

func planCases() []planCase {
	serveOff := func(f *observe.Facts) {
		head := f.Hosts[`gpu["h1"]`]
		head.Records = nil
		setServeAnswer(head, benchServePort, serve.VLLM{Observed: true, Health: observe.HTTPCheck{Refused: true}, ModelsCheck: observe.HTTPCheck{Refused: true}})
	}
	return []planCase{
		{name: "empty-cluster",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				for _, hf := range f.Hosts {
					hf.Containers.List = nil
				}
				head := f.Hosts[`gpu["h1"]`]
				setRayTable(head, benchDashPort, cluster.RayNodeFacts{Err: "connection refused"})
				serveOff(f)
			},
			want:       []string{`# ray_cluster.main will be created`, `# vllm_serve.llama will be created`, "Plan: 2 to add, 0 to change, 0 to destroy."},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.Create, "vllm_serve.llama": plan.Create}},
		// Values derived from the sensitive token through templates,
		// functions, a local and a for expression, in the arguments that
		// take secrets (env, api_key) and in a sensitive output: every one
		// is masked in the text and in -json (issue 23, item 6).
		{name: "sensitive-derived",
			config: func(s string) string {
				s = strings.Replace(s, "    HF_TOKEN = var.hf_token\n", "    HF_TOKEN = var.hf_token\n    AUTH     = \"Bearer ${upper(var.hf_token)}\"\n    DERIVED  = local.derived[0]\n    PLAIN    = \"plain\"\n", 1)
				s = strings.Replace(s, "  max_model_len          = 32768\n", "  max_model_len          = 32768\n  api_key                = trimspace(format(\"%s\", var.hf_token))\n  env                    = { TOKEN = join(\"-\", [\"t\", var.hf_token]) }\n", 1)
				return s + `
locals {
  derived = [for t in [var.hf_token] : "x-${t}"]
}

output "auth" {
  value     = "Bearer ${var.hf_token}"
  sensitive = true
}
`
			},
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				for _, hf := range f.Hosts {
					hf.Containers.List = nil
				}
				setRayTable(f.Hosts[`gpu["h1"]`], benchDashPort, cluster.RayNodeFacts{Err: "connection refused"})
				serveOff(f)
			},
			want: []string{`+ "AUTH"     = (sensitive value)`, `+ "DERIVED"  = (sensitive value)`, `+ "HF_TOKEN" = (sensitive value)`,
				`+ "PLAIN"    = "plain"`, `+ api_key                = (sensitive value)`, `+ "TOKEN" = (sensitive value)`, `+ auth     = (sensitive value)`},
			notWant:    []string{"Bearer", "x-hf"},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.Create, "vllm_serve.llama": plan.Create}},
		{name: "converged",
			want:       []string{"No changes. Your infrastructure matches the configuration."},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.NoOp, "vllm_serve.llama": plan.NoOp}},
		{name: "drifted-head-ip",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				head := f.Hosts[`gpu["h1"]`]
				table := rayTable(head, benchDashPort)
				table.List[0].NodeIP = "10.1.230.10"
				setRayTable(head, benchDashPort, table)
			},
			want: []string{"Objects have changed outside of rayform", "ray head registered as 10.1.230.10; want 192.168.0.10",
				"# ray_cluster.main must be replaced", "# vllm_serve.llama must be replaced"},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.Replace, "vllm_serve.llama": plan.Replace}},
		{name: "changed-image",
			config: func(s string) string {
				return strings.Replace(s, "vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.12.0", 1)
			},
			want:       []string{`~ image = "vllm/vllm-openai:v0.11.0" -> "vllm/vllm-openai:v0.12.0" # forces replacement`, "the container spec on gpu[\"h1\"] changed: image"},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.Replace, "vllm_serve.llama": plan.Replace}},
		{name: "changed-serve-args",
			config: func(s string) string {
				return strings.Replace(s, "max_model_len          = 32768", "max_model_len          = 16384", 1)
			},
			want:       []string{"the serve arguments changed", "~ max_model_len = 32768 -> 16384 # forces replacement"},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.NoOp, "vllm_serve.llama": plan.Replace}},
		{name: "removed-worker",
			config: func(s string) string {
				s = strings.Replace(s, "pipeline_parallel_size = length(var.hosts)", "pipeline_parallel_size = 2", 1)
				return strings.Replace(s, `workers        = [for k, n in node.gpu : n if k != "h1"]`, `workers        = [for k, n in node.gpu : n if k != "h1" && k != "h3"]`, 1)
			},
			want:       []string{`gpu["h3"] is no longer a worker`, "# ray_cluster.main will be updated in-place"},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.Update}},
		{name: "removed-resource",
			config: func(s string) string {
				i := strings.Index(s, `vllm_serve "llama"`)
				return s[:i] + "output \"address\" {\n  value = ray_cluster.main.address\n}\n"
			},
			state: func(st *state.State) {
				st.Set("vllm_serve.llama", state.Resource{Type: "vllm_serve", Container: "rayform-main", Hosts: []state.Host{{Node: `gpu["h1"]`, Host: "10.1.230.10"}}})
			},
			want:       []string{"# vllm_serve.llama will be destroyed", "not in the configuration any more", "Plan: 0 to add, 0 to change, 1 to destroy."},
			wantAction: map[string]plan.Action{"vllm_serve.llama": plan.Delete, "ray_cluster.main": plan.NoOp}},
		{name: "missing-fabric-address",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				hf := f.Hosts[`gpu["h2"]`]
				hf.Addresses.List = hf.Addresses.List[:2]
			},
			want:       []string{`Error: gpu["h2"] has no address in 192.168.0.0/16`, "sudo ip addr add 192.168.0.1/16 dev ib0"},
			wantErrors: 1},
		{name: "asymmetric-routing",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				hf := f.Hosts[`gpu["h2"]`]
				hf.RouteChecks[0].Dev = "eth0"
			},
			want:       []string{`Error: gpu["h2"] routes to gpu["h1"] (192.168.0.10) via eth0, not the fabric interface ib0`, "asymmetric routing"},
			wantErrors: 1},
		// A fabric port with its interface administratively up but no
		// link (cable, switch port: the kernel's NO-CARRIER) is not fixed
		// by "ip link set up"; one set down is.
		{name: "fabric-no-carrier",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				setLink(f.Hosts[`gpu["h2"]`], "ib0", "DOWN", "NO-CARRIER", "BROADCAST", "MULTICAST", "UP")
			},
			want:       []string{`Error: fabric interface ib0 is down on gpu["h2"]`, "no carrier on ib0: check the cable and the switch port"},
			notWant:    []string{"ip link set ib0 up"},
			wantErrors: 1},
		{name: "fabric-admin-down",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				setLink(f.Hosts[`gpu["h2"]`], "ib0", "DOWN", "BROADCAST", "MULTICAST")
			},
			want:       []string{`Error: fabric interface ib0 is down on gpu["h2"]`, "sudo ip link set ib0 up"},
			notWant:    []string{"no carrier"},
			wantErrors: 1},
		{name: "memory-monitor-on-uma",
			config: func(s string) string {
				s = strings.Replace(s, "memory_monitor = false", "memory_monitor = true", 1)
				return strings.Replace(s, "max_model_len          = 32768", "max_model_len          = 32768\n  gpu_memory_utilization = 0.90", 1)
			},
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				for _, hf := range f.Hosts {
					hf.UnifiedMemory = true
					hf.Memory.TotalBytes = 122572 << 20 // 119.70 GiB, a DGX Spark
				}
			},
			want:       []string{"Error: Ray's memory monitor is on for unified memory", "vLLM will take 0.90 × 119.70 = 107.73 GiB", "memory_monitor = false"},
			wantErrors: 1},
		{name: "replace-serve", replace: []string{"vllm_serve.llama"},
			want:       []string{"# vllm_serve.llama must be replaced", "replacement requested with -replace", "Plan: 1 to add, 0 to change, 1 to destroy."},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.NoOp, "vllm_serve.llama": plan.Replace}},
		{name: "replace-cluster", replace: []string{"ray_cluster.main"},
			want:       []string{"# ray_cluster.main must be replaced", "replacement requested with -replace", "its Ray cluster is replaced"},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.Replace, "vllm_serve.llama": plan.Replace}},
		// A worker's container exited: restarting it alone would leave the
		// serve that spans it broken on real vLLM, so the serve is replaced
		// too.
		{name: "worker-exited",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				hf := f.Hosts[`gpu["h3"]`]
				for i := range hf.Containers.List {
					c := &hf.Containers.List[i]
					c.Running, c.State, c.ExitCode, c.Status = false, "exited", 137, "Exited (137) 1 minute ago"
				}
			},
			// The drift names the node where the problem is, not the head.
			want: []string{`# on gpu["h3"]: container rayform-main on gpu["h3"] is exited`, "# ray_cluster.main will be updated in-place", "# vllm_serve.llama must be replaced",
				`its Ray cluster restarts or removes a node it spans (gpu["h3"])`},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.Update, "vllm_serve.llama": plan.Replace}},
		// A second deployment on the same nodes holds the ports: plan
		// names the holders instead of apply failing to bind.
		{name: "ports-taken",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				for _, hf := range f.Hosts {
					hf.Containers.List = nil
				}
				head := f.Hosts[`gpu["h1"]`]
				setRayTable(head, benchDashPort, cluster.RayNodeFacts{Err: "connection refused"})
				serveOff(f)
				head.Listening = observe.ListenFacts{List: []observe.Listener{
					{Port: 6379, Addr: "0.0.0.0:6379", Process: "gcs_server", PID: 4242},
					{Port: 8000, Addr: "0.0.0.0:8000", Process: "python3", PID: 777},
				}}
			},
			want: []string{`Error: port 6379 on gpu["h1"] is already in use`, `0.0.0.0:6379 by gcs_server (pid 4242)`,
				"set port = <a free port> on ray_cluster.main",
				`Error: port 8000 on gpu["h1"] is already in use`, "set port = <a free port> on vllm_serve.llama"},
			wantErrors: 2},
		// The head's container has exited while one of its processes still
		// holds Ray's port (seen after an interrupted run's docker run was
		// ended): apply removes that container before its replacement
		// starts, so its own ports are not "in use" to the replacement.
		{name: "ports-held-by-own-exited-container",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				head := f.Hosts[`gpu["h1"]`]
				for i := range head.Containers.List {
					c := &head.Containers.List[i]
					c.Running, c.State, c.ExitCode, c.Status = false, "exited", 143, "Exited (143) 1 second ago"
				}
				head.Listening = observe.ListenFacts{List: []observe.Listener{
					{Port: 6379, Addr: "*:6379", Process: "gcs_server", PID: 4242, Container: "rayform-main"},
				}}
			},
			want:    []string{"# ray_cluster.main must be replaced"},
			notWant: []string{"already in use"}},
		// A host that cannot be observed: an error, and counted in the
		// summary a drift cron alerts on.
		{name: "unreachable-worker",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				delete(f.Hosts, `gpu["h3"]`)
				f.Errors = map[string]error{`gpu["h3"]`: errors.New(`connect root@10.1.230.12:22: dial tcp 10.1.230.12:22: connect: no route to host`)}
			},
			want:       []string{`Error: cannot observe gpu["h3"]`},
			wantErrors: 1},
		// A serve that listens but does not answer /health is hung: drift,
		// repaired by replacing it; not "still starting".
		{name: "hung-serve",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				head := f.Hosts[`gpu["h1"]`]
				v := serveAnswer(head, benchServePort)
				v.Health = observe.HTTPCheck{TimedOut: true, Err: "curl: (28) Operation timed out after 2002 milliseconds with 0 bytes received"}
				v.ModelsCheck = v.Health
				setServeAnswer(head, benchServePort, v)
			},
			want:       []string{"Objects have changed outside of rayform", "the vllm serve process runs but is hung", "# vllm_serve.llama must be replaced"},
			notWant:    []string{"still starting"},
			wantAction: map[string]plan.Action{"ray_cluster.main": plan.NoOp, "vllm_serve.llama": plan.Replace}},
		// The same configuration applied from another checkout: the head's
		// container carries rayform's labels for another project. It is
		// recognised, and the fix never removes it.
		{name: "other-project",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				head := f.Hosts[`gpu["h1"]`]
				for i := range head.Containers.List {
					head.Containers.List[i].Labels["rayform.project"] = "checkout-a"
				}
			},
			want: []string{`belongs to rayform project "checkout-a", not "` + benchProject + `"`,
				`declare rayform { project = "checkout-a" }`},
			notWant:    []string{"docker rm"},
			wantErrors: 1},
		// Issue 22, item 7: follow-on and misleading messages. More GPUs
		// declared than the host has: the error says so, and Ray's count
		// (the containers were started with the old declaration) is no
		// change made outside rayform.
		{name: "gpus-declared-more",
			config: func(s string) string {
				return strings.Replace(s, "gpus          = 8", "gpus          = 16", 1)
			},
			want:       []string{`Error: gpu["h1"] declares gpus = 16 but nvidia-smi reports 8`},
			notWant:    []string{"Objects have changed outside of rayform", "GPUs in Ray"},
			wantErrors: 3},
		// A wrong interface name: one error per node with the one string
		// to correct; no route "to invalid IP" follows from it.
		{name: "wrong-interface",
			config: func(s string) string {
				return strings.Replace(s, `interface = "ib0"`, `interface = "ib9"`, 1)
			},
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				for _, hf := range f.Hosts {
					for i, rc := range hf.RouteChecks {
						hf.RouteChecks[i] = observe.RouteCheck{Peer: rc.Peer, Err: "peer " + rc.Peer + ": no address in 192.168.0.0/16 on ib9"}
					}
				}
			},
			want:       []string{`Error: interface ib9 does not exist on gpu["h1"]`, `set interface = "ib0" in network.fabric (ib0 holds gpu["h1"]'s address in 192.168.0.0/16); it names the fabric interface of every node`},
			notWant:    []string{"has no route", "invalid IP", `interface = { "gpu`},
			wantErrors: 3},
		// An unreachable worker: its peers cannot learn its fabric
		// address; "cannot observe" says it all.
		{name: "unreachable-worker-routes",
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				delete(f.Hosts, `gpu["h3"]`)
				f.Errors = map[string]error{`gpu["h3"]`: errors.New(`connect root@10.1.230.12:22: dial tcp 10.1.230.12:22: connect: no route to host`)}
				for _, hf := range f.Hosts {
					for i, rc := range hf.RouteChecks {
						if rc.Peer == `gpu["h3"]` {
							hf.RouteChecks[i] = observe.RouteCheck{Peer: rc.Peer, Err: `peer gpu["h3"] was not observed`}
						}
					}
				}
			},
			want:       []string{`Error: cannot observe gpu["h3"]`},
			notWant:    []string{"has no route", "invalid IP"},
			wantErrors: 1},
		// Issue 33 item 5: 20 secret env values of 120 KB each, each within
		// MAX_ARG_STRLEN, together beyond the host's ARG_MAX (a quarter of
		// its 8 MiB stack): plan refuses the serve's restart, so apply never
		// stops the serve that runs.
		{name: "env-over-arg-max",
			config: func(s string) string {
				s = strings.Replace(s, "  max_model_len          = 32768\n", "  max_model_len          = 32768\n  env                    = { for i in range(20) : \"BIG_${i}\" => var.big }\n", 1)
				return s + "\nvariable \"big\" {\n  type      = string\n  sensitive = true\n  default   = \"" + strings.Repeat("a", 120_000) + "\"\n}\n"
			},
			facts: func(f *observe.Facts, _ map[string]netip.Addr) {
				for _, hf := range f.Hosts {
					hf.Exec = observe.Exec{PageSize: 4096, StackKiB: 8192, EnvBytes: 600, EnvCount: 10}
				}
			},
			want:       []string{"vllm_serve.llama must be replaced", "A command of this resource is too long for its host", "where the host's kernel takes 2097152 (ARG_MAX"},
			wantErrors: 1},
	}
}

func TestPlanGolden(t *testing.T) {
	fixed := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, tc := range planCases() {
		t.Run(tc.name, func(t *testing.T) {
			cc := convergedCluster(t, 3)
			src := string(benchConfig(3))
			if tc.config != nil {
				src = tc.config(src)
			}
			if tc.facts != nil {
				tc.facts(cc.facts, cc.addrs)
			}
			st, err := state.New(benchProject)
			if err != nil {
				t.Fatal(err)
			}
			if tc.state != nil {
				tc.state(st)
			}
			cfg := planConfig(t, src, cc.facts)
			replace := map[string]bool{}
			for _, a := range tc.replace {
				replace[a] = true
			}
			res := Plan(PlanInput{Config: cfg, Facts: cc.facts, State: st, Project: benchProject, Replace: replace})
			var txt, js bytes.Buffer
			if err := plan.RenderText(&txt, res.Plan, plan.TextOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := plan.RenderJSON(&js, res.Plan, plan.JSONOptions{Version: "test", Now: func() time.Time { return fixed }}); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(txt.String(), w) {
					t.Errorf("plan lacks %q\n%s", w, txt.String())
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(txt.String(), w) {
					t.Errorf("plan contains %q\n%s", w, txt.String())
				}
			}
			for addr, want := range tc.wantAction {
				got := plan.Action("(absent)")
				for _, ch := range res.Plan.Changes {
					if ch.Address == addr {
						got = ch.Action
					}
				}
				if got != want {
					t.Errorf("%s: action %s, want %s", addr, got, want)
				}
			}
			if n := len(res.Plan.Errors()); n != tc.wantErrors {
				t.Errorf("%d error findings, want %d: %+v", n, tc.wantErrors, res.Plan.Findings)
			}
			for _, out := range []string{txt.String(), js.String()} {
				if strings.Contains(out, "hf_not_a_real_token") || strings.Contains(out, "HF_NOT_A_REAL_TOKEN") {
					t.Fatalf("a sensitive value reached the plan output:\n%s", out)
				}
			}
			// Work must match the plan: every non-no-op change has work.
			for _, ch := range res.Plan.Changes {
				if _, ok := res.Work[ch.Address]; (ch.Action != plan.NoOp) != ok {
					t.Errorf("%s: action %s but work present = %v", ch.Address, ch.Action, ok)
				}
			}
			golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".txt"), txt.Bytes())
			golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".json"), js.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if updateGoldens() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden (run with -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run with -update to accept):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// setLink sets the operstate and flags of hf's link name.
func setLink(hf *observe.HostFacts, name, operstate string, flags ...string) {
	for i, l := range hf.Links.List {
		if l.Name == name {
			hf.Links.List[i].OperState, hf.Links.List[i].Flags = operstate, flags
		}
	}
}
