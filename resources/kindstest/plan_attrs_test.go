package kindstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/serve"
)

// attrCase changes one argument of one kind in the converged cluster's
// configuration and says what the plan must show: the attribute with its
// value before and after (in the text and in -json), or why nothing
// changes.
type attrCase struct {
	kind, arg string
	old, new  string // replaced once in benchConfig(3)
	// more are further old, new pairs, for a change the configuration
	// must make together with it to stay valid.
	more []string
	// configErr: the configuration is rejected before planning, with
	// this in the error.
	configErr string
	// text lines the rendering must contain.
	text []string
	// attr is the changed attribute's name in -json, with before and
	// after as compact JSON ("" skips the comparison of that side).
	attr          string
	before, after string
	// noChange says why the plan rightly changes nothing; the plan must
	// then say "No changes." (or report the finding in finding).
	noChange string
	finding  string
}

func attrCases() []attrCase {
	return []attrCase{
		// node: how rayform reaches a host, and what it must have.
		{kind: "node", arg: "host", old: "host          = each.value", new: `host          = "${each.value}.example"`,
			noChange: "host only says how to reach the node over SSH: the facts, observed there, are unchanged"},
		{kind: "node", arg: "user", old: `user          = "root"`, new: `user          = "ubuntu"`,
			noChange: "user only says how to log in"},
		{kind: "node", arg: "port", old: `gpus          = 8`, new: "gpus          = 8\n  port          = 2222",
			noChange: "port only says how to reach sshd"},
		{kind: "node", arg: "identity_file", old: `identity_file = "/root/.ssh/id_ed25519"`, new: `identity_file = "/root/.ssh/id_rsa"`,
			noChange: "identity_file only says how to log in"},
		{kind: "node", arg: "labels", old: `gpus          = 8`, new: "gpus          = 8\n  labels        = { rack = \"a\" }",
			noChange: "labels are free-form notes rayform does not apply"},
		{kind: "node", arg: "gpus", old: `gpus          = 8`, new: `gpus          = 16`,
			text:    []string{`~ gpus      = 8 -> 16`, "# ray_cluster.main must be replaced", `changed: node.gpus`},
			finding: `declares gpus = 16 but nvidia-smi reports 8`, attr: "nodes"},
		{kind: "node", arg: "gpus (too few)", old: `gpus          = 8`, new: `gpus          = 4`,
			configErr: "Not enough GPUs"},
		// network: the fabric.
		{kind: "network", arg: "cidr", old: `cidr      = "192.168.0.0/16"`, new: `cidr      = "10.9.0.0/16"`,
			finding: `has no address in 10.9.0.0/16`},
		{kind: "network", arg: "interface", old: `interface = "ib0"`, new: `interface = "ib1"`,
			finding: "interface ib1 does not exist"},
		{kind: "network", arg: "ib_hca", old: `mtu       = 4092`, new: "mtu       = 4092\n  ib_hca    = [\"mlx5_0\"]",
			text: []string{`+ "NCCL_IB_HCA"        = "mlx5_0"`}, attr: "nodes"},
		{kind: "network", arg: "mtu", old: `mtu       = 4092`, new: `mtu       = 9000`,
			finding: "MTU of ib0 on gpu[\"h1\"] is 4092, want 9000"},
		// ray_cluster.
		{kind: "ray_cluster", arg: "image", old: "vllm/vllm-openai:v0.11.0", new: "vllm/vllm-openai:v0.12.0",
			text: []string{`~ image = "vllm/vllm-openai:v0.11.0" -> "vllm/vllm-openai:v0.12.0" # forces replacement`},
			attr: "image", before: `"vllm/vllm-openai:v0.11.0"`, after: `"vllm/vllm-openai:v0.12.0"`},
		{kind: "ray_cluster", arg: "head", old: `head           = node.gpu["h1"]`, new: `head           = node.gpu["h2"]`,
			more: []string{`n if k != "h1"]`, `n if k != "h2"]`},
			text: []string{`~ head    = "gpu[\"h1\"]" -> "gpu[\"h2\"]" # forces replacement`},
			attr: "head", before: `"gpu[\"h1\"]"`, after: `"gpu[\"h2\"]"`},
		{kind: "ray_cluster", arg: "workers", old: `workers        = [for k, n in node.gpu : n if k != "h1"]`, new: `workers        = [node.gpu["h2"]]`,
			more: []string{"pipeline_parallel_size = length(var.hosts)", "pipeline_parallel_size = 2"},
			text: []string{`- "gpu[\"h3\"]",`, "# ray_cluster.main will be updated in-place"},
			attr: "workers", before: `["gpu[\"h2\"]","gpu[\"h3\"]"]`, after: `["gpu[\"h2\"]"]`},
		{kind: "ray_cluster", arg: "network", old: "network        = network.fabric\n", new: "",
			configErr: "Multi-node cluster without a network binding"},
		{kind: "ray_cluster", arg: "port", old: `shm_size       = "64g"`, new: "shm_size       = \"64g\"\n  port           = 6380",
			text: []string{`~ port = 6379 -> 6380 # forces replacement`}, attr: "port", before: `6379`, after: `6380`},
		{kind: "ray_cluster", arg: "dashboard_port", old: `shm_size       = "64g"`, new: "shm_size       = \"64g\"\n  dashboard_port = 8266",
			text: []string{`~ dashboard_port = 8265 -> 8266 # forces replacement`}, attr: "dashboard_port", before: `8265`, after: `8266`},
		{kind: "ray_cluster", arg: "memory_monitor", old: "memory_monitor = false", new: "memory_monitor = true",
			text: []string{`~ memory_monitor = false -> true # forces replacement`}, attr: "memory_monitor", before: `false`, after: `true`},
		{kind: "ray_cluster", arg: "shm_size", old: `shm_size       = "64g"`, new: `shm_size       = "32g"`,
			noChange: "docker ignores --shm-size next to --ipc host, so rayform does not pass it (validation warns)"},
		{kind: "ray_cluster", arg: "env", old: "HF_TOKEN = var.hf_token", new: "HF_TOKEN = var.hf_token\n    FOO = \"bar\"",
			text: []string{`+ "FOO"      = "bar"`, `changed: env["FOO"]`},
			attr: "env", before: `{"HF_TOKEN":null}`, after: `{"FOO":"bar","HF_TOKEN":null}`},
		{kind: "ray_cluster", arg: "env (sensitive element)", old: `default   = "hf_not_a_real_token"`, new: `default   = "hf_another_fake_token"`,
			text: []string{`~ "HF_TOKEN" = (sensitive value)`, `changed: env["HF_TOKEN"]`},
			attr: "env", before: `{"HF_TOKEN":null}`, after: `{"HF_TOKEN":null}`},
		{kind: "ray_cluster", arg: "volumes", old: `shm_size       = "64g"`, new: "shm_size       = \"64g\"\n  volumes        = [\"/models:/models\"]",
			text: []string{`+ volumes = [`, `+ "/models:/models",`}, attr: "volumes", before: `null`, after: `["/models:/models"]`},
		{kind: "ray_cluster", arg: "docker_args", old: `shm_size       = "64g"`, new: "shm_size       = \"64g\"\n  docker_args    = [\"--ulimit\", \"memlock=-1\"]",
			text: []string{`+ docker_args = [`, `+ "memlock=-1",`}, attr: "docker_args", before: `null`, after: `["--ulimit","memlock=-1"]`},
		{kind: "ray_cluster", arg: "container_name", old: `shm_size       = "64g"`, new: "shm_size       = \"64g\"\n  container_name = \"ray-main\"",
			text: []string{`~ container_name = "rayform-main" -> "ray-main" # forces replacement`},
			attr: "container_name", before: `"rayform-main"`, after: `"ray-main"`},
		// vllm_serve.
		{kind: "vllm_serve", arg: "model", old: `model                  = "meta-llama/Llama-3.1-405B-Instruct-FP8"`, new: `model                  = "meta-llama/Llama-3.1-70B-Instruct"`,
			text: []string{`~ model = "meta-llama/Llama-3.1-405B-Instruct-FP8" -> "meta-llama/Llama-3.1-70B-Instruct" # forces replacement`},
			attr: "model", before: `"meta-llama/Llama-3.1-405B-Instruct-FP8"`, after: `"meta-llama/Llama-3.1-70B-Instruct"`},
		{kind: "vllm_serve", arg: "served_model_name", old: `served_model_name      = "llama-405b"`, new: `served_model_name      = "llama"`,
			text: []string{`~ served_model_name = "llama-405b" -> "llama" # forces replacement`}, attr: "served_model_name", before: `"llama-405b"`, after: `"llama"`},
		{kind: "vllm_serve", arg: "tensor_parallel_size", old: "tensor_parallel_size   = 8", new: "tensor_parallel_size   = 4",
			text: []string{`~ tensor_parallel_size = 8 -> 4 # forces replacement`}, attr: "tensor_parallel_size", before: `8`, after: `4`},
		{kind: "vllm_serve", arg: "pipeline_parallel_size", old: "pipeline_parallel_size = length(var.hosts)", new: "pipeline_parallel_size = 2",
			text: []string{`~ pipeline_parallel_size = 3 -> 2 # forces replacement`}, attr: "pipeline_parallel_size", before: `3`, after: `2`},
		{kind: "vllm_serve", arg: "gpu_memory_utilization", old: "max_model_len          = 32768", new: "max_model_len          = 32768\n  gpu_memory_utilization = 0.85",
			text: []string{`~ gpu_memory_utilization = 0.9 -> 0.85 # forces replacement`}, attr: "gpu_memory_utilization", before: `0.9`, after: `0.85`},
		{kind: "vllm_serve", arg: "max_model_len", old: "max_model_len          = 32768", new: "max_model_len          = 16384",
			text: []string{`~ max_model_len = 32768 -> 16384 # forces replacement`}, attr: "max_model_len", before: `32768`, after: `16384`},
		{kind: "vllm_serve", arg: "port", old: "max_model_len          = 32768", new: "max_model_len          = 32768\n  port                   = 8001",
			text: []string{`~ port     = 8000 -> 8001 # forces replacement`, `~ endpoint = "http://192.168.0.10:8000/v1" -> "http://192.168.0.10:8001/v1"`},
			attr: "port", before: `8000`, after: `8001`},
		{kind: "vllm_serve", arg: "env", old: "max_model_len          = 32768", new: "max_model_len          = 32768\n  env = { VLLM_LOGGING_LEVEL = \"DEBUG\" }",
			text: []string{`+ env = {`, `+ "VLLM_LOGGING_LEVEL" = "DEBUG"`}, attr: "env", before: `null`, after: `{"VLLM_LOGGING_LEVEL":"DEBUG"}`},
		{kind: "vllm_serve", arg: "extra_args", old: "max_model_len          = 32768", new: "max_model_len          = 32768\n  extra_args = [\"--enforce-eager\"]",
			text: []string{`+ extra_args = [`, `+ "--enforce-eager",`}, attr: "extra_args", before: `null`, after: `["--enforce-eager"]`},
		{kind: "vllm_serve", arg: "extra_args (sensitive element)", old: "max_model_len          = 32768", new: "max_model_len          = 32768\n  extra_args = [\"--hf-token\", var.hf_token]",
			configErr: "Sensitive value in extra_args"},
		{kind: "vllm_serve", arg: "api_key", old: "max_model_len          = 32768", new: "max_model_len          = 32768\n  api_key = \"not-a-real-key\"",
			text: []string{`+ api_key = (sensitive value)`}, attr: "api_key", before: `null`, after: `null`},
		// Values derived from the sensitive token (issue 23, item 6): refused
		// where they would reach a command line, a name, a label or a
		// mount; masked where they are taken.
		{kind: "vllm_serve", arg: "served_model_name (derived from a sensitive value)", old: `served_model_name      = "llama-405b"`, new: `served_model_name      = "s${var.hf_token}"`,
			configErr: "Sensitive value in served_model_name"},
		{kind: "vllm_serve", arg: "model (derived from a sensitive value)", old: `model                  = "meta-llama/Llama-3.1-405B-Instruct-FP8"`, new: `model                  = format("m/%s", var.hf_token)`,
			configErr: "Sensitive value in model"},
		{kind: "vllm_serve", arg: "api_key (derived from a sensitive value)", old: "max_model_len          = 32768", new: "max_model_len          = 32768\n  api_key = upper(var.hf_token)",
			text: []string{`+ api_key = (sensitive value)`}, attr: "api_key", before: `null`, after: `null`},
		{kind: "ray_cluster", arg: "container_name (derived from a sensitive value)", old: `shm_size       = "64g"`, new: "shm_size       = \"64g\"\n  container_name = join(\"-\", [\"ray\", var.hf_token])",
			configErr: "Sensitive value in container_name"},
		{kind: "ray_cluster", arg: "docker_args (derived from a sensitive value)", old: `shm_size       = "64g"`, new: "shm_size       = \"64g\"\n  docker_args    = [\"--label\", \"tok=${var.hf_token}\"]",
			configErr: "Sensitive value in docker_args"},
		{kind: "ray_cluster", arg: "volumes (derived from a sensitive value)", old: `shm_size       = "64g"`, new: "shm_size       = \"64g\"\n  volumes        = [for v in [var.hf_token] : \"/d/${v}:/d\"]",
			configErr: "Sensitive value in volumes"},
		{kind: "ray_cluster", arg: "env (derived from a sensitive value)", old: "HF_TOKEN = var.hf_token", new: "HF_TOKEN = var.hf_token\n    AUTH = \"Bearer ${var.hf_token}\"",
			text: []string{`+ "AUTH"     = (sensitive value)`, `changed: env["AUTH"]`},
			attr: "env", before: `{"HF_TOKEN":null}`, after: `{"AUTH":null,"HF_TOKEN":null}`},
		{kind: "vllm_serve", arg: "ready_timeout", old: "max_model_len          = 32768", new: "max_model_len          = 32768\n  ready_timeout = \"45m\"",
			noChange: "ready_timeout only bounds how long apply waits for the serve to become ready"},
	}
}

// TestPlanShowsEveryAttribute changes each argument of each kind, one at a
// time, on a converged cluster, and checks that the plan names the
// attribute with its before and after, in text and in -json, and that
// plan and apply's verification agree: hosts that verification rejects
// for the changed configuration are never "No changes".
func TestPlanShowsEveryAttribute(t *testing.T) {
	for _, tc := range attrCases() {
		t.Run(tc.kind+"."+tc.arg, func(t *testing.T) {
			src := string(benchConfig(3))
			if !strings.Contains(src, tc.old) {
				t.Fatalf("benchConfig lacks %q", tc.old)
			}
			src = strings.Replace(src, tc.old, tc.new, 1)
			for i := 0; i+1 < len(tc.more); i += 2 {
				src = strings.Replace(src, tc.more[i], tc.more[i+1], 1)
			}
			if tc.configErr != "" {
				_, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: "."})
				found := false
				for _, d := range diags.Errs() {
					found = found || strings.Contains(d.Error(), tc.configErr)
				}
				if !found {
					t.Errorf("config errors %q, want %q", diags.Error(), tc.configErr)
				}
				if strings.Contains(diags.Error(), "hf_not_a_real_token") {
					t.Errorf("a sensitive value reached the config errors: %s", diags.Error())
				}
				return
			}
			txt, js, p, cfg, facts := planText(t, src)
			// Plan and verify agree: apply's verification, run against
			// these hosts for this configuration, rejects only what the
			// plan changes or refuses.
			verr := verifyAll(t, cfg, facts)
			if verr != nil && !p.HasChanges() && len(p.Errors()) == 0 {
				t.Errorf("apply's verification rejects the hosts, but the plan says:\n%s\nverify: %v", txt, verr)
			}
			if tc.noChange != "" && verr != nil {
				t.Errorf("changing %s needs no change (%s), but apply's verification rejects the hosts: %v", tc.arg, tc.noChange, verr)
			}
			for _, w := range tc.text {
				if !strings.Contains(txt, w) {
					t.Errorf("plan lacks %q\n%s", w, txt)
				}
			}
			if tc.finding != "" {
				found := false
				for _, f := range p.Findings {
					found = found || strings.Contains(f.Summary, tc.finding)
				}
				if !found {
					t.Errorf("no finding %q:\n%s", tc.finding, txt)
				}
			}
			if tc.noChange != "" {
				if p.HasChanges() || len(p.Findings) > 0 {
					t.Errorf("changing %s needs no change (%s), but the plan says:\n%s", tc.arg, tc.noChange, txt)
				}
				return
			}
			if tc.attr == "" {
				return
			}
			a, ok := jsonAttr(t, js, tc.attr)
			if !ok {
				t.Fatalf("-json names no changed attribute %q:\n%s", tc.attr, js)
			}
			if tc.before != "" && string(a["before"]) != tc.before {
				t.Errorf("-json %s before = %s, want %s", tc.attr, a["before"], tc.before)
			}
			if tc.after != "" && string(a["after"]) != tc.after {
				t.Errorf("-json %s after = %s, want %s", tc.attr, a["after"], tc.after)
			}
			if strings.Contains(txt+js, "hf_not_a_real_token") || strings.Contains(txt+js, "hf_another_fake_token") || strings.Contains(txt+js, "not-a-real-key") {
				t.Fatalf("a sensitive value reached the plan:\n%s\n%s", txt, js)
			}
		})
	}
}

// planText plans src against the converged facts of benchConfig(3), with
// a state that records the cluster and the serve, and renders it. It
// returns the configuration and the facts it planned with too.
func planText(t *testing.T, src string) (string, string, *plan.Plan, *Blocks, *observe.Facts) {
	t.Helper()
	cc := convergedCluster(t, 3)
	st, err := state.New(benchProject)
	if err != nil {
		t.Fatal(err)
	}
	st.Set("ray_cluster.main", state.Resource{Type: "ray_cluster", Container: "rayform-main"})
	st.Set("vllm_serve.llama", state.Resource{Type: "vllm_serve", Container: "rayform-main"})
	cfg := planConfig(t, src, cc.facts)
	res := Plan(PlanInput{Config: cfg, Facts: cc.facts, State: st, Project: benchProject})
	var txt, js bytes.Buffer
	if err := plan.RenderText(&txt, res.Plan, plan.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := plan.RenderJSON(&js, res.Plan, plan.JSONOptions{Version: "test", Now: func() time.Time { return time.Time{} }}); err != nil {
		t.Fatal(err)
	}
	return txt.String(), js.String(), res.Plan, cfg, cc.facts
}

// verifyAll runs apply's verification of every ray_cluster (Ray's node
// table) and vllm_serve (/health, /v1/models) of cfg against what facts
// show on the hosts, and returns the first rejection.
func verifyAll(t *testing.T, cfg *Blocks, facts *observe.Facts) error {
	t.Helper()
	addrs, ifaces := cluster.FabricAddrs(cluster.View(cfg.Config), facts)
	for _, name := range slices.Sorted(maps.Keys(cfg.RayClusters)) {
		rc := cfg.RayClusters[name]
		if err := VerifyRayTable(t, cluster.ClusterSpecs(cluster.View(cfg.Config), rc, addrs, ifaces), cluster.RayTable(facts.Hosts[rc.Head], rc).List); err != nil {
			return fmt.Errorf("%s: %w", rc.Addr, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Serves)) {
		sv := cfg.Serves[name]
		spec, err := serve.ServeSpecFor(serve.View(cfg.Config), sv)
		if err != nil {
			return fmt.Errorf("%s: %w", sv.Addr, err)
		}
		if err := VerifyServe(t, spec, serve.ServeAnswer(facts.Hosts[spec.Node], spec.Port)); err != nil {
			return fmt.Errorf("%s: %w", sv.Addr, err)
		}
	}
	return nil
}

// jsonAttr finds the changed attribute name in the planned_change events.
func jsonAttr(t *testing.T, js, name string) (map[string]json.RawMessage, bool) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(js), "\n") {
		var ev struct {
			Type   string `json:"type"`
			Change struct {
				Attrs []map[string]json.RawMessage `json:"attrs"`
			} `json:"change"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("bad -json line %q: %v", line, err)
		}
		if ev.Type != "planned_change" {
			continue
		}
		for _, a := range ev.Change.Attrs {
			if string(a["name"]) == `"`+name+`"` {
				return a, true
			}
		}
	}
	return nil, false
}
