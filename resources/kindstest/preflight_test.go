package kindstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
)

// preflightCase is a serve of the 3-node bench cluster (8 × H100 80GB
// each) whose model's files the head's probe read from the Hugging Face
// cache, and what the plan must say of it.
type preflightCase struct {
	name string
	// model is a directory of testdata/modelfit ("" = no files on the head).
	model string
	// serve replaces the bench serve's body after "cluster = ...".
	serve string
	// config changes the configuration further.
	config func(string) string
	// facts changes the observed facts further.
	facts func(*observe.Facts)
	// at is the attribute each finding must point at (its file:line).
	at         string
	want       []string
	notWant    []string
	wantErrors int
	wantWarn   int
	wantNotes  []string
	// image is a file of testdata/modelfit the state holds as the answer
	// of the head's image to the architecture query ("" = not asked yet);
	// imageEdit changes that file's text first.
	image     string
	imageEdit func(string) string
}

// archNote is the plan's note when the head's image was not asked yet.
const archNote = "the architecture check of vllm_serve.llama runs in apply, before vllm serve starts: the image vllm/vllm-openai:v0.11.0 (abababababab) was not asked yet what its vLLM and transformers know (once per image)."

const preflightHFDir = "/data/hf"

// qwenTP4Note is the plan's note on the KV cache of Qwen2.5-7B-Instruct
// with tensor_parallel_size 4 on the bench's 80 GiB GPUs at vLLM's 0.9:
// at most 68.14 GiB a GPU after 14.19 GiB of weights / 4, 16-token
// blocks of 28 layers × 1 KV head × 128 × 2 × 2 bytes.
func qwenTP4Note(maxLen string, blocks string, concurrency string) string {
	return `vllm_serve.llama: vLLM will report at most "GPU KV cache size: 5,103,296 tokens, Maximum concurrency for ` + maxLen + ` tokens per request: ` + concurrency + `x" (68.14 GiB a GPU after the weights, before vLLM's memory profile takes its share: 318,956 blocks of 16 tokens (vLLM's GPU default), 229,376 bytes each; ` + blocks + ` blocks a ` + maxLen + `-token request).`
}

func preflightCases() []preflightCase {
	smallGPUs := func(f *observe.Facts) {
		for _, hf := range f.Hosts {
			for i := range hf.GPUs.List {
				hf.GPUs.List[i].Name = "NVIDIA RTX 4000 Ada Generation"
				hf.GPUs.List[i].MemoryTotalMiB = 20475
			}
		}
	}
	return []preflightCase{
		{name: "preflight-tp-heads", model: "llama-3.2-1b-instruct",
			serve: `  model                  = "meta-llama/Llama-3.2-1B-Instruct"
  tensor_parallel_size   = 3
  max_model_len          = 8192
`,
			want: []string{"Error: tensor_parallel_size 3 does not divide the model's 32 attention heads",
				"Total number of attention heads (32) must be divisible by tensor parallel size (3).", "Fix: Use a tensor_parallel_size that divides 32",
				"/data/hf/hub/models--meta-llama--Llama-3.2-1B-Instruct/snapshots/4e20de362430cd3b72f300e6b0f18e50e7166e08/config.json"},
			at: "tensor_parallel_size", wantErrors: 1, wantNotes: []string{archNote}},
		{name: "preflight-too-large", model: "qwen2.5-7b-instruct", facts: smallGPUs,
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 1
  gpu_memory_utilization = 0.6
`,
			want: []string{"Error: the model will not fit: 14.19 GiB of weights per GPU, 12.00 GiB available", "Fix: Spread it over more GPUs (at least 2 in all)"},
			at:   "gpu_memory_utilization", wantErrors: 1, wantNotes: []string{archNote}},
		{name: "preflight-max-model-len", model: "qwen2.5-7b-instruct",
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 131072
`,
			want: []string{"Error: max_model_len 131072 exceeds the 32768 tokens the model supports (max_position_embeddings)", "Fix: Set max_model_len to at most 32768"},
			at:   "max_model_len", wantErrors: 1, wantNotes: []string{archNote}},
		{name: "preflight-max-model-len-override", model: "qwen2.5-7b-instruct",
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 131072
  env = {
    VLLM_ALLOW_LONG_MAX_MODEL_LEN = "1"
  }
`,
			want:    []string{"Warning: max_model_len 131072 exceeds the 32768 tokens the model supports", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 makes vLLM accept it"},
			notWant: []string{"Error:"},
			at:      "max_model_len", wantWarn: 1, wantNotes: []string{qwenTP4Note("131,072", "8,192", "38.94"), archNote}},
		// A DGX Spark: the GB10 reports no memory of its own; the model
		// must fit in what the OS leaves.
		{name: "preflight-unified-memory", model: "qwen2.5-7b-instruct",
			config: func(s string) string { return strings.Replace(s, "gpus          = 8", "gpus          = 1", 1) },
			facts: func(f *observe.Facts) {
				for _, hf := range f.Hosts {
					hf.UnifiedMemory = true
					hf.GPUs.List = []observe.GPU{{Index: 0, Name: "NVIDIA GB10", Driver: "580.95.05"}}
					hf.Memory = observe.Memory{TotalBytes: 128 << 30, AvailableBytes: 12 << 30}
				}
				// No serve runs yet: its memory is what the OS leaves now.
				f.Hosts[`gpu["h1"]`].Records = nil
			},
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 1
  gpu_memory_utilization = 0.85
`,
			want: []string{"Error: the model will not fit: 14.19 GiB of weights per GPU, 10.20 GiB available (0.85 × 12.00 GiB of memory the OS leaves on the node"},
			at:   "gpu_memory_utilization", wantErrors: 1, wantNotes: []string{archNote}},
		{name: "preflight-fits", model: "qwen2.5-7b-instruct",
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 32768
`,
			notWant: []string{"Error:", "Warning:"}, wantNotes: []string{qwenTP4Note("32,768", "2,048", "155.74"), archNote}},
		// The head's image (its ID) answered an earlier apply: a vLLM
		// 0.1.x with transformers 4.31 knows neither Qwen2ForCausalLM nor
		// qwen2, and the plan says so at the model's line.
		{name: "preflight-arch-unknown", model: "qwen2.5-7b-instruct", image: "registry-old-image.json",
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 32768
`,
			want: []string{`Error: the image's vLLM and transformers do not know the model: architecture Qwen2ForCausalLM, model_type "qwen2" (vLLM 0.1.2, transformers 4.31.0)`,
				"Fix: Use an image whose vLLM and transformers know Qwen2ForCausalLM", "The image vllm/vllm-openai:v0.11.0 (abababababab) answered on 2026-11-29 (asked by apply; it took 7.5 s)."},
			at: "model", wantErrors: 1, wantNotes: []string{qwenTP4Note("32,768", "2,048", "155.74")}},
		// An image that knows the model: nothing to say, nothing to ask.
		{name: "preflight-arch-known", model: "qwen2.5-7b-instruct", image: "registry-new-image.json",
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 32768
`,
			notWant: []string{"Error:", "Warning:"}, wantNotes: []string{qwenTP4Note("32,768", "2,048", "155.74")}},
		// An explicit KV cache too small for one max_model_len request:
		// vLLM's own check, before anything starts (the real vLLM's
		// refusal: testdata/realvllm/kv-cache-too-small.log).
		{name: "preflight-kv-cache-too-small", model: "qwen2.5-7b-instruct",
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 32768
  extra_args             = ["--kv-cache-memory-bytes", "256M"]
`,
			want: []string{"Error: max_model_len 32768 does not fit the KV cache: one request takes 2048 blocks of 16 tokens, --kv-cache-memory-bytes 268,435,456 holds 1170 (one kept free)",
				"vLLM refuses to start: \"To serve at least one request with the model's max seq len (32768), (0.44 GiB KV cache is needed, which is larger than the available KV cache memory (0.25 GiB). Based on the available memory, the estimated maximum model length is 18704.\"",
				"Fix: Lower max_model_len to at most 18704, or raise --kv-cache-memory-bytes in extra_args to at least 469,991,424."},
			at: "max_model_len", wantErrors: 1, wantNotes: []string{archNote}},
		// The head's image is vLLM's CPU build (the lab's): blocks of 128
		// tokens, "CPU" in vLLM's line, exactly from the explicit size.
		{name: "preflight-kv-capacity-cpu", model: "qwen2.5-7b-instruct", image: "registry-new-image.json",
			imageEdit: func(s string) string { return strings.Replace(s, `"vllm": "0.11.0"`, `"vllm": "0.32.0+cpu"`, 1) },
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 32768
  extra_args             = ["--kv-cache-memory-bytes", "1G", "--dtype", "float32"]
`,
			notWant:   []string{"Error:", "Warning:"},
			wantNotes: []string{`vllm_serve.llama: vLLM will report "CPU KV cache size: 37,376 tokens, Maximum concurrency for 32,768 tokens per request: 1.14x" (--kv-cache-memory-bytes 1,073,741,824: 292 blocks of 128 tokens (vLLM's CPU default), 3,670,016 bytes each; 256 blocks a 32,768-token request).`}},
		// The image's vLLM is the CPU build as vLLM itself says (query 2:
		// platform "cpu") though its version has no "+cpu" (vLLM picked the
		// platform otherwise, VLLM_TARGET_DEVICE=cpu): CPU blocks of 128
		// tokens (issue 39: 16 were quoted).
		{name: "preflight-kv-capacity-cpu-platform", model: "qwen2.5-7b-instruct", image: "registry-new-image.json",
			imageEdit: func(s string) string {
				return strings.Replace(s, `"vllm": "0.11.0"`, `"query": 2, "vllm": "0.32.0", "platform": "cpu"`, 1)
			},
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 32768
  extra_args             = ["--kv-cache-memory-bytes", "1G", "--dtype", "float32"]
`,
			notWant:   []string{"Error:", "Warning:"},
			wantNotes: []string{`vllm_serve.llama: vLLM will report "CPU KV cache size: 37,376 tokens, Maximum concurrency for 32,768 tokens per request: 1.14x" (--kv-cache-memory-bytes 1,073,741,824: 292 blocks of 128 tokens (vLLM's CPU default), 3,670,016 bytes each; 256 blocks a 32,768-token request).`}},
		// extra_args are checked against the image's own vLLM: 0.32.0+cpu
		// is 0.32.0's table, which no longer has --swap-space (0.17.1 had).
		{name: "preflight-extra-args-image-version", model: "qwen2.5-7b-instruct", image: "registry-new-image.json",
			imageEdit: func(s string) string {
				return strings.Replace(s, `"vllm": "0.11.0"`, `"query": 2, "vllm": "0.32.0+cpu", "platform": "cpu"`, 1)
			},
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 32768
  extra_args             = ["--swap-space", "4"]
`,
			want: []string{"Error: vLLM 0.32.0+cpu in the image has no option --swap-space"},
			at:   "extra_args", wantErrors: 1,
			wantNotes: []string{`vllm_serve.llama: vLLM will report at most "GPU KV cache size: 5,103,296 tokens, Maximum concurrency for 32,768 tokens per request: 155.74x" (68.14 GiB a GPU after the weights, before vLLM's memory profile takes its share: 318,956 blocks of 16 tokens (vLLM's GPU default), 229,376 bytes each; 2,048 blocks a 32,768-token request).`}},
		// An image whose vLLM has no table: plan says so instead of passing
		// silently.
		{name: "preflight-extra-args-no-table", model: "qwen2.5-7b-instruct", image: "registry-new-image.json",
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 32768
  extra_args             = ["--swap-space", "4"]
`,
			notWant: []string{"Error:"},
			wantNotes: []string{"the extra_args of vllm_serve.llama were not checked against the image's vLLM 0.11.0: rayform has no option table for vLLM 0.11.0 (it has 0.17.1, 0.32.0, 0.33.0).",
				`vllm_serve.llama: vLLM will report at most "GPU KV cache size: 5,103,296 tokens, Maximum concurrency for 32,768 tokens per request: 155.74x" (68.14 GiB a GPU after the weights, before vLLM's memory profile takes its share: 318,956 blocks of 16 tokens (vLLM's GPU default), 229,376 bytes each; 2,048 blocks a 32,768-token request).`}},
		// An image whose python3 cannot import vLLM (the lab's): the
		// apply that asked it said so once; a plan says it again only when
		// the check would matter, for a model the serve did not run yet
		// (issue 33 item 8: every lab plan carried the note).
		{name: "preflight-arch-no-vllm-new-model", model: "qwen2.5-7b-instruct", image: "registry-no-vllm.json",
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 4
  max_model_len          = 32768
`,
			notWant:   []string{"Error:", "Warning:"},
			wantNotes: []string{qwenTP4Note("32,768", "2,048", "155.74"), "the architecture check of vllm_serve.llama did not run: the image's python3 cannot import vLLM's model registry (ModuleNotFoundError: No module named 'vllm') (the image vllm/vllm-openai:v0.11.0 (abababababab) answered on 2026-11-29): vLLM itself will say whether it knows Qwen/Qwen2.5-7B-Instruct when it starts."}},
		{name: "preflight-arch-no-vllm-same-model", model: "llama-3.2-1b-instruct", image: "registry-no-vllm.json",
			serve: `  model                  = "meta-llama/Llama-3.1-405B-Instruct-FP8"
  tensor_parallel_size   = 4
  max_model_len          = 8192
`,
			notWant: []string{"Error:", "Warning:", "architecture check"}},
		{name: "preflight-not-downloaded",
			serve: `  model                  = "Qwen/Qwen2.5-7B-Instruct"
  tensor_parallel_size   = 3
`,
			notWant:   []string{"Error:", "Warning:", "attention heads"},
			wantNotes: []string{"the model preflight of vllm_serve.llama did not run: gpu[\"h1\"] has no /data/hf/hub/models--Qwen--Qwen2.5-7B-Instruct/refs/main: the model is not in its Hugging Face cache yet (vLLM downloads it at start)."}},
	}
}

// TestPlanPreflight: the plan judges a serve about to start against its
// model's config.json as the head's probe read it, and reports each misfit
// at the attribute's file:line (goldens testdata/plan/preflight-*).
func TestPlanPreflight(t *testing.T) {
	fixed := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, tc := range preflightCases() {
		t.Run(tc.name, func(t *testing.T) {
			cc := convergedCluster(t, 3)
			src := preflightConfig(t, tc.serve)
			if tc.config != nil {
				src = tc.config(src)
			}
			addModel(t, cc.facts.Hosts[`gpu["h1"]`], tc.model, tc.serve)
			if tc.facts != nil {
				tc.facts(cc.facts)
			}
			st, err := state.New(benchProject)
			if err != nil {
				t.Fatal(err)
			}
			if tc.image != "" {
				data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "modelfit", tc.image))
				if err != nil {
					t.Fatal(err)
				}
				if tc.imageEdit != nil {
					data = []byte(tc.imageEdit(string(data)))
				}
				var im state.Image
				if err := json.Unmarshal(data, &im); err != nil {
					t.Fatal(err)
				}
				im.Seconds, im.CheckedAt = 7.5, time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
				st.SetImage(headImageID(t, cc.facts), im)
			}
			cfg := planConfig(t, src, cc.facts)
			// What the probe reads is what ObserveSpec asks for.
			spec := ObserveSpec(cfg, st, benchProject)
			if n := len(spec.Hosts[`gpu["h1"]`].Reads); n != 4 {
				t.Fatalf("the head's probe reads %d files, want config.json, the index and the serve's failed-start record and recipe: %+v", n, spec.Hosts[`gpu["h1"]`].Reads)
			}
			res := Plan(PlanInput{Config: cfg, Facts: cc.facts, State: st, Project: benchProject})
			var txt, js bytes.Buffer
			if err := plan.RenderText(&txt, res.Plan, plan.TextOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := plan.RenderJSON(&js, res.Plan, plan.JSONOptions{Version: "test", Now: func() time.Time { return fixed }}); err != nil {
				t.Fatal(err)
			}
			if tc.at != "" {
				line := 1 + strings.Count(src[:strings.Index(src, "  "+tc.at+" ")], "\n")
				for _, f := range res.Plan.Findings {
					if f.Address != "vllm_serve.llama" {
						continue
					}
					if want := fmt.Sprintf("main.hcl:%d", line); f.At != want {
						t.Errorf("finding %q at %q, want %s (%s)", f.Summary, f.At, want, tc.at)
					}
				}
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
			if n := len(res.Plan.Errors()); n != tc.wantErrors {
				t.Errorf("%d error findings, want %d: %+v", n, tc.wantErrors, res.Plan.Findings)
			}
			if n := len(res.Plan.Findings) - len(res.Plan.Errors()); n != tc.wantWarn {
				t.Errorf("%d warnings, want %d: %+v", n, tc.wantWarn, res.Plan.Findings)
			}
			if strings.Join(res.Notes, "\n") != strings.Join(tc.wantNotes, "\n") {
				t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(res.Notes, "\n"), strings.Join(tc.wantNotes, "\n"))
			}
			golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".txt"), txt.Bytes())
			golden(t, filepath.Join("..", "..", "testdata", "plan", tc.name+".json"), js.Bytes())
		})
	}
}

// preflightConfig is the bench configuration with the HF cache mounted
// from preflightHFDir and the serve's body replaced.
func preflightConfig(t *testing.T, serve string) string {
	t.Helper()
	src := string(benchConfig(3))
	src = strings.Replace(src, "  memory_monitor = false\n", "  memory_monitor = false\n  volumes        = [\""+preflightHFDir+":/root/.cache/huggingface\"]\n", 1)
	start := strings.Index(src, "  model ")
	end := strings.Index(src[start:], "}\n") + start
	if start < 0 || end < start {
		t.Fatal("bench config has no serve body")
	}
	return src[:start] + "  served_model_name      = \"llama-405b\"\n" + serve + src[end:]
}

// addModel puts a model's files from testdata/modelfit into the head's
// facts, as the probe reads them from the HF cache at refs/main; with dir
// "", the answers of a cache without the model (no refs/main).
func addModel(t *testing.T, head *observe.HostFacts, dir, serve string) {
	t.Helper()
	id := between(serve, `model                  = "`, `"`)
	repo := preflightHFDir + "/hub/models--" + strings.ReplaceAll(id, "/", "--")
	snap := repo + "/snapshots/" + observe.RefPlaceholder
	ref := repo + "/refs/main"
	commit := "4e20de362430cd3b72f300e6b0f18e50e7166e08"
	if head.Reads == nil {
		head.Reads = map[string]observe.ReadResult{}
	}
	for _, f := range []string{"config.json", "model.safetensors.index.json"} {
		key := observe.ReadProbe{Path: snap + "/" + f, Ref: ref}.Key()
		if dir == "" {
			head.Reads[key] = observe.ReadResult{}
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "modelfit", dir, f))
		if os.IsNotExist(err) {
			head.Reads[key] = observe.ReadResult{Ref: commit}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		head.Reads[key] = observe.ReadResult{Exists: true, Ref: commit, Content: string(b)}
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}

// headImageID is the ID of the image the head's probe found.
func headImageID(t *testing.T, f *observe.Facts) string {
	t.Helper()
	for _, im := range f.Hosts[`gpu["h1"]`].Images {
		if im.Present && im.ID != "" {
			return im.ID
		}
	}
	t.Fatal("the head has no image")
	return ""
}
