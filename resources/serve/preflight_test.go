package serve

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/hostplan"
)

// TestLocateModel: where the head's host holds a serve's model files,
// through the cluster's volumes, for absolute paths and Hub ids.
func TestLocateModel(t *testing.T) {
	hf := []string{"/data/hf:/root/.cache/huggingface:ro"}
	tests := []struct {
		name                 string
		volumes              []string
		clusterEnv, serveEnv map[string]string
		model                string
		extra                []string
		dir, ref             string
		why                  string
	}{
		{name: "hub id at refs/main", volumes: hf, model: "Qwen/Qwen2.5-7B-Instruct",
			dir: "/data/hf/hub/models--Qwen--Qwen2.5-7B-Instruct/snapshots/{ref}", ref: "/data/hf/hub/models--Qwen--Qwen2.5-7B-Instruct/refs/main"},
		{name: "a branch revision", volumes: hf, model: "org/m", extra: []string{"--revision", "v2.0"},
			dir: "/data/hf/hub/models--org--m/snapshots/{ref}", ref: "/data/hf/hub/models--org--m/refs/v2.0"},
		{name: "a commit revision", volumes: hf, model: "org/m", extra: []string{"--revision=4e20de362430cd3b72f300e6b0f18e50e7166e08"},
			dir: "/data/hf/hub/models--org--m/snapshots/4e20de362430cd3b72f300e6b0f18e50e7166e08"},
		{name: "HF_HOME of the cluster", volumes: []string{"/srv/cache:/cache"}, clusterEnv: map[string]string{"HF_HOME": "/cache/hf"}, model: "org/m",
			dir: "/srv/cache/hf/hub/models--org--m/snapshots/{ref}", ref: "/srv/cache/hf/hub/models--org--m/refs/main"},
		{name: "HF_HUB_CACHE of the serve wins", volumes: []string{"/srv/hub:/hub"}, clusterEnv: map[string]string{"HF_HOME": "/cache/hf"},
			serveEnv: map[string]string{"HF_HUB_CACHE": "/hub"}, model: "org/m",
			dir: "/srv/hub/models--org--m/snapshots/{ref}", ref: "/srv/hub/models--org--m/refs/main"},
		{name: "absolute path, deepest mount", volumes: []string{"/mnt:/models", "/fast/llama:/models/llama"}, model: "/models/llama/",
			dir: "/fast/llama"},
		{name: "absolute path inside the image", volumes: hf, model: "/models/llama",
			why: "no volume of ray_cluster.c maps /models/llama from the host: the model's files are inside the image"},
		{name: "named volume", volumes: []string{"hfcache:/root/.cache/huggingface"}, model: "org/m",
			why: "no volume of ray_cluster.c maps the Hugging Face cache /root/.cache/huggingface/hub/models--org--m from the host: vLLM downloads the model inside the container"},
		{name: "a prefix that is not a directory", volumes: []string{"/data/m:/models/ll"}, model: "/models/llama",
			why: "no volume of ray_cluster.c maps /models/llama from the host: the model's files are inside the image"},
		{name: "a host path the probe cannot name", volumes: []string{"/data/my models:/models"}, model: "/models/llama",
			why: "the host path /data/my models/llama cannot be read by the probe (read \"/data/my models/llama/config.json\": want an absolute path of letters, digits, '.', '_', '/', '-' without \"..\")"},
		{name: "a legacy id without an organisation", volumes: hf, model: "gpt2",
			dir: "/data/hf/hub/models--gpt2/snapshots/{ref}", ref: "/data/hf/hub/models--gpt2/refs/main"},
		{name: "neither", volumes: hf, model: "./llama",
			why: `model "./llama" is neither an absolute path nor a Hugging Face id`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &cluster.RayCluster{Volumes: tt.volumes, Env: tt.clusterEnv}
			rc.Addr = "ray_cluster.c"
			sv := &VLLMServe{Model: tt.model, Env: tt.serveEnv, ExtraArgs: tt.extra}
			got := locateModel(rc, sv)
			if got.Dir != tt.dir || got.Ref != tt.ref || got.Why != tt.why {
				t.Errorf("got %+v\nwant {Dir:%s Ref:%s Why:%s}", got, tt.dir, tt.ref, tt.why)
			}
			if got.Why == "" {
				if err := (observe.HostSpec{Reads: []observe.ReadProbe{got.config(), got.index()}}).Validate(); err != nil {
					t.Errorf("the reads do not validate: %v", err)
				}
			}
		})
	}
}

// TestWeightBytes: the weights' size from the index file read whole, or
// from its head when it is longer than the read's bound.
func TestWeightBytes(t *testing.T) {
	whole := `{"metadata": {"total_size": 15231233024}, "weight_map": {"lm_head.weight": "model-00004-of-00004.safetensors"}}`
	tests := []struct {
		name string
		idx  observe.ReadResult
		want int64
	}{
		{"whole", observe.ReadResult{Exists: true, Content: whole}, 15231233024},
		{"head only", observe.ReadResult{Exists: true, Truncated: true, Content: "{\n  \"metadata\": {\n    \"total_size\": 16060522496\n  },\n  \"weight_map\": {\n    \"model.embed"}, 16060522496},
		{"head without the size", observe.ReadResult{Exists: true, Truncated: true, Content: "{\n  \"weight_map\": {\n    \"model.embed"}, 0},
		{"not JSON", observe.ReadResult{Exists: true, Content: "<html>"}, 0},
	}
	for _, tt := range tests {
		if got := weightBytes(tt.idx); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestPreflightJudgesOnlyAServeThatStarts: a serve that keeps running as
// it is (no action) has shown vLLM takes it, and -refresh-only plans no
// start: neither is judged, though its config.json would be refused.
func TestPreflightJudgesOnlyAServeThatStarts(t *testing.T) {
	rc := &cluster.RayCluster{Head: "h1", Volumes: []string{"/data/hf:/root/.cache/huggingface"}}
	rc.Addr = "ray_cluster.c"
	sv := &VLLMServe{Model: "org/m", TensorParallelSize: 3}
	sv.Addr = "vllm_serve.m"
	m := locateModel(rc, sv)
	head := &observe.HostFacts{Host: "h1", Complete: true, Reads: map[string]observe.ReadResult{
		m.config().Key(): {Exists: true, Ref: "abc", Content: `{"num_attention_heads": 32, "num_hidden_layers": 16}`},
	}}
	for _, tt := range []struct {
		name        string
		action      plan.Action
		refreshOnly bool
		want        int
	}{
		{"created", plan.Create, false, 1},
		{"replaced", plan.Replace, false, 1},
		{"running as it is", plan.NoOp, false, 0},
		{"refresh-only", plan.Create, true, 0},
	} {
		rp := &recPlanner{facts: &observe.Facts{Hosts: map[string]*observe.HostFacts{"h1": head}}, refreshOnly: tt.refreshOnly}
		p := &planner{Planner: hostplan.Planner{Planner: rp}, fab: cluster.Fabric{Facts: rp.facts}}
		p.preflight(sv, rc, tt.action, tt.action != plan.Create, tt.action == plan.Create)
		if got := len(rp.findings); got != tt.want || len(rp.notes) > 0 {
			t.Errorf("%s: %d findings %+v, notes %q; want %d findings, no note", tt.name, got, rp.findings, rp.notes, tt.want)
		}
	}
}

// recPlanner records what a plan adds; preflight reads only the facts and
// whether the plan only refreshes (the embedded nil kind.Planner answers
// nothing else).
type recPlanner struct {
	kind.Planner
	facts       *observe.Facts
	refreshOnly bool
	state       *state.State
	findings    []plan.Finding
	notes       []string
}

func (r *recPlanner) Facts() *observe.Facts  { return r.facts }
func (r *recPlanner) State() *state.State    { return r.state }
func (r *recPlanner) Project() string        { return "p" }
func (r *recPlanner) RefreshOnly() bool      { return r.refreshOnly }
func (r *recPlanner) Finding(f plan.Finding) { r.findings = append(r.findings, f) }
func (r *recPlanner) Note(n string)          { r.notes = append(r.notes, n) }

// TestKernelPlan: the archs the image reported to apply's query (state)
// against the GPUs of the real H100 host (testdata/observe/h100): vLLM's
// kernel archs win over torch's; an image not asked, or asked without
// archs, is not judged.
func TestKernelPlan(t *testing.T) {
	b, err := os.ReadFile("../../testdata/observe/h100/probe.out")
	if err != nil {
		t.Fatal(err)
	}
	h100, err := observe.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	h100.Host, h100.Complete = "h1", true
	const id = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	h100.Images = []observe.Image{{Ref: "vllm/vllm-openai:v0.17.1", Present: true, ID: id}}
	rc := &cluster.RayCluster{Head: "h1", Image: "vllm/vllm-openai:v0.17.1"}
	rc.Addr = "ray_cluster.c"
	sv := &VLLMServe{Model: "org/m"}
	sv.Addr = "vllm_serve.m"
	for _, tt := range []struct {
		name   string
		answer *imageAnswer
		want   string
	}{
		{"not asked", nil, ""},
		{"asked before archs were read", &imageAnswer{VLLM: "0.17.1"}, ""},
		{"torch with sm_90", &imageAnswer{CUDA: CUDA{TorchArchs: []string{"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"}}}, ""},
		{"vLLM's kernels without sm_90, torch with it", &imageAnswer{CUDA: CUDA{TorchArchs: []string{"sm_90"}, VLLMArchs: []string{"sm_120", "sm_121"}}},
			"the image vllm/vllm-openai:v0.17.1 (0123456789ab) has no kernels for compute capability 9.0 (NVIDIA H100 80GB HBM3 on h1): it was built for sm_120, sm_121"},
		{"only PTX of a newer GPU", &imageAnswer{CUDA: CUDA{VLLMArchs: []string{"compute_100"}}}, "no kernels for compute capability 9.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, err := state.New("p")
			if err != nil {
				t.Fatal(err)
			}
			if tt.answer != nil {
				im := tt.answer.record()
				im.CheckedAt = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
				st.SetImage(id, im)
			}
			rp := &recPlanner{facts: &observe.Facts{Hosts: map[string]*observe.HostFacts{"h1": h100}}, state: st}
			p := &planner{Planner: hostplan.Planner{Planner: rp}, fab: cluster.Fabric{Facts: rp.facts}}
			p.kernelPlan(sv, rc, h100)
			switch {
			case tt.want == "" && len(rp.findings) > 0:
				t.Errorf("findings %+v, want none", rp.findings)
			case tt.want != "" && (len(rp.findings) != 1 || !strings.Contains(rp.findings[0].Summary, tt.want) || rp.findings[0].Severity != plan.Error):
				t.Errorf("findings %+v, want one error %q", rp.findings, tt.want)
			}
		})
	}
}

// TestArchAnswerReadsRealCUDAQuery: the CUDA half of the image query, as it
// printed on the real H100 (testdata/observe/h100/cudaquery.txt, the same
// Python as cudaQuery), is read into the state's answer.
func TestArchAnswerReadsRealCUDAQuery(t *testing.T) {
	b, err := os.ReadFile("../../testdata/observe/h100/cudaquery.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, js, ok := strings.Cut(string(b), "RAYFORM_CUDA ")
	if !ok {
		t.Fatal("no RAYFORM_CUDA line in the capture")
	}
	js, _, _ = strings.Cut(js, "\n")
	im, ok := parseArchAnswer([]byte(archMarker + js))
	if !ok {
		t.Fatal("no answer")
	}
	got := answerOf(im).CUDA
	want := CUDA{TorchCUDA: "13.0", TorchArchs: []string{"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"},
		LibCUDA: "/usr/local/nvidia/lib64/libcuda.so.580.159.04", LibCUDACUDA: "13.0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("answer %+v, want %+v", got, want)
	}
	if !strings.Contains(archQuery, "_cuda_getArchFlags") || !strings.Contains(archQuery, `find_spec("vllm._C")`) {
		t.Error("the image query does not ask the CUDA half")
	}
}
