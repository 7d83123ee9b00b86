package modelfit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dir holds real config.json files of public models (sources in SOURCES.md).
const dir = "../../testdata/modelfit"

func load(t *testing.T, model string) ModelConfig {
	t.Helper()
	return loadConfigFile(t, filepath.Join(dir, model, "config.json"))
}

// loadConfigFile parses the config.json at path.
func loadConfigFile(t *testing.T, path string) ModelConfig {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseConfig(t *testing.T) {
	cases := []struct {
		model                      string
		heads, kv, layers, headDim int
		maxLen                     int
		maxLenKey, ropeType        string
	}{
		{"qwen2.5-7b-instruct", 28, 4, 28, 128, 32768, "max_position_embeddings", ""},
		{"qwen2-7b-instruct", 28, 4, 28, 128, 32768, "max_position_embeddings", ""},
		// llama3 RoPE scaling: max_position_embeddings is already the
		// scaled length; vLLM does not multiply by the factor 32.
		{"llama-3.2-1b-instruct", 32, 8, 16, 64, 131072, "max_position_embeddings", "llama3"},
	}
	for _, tc := range cases {
		c := load(t, tc.model)
		if c.NumAttentionHeads != tc.heads || c.NumKVHeads != tc.kv || c.NumHiddenLayers != tc.layers || c.HeadDim != tc.headDim ||
			c.MaxLen != tc.maxLen || c.MaxLenKey != tc.maxLenKey || c.RopeType != tc.ropeType {
			t.Errorf("%s: %+v", tc.model, c)
		}
	}
}

// TestYarnMaxLen: the rope_scaling block Qwen's model card tells users to
// add (https://huggingface.co/Qwen/Qwen2.5-7B-Instruct) makes vLLM derive
// original_max_position_embeddings × factor.
func TestYarnMaxLen(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(dir, "qwen2.5-7b-instruct", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	yarn := strings.Replace(string(data), `"rope_theta": 1000000.0,`,
		`"rope_theta": 1000000.0, "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},`, 1)
	c, err := ParseConfig([]byte(yarn))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxLen != 131072 || c.RopeType != "yarn" {
		t.Errorf("yarn: MaxLen = %d, RopeType = %q", c.MaxLen, c.RopeType)
	}
	if f := Check(c, Serve{MaxModelLen: 131072}); len(f) != 0 {
		t.Errorf("131072 with YaRN: %+v", f)
	}
	// transformers v5 writes rope_parameters instead.
	v5 := strings.Replace(yarn, `"rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}`,
		`"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1000000.0}`, 1)
	if c, _ := ParseConfig([]byte(v5)); c.MaxLen != 131072 {
		t.Errorf("rope_parameters: MaxLen = %d", c.MaxLen)
	}
}

func TestWeightBytes(t *testing.T) {
	idx, err := os.ReadFile(filepath.Join(dir, "qwen2.5-7b-instruct", "model.safetensors.index.json"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := WeightBytes(idx, nil)
	if err != nil || n != 15231233024 {
		t.Errorf("WeightBytes = %d, %v", n, err)
	}
	// With the shard files' sizes, their sum (headers included) wins.
	withMap := []byte(`{"metadata": {"total_size": 100}, "weight_map": {"a.w": "model-00001-of-00002.safetensors", "b.w": "model-00002-of-00002.safetensors"}}`)
	n, err = WeightBytes(withMap, map[string]int64{"model-00001-of-00002.safetensors": 70, "model-00002-of-00002.safetensors": 40})
	if err != nil || n != 110 {
		t.Errorf("with sizes: %d, %v", n, err)
	}
	if n, err = WeightBytes(withMap, map[string]int64{"model-00001-of-00002.safetensors": 70}); err != nil || n != 100 {
		t.Errorf("incomplete sizes fall back to total_size: %d, %v", n, err)
	}
	if _, err := WeightBytes([]byte(`{"weight_map": {}}`), nil); err == nil {
		t.Error("no size: want an error")
	}
}

// TestCheck: table of serves against real configurations; each case names
// the findings it expects by attribute and severity and a substring.
func TestCheck(t *testing.T) {
	const mib = 1 << 20
	h200 := int64(143771) * mib // nvidia-smi memory.total on H200 (real-outputs.md)
	qwenWeights := int64(15231233024)
	type want struct {
		sev  Severity
		attr string
		text string
	}
	cases := []struct {
		name  string
		model string
		serve Serve
		want  []want
	}{
		{"qwen 7b on one H200 fits", "qwen2.5-7b-instruct", Serve{TP: 1, GPUMemoryBytes: h200, WeightBytes: qwenWeights}, nil},
		{"tp 3 on 28 heads", "qwen2.5-7b-instruct", Serve{TP: 3}, []want{{Error, "tensor_parallel_size", "tensor_parallel_size 3 does not divide the model's 28 attention heads"}}},
		{"tp 8 on 28 heads", "qwen2.5-7b-instruct", Serve{TP: 8}, []want{{Error, "tensor_parallel_size", "(1, 2, 4, 28)"}}},
		// 28 % 7 == 0, but 4 KV heads cannot be replicated over 7 ranks.
		{"tp 7 on 4 kv heads", "qwen2.5-7b-instruct", Serve{TP: 7}, []want{{Error, "tensor_parallel_size", "does not fit the model's 4 KV heads"}}},
		{"tp 28 replicates 4 kv heads", "qwen2.5-7b-instruct", Serve{TP: 28}, nil},
		{"tp 3 on 32 heads (the issue's example)", "llama-3.2-1b-instruct", Serve{TP: 3}, []want{{Error, "tensor_parallel_size", "32 attention heads"}}},
		{"tp 16 replicates 8 kv heads", "llama-3.2-1b-instruct", Serve{TP: 16}, nil},
		{"pp beyond layers", "llama-3.2-1b-instruct", Serve{PP: 17}, []want{{Error, "pipeline_parallel_size", "pipeline_parallel_size 17 exceeds the model's 16 layers"}}},
		{"pp equal to layers", "llama-3.2-1b-instruct", Serve{PP: 16}, nil},
		{"max_model_len too long", "qwen2.5-7b-instruct", Serve{MaxModelLen: 65536},
			[]want{{Error, "max_model_len", "max_model_len 65536 exceeds the 32768 tokens the model supports (max_position_embeddings)"}}},
		{"max_model_len too long, vLLM's override", "qwen2.5-7b-instruct", Serve{MaxModelLen: 65536, AllowLongMaxModelLen: true},
			[]want{{Warning, "max_model_len", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"}}},
		{"llama3 rope: 131072 fits", "llama-3.2-1b-instruct", Serve{MaxModelLen: 131072}, nil},
		{"llama3 rope: factor not applied", "llama-3.2-1b-instruct", Serve{MaxModelLen: 262144},
			[]want{{Error, "max_model_len", "131072 tokens the model supports (max_position_embeddings, RoPE scaling llama3)"}}},
		// 12,490,457,088 bytes: a 12 GB card, as in the public lesson that
		// quotes this index (code index id 70725777914).
		{"weights larger than the GPU", "qwen2.5-7b-instruct", Serve{GPUMemoryBytes: 12490457088, WeightBytes: qwenWeights},
			[]want{{Error, "gpu_memory_utilization", "will not fit: 14.19 GiB of weights per GPU, 10.47 GiB available"}}},
		{"tp 2 halves the weights and fits", "qwen2.5-7b-instruct", Serve{TP: 2, GPUMemoryBytes: 12490457088, WeightBytes: qwenWeights}, nil},
		{"no room for one sequence's KV cache", "qwen2.5-7b-instruct", Serve{GPUMemoryBytes: 17 * 1 << 30, WeightBytes: qwenWeights},
			[]want{{Error, "max_model_len", "1.75 GiB of KV cache per GPU"}}},
		{"tight", "qwen2.5-7b-instruct", Serve{GPUMemoryBytes: 18 * 1 << 30, WeightBytes: qwenWeights},
			[]want{{Warning, "gpu_memory_utilization", "tight: 14.19 GiB of weights + 1.75 GiB of KV cache"}}},
		{"unified memory words", "qwen2.5-7b-instruct", Serve{GPUMemoryBytes: 12490457088, WeightBytes: qwenWeights, UnifiedMemory: true},
			[]want{{Error, "gpu_memory_utilization", "memory the OS leaves on the node"}}},
		{"several at once, errors first", "llama-3.2-1b-instruct", Serve{TP: 3, PP: 20, MaxModelLen: 200000, AllowLongMaxModelLen: true},
			[]want{{Error, "tensor_parallel_size", "32 attention heads"}, {Error, "pipeline_parallel_size", "16 layers"}, {Warning, "max_model_len", "200000"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(load(t, tc.model), tc.serve)
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				all := g.Summary + "\n" + g.Detail + "\n" + g.Fix
				if g.Severity != w.sev || g.Attribute != w.attr || !strings.Contains(all, w.text) {
					t.Errorf("finding %d = %s %s %q, want %s %s containing %q", i, g.Severity, g.Attribute, all, w.sev, w.attr, w.text)
				}
				if g.Fix == "" || g.Detail == "" {
					t.Errorf("finding %d lacks a fix or detail: %+v", i, g)
				}
			}
		})
	}
}

func TestParseConfigMultimodalAndMLA(t *testing.T) {
	// Shapes of real configurations, reduced to the keys read: a
	// multimodal model's text_config, and DeepSeek's MLA (kv_lora_rank).
	mm := []byte(`{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "num_attention_heads": 8, "num_key_value_heads": 4, "num_hidden_layers": 34, "head_dim": 256, "hidden_size": 2560, "max_position_embeddings": 131072, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}}`)
	c, err := ParseConfig(mm)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumAttentionHeads != 8 || c.NumKVHeads != 4 || c.MaxLen != 131072 {
		t.Errorf("gemma3: %+v (Gemma 3's length is already scaled)", c)
	}
	mla := []byte(`{"model_type": "deepseek_v3", "num_attention_heads": 128, "num_key_value_heads": 128, "num_hidden_layers": 61, "kv_lora_rank": 512, "max_position_embeddings": 163840, "rope_scaling": {"factor": 40, "original_max_position_embeddings": 4096, "type": "yarn"}}`)
	c, err = ParseConfig(mla)
	if err != nil {
		t.Fatal(err)
	}
	if !c.MLA || c.MaxLen != 163840 {
		t.Errorf("deepseek: %+v", c)
	}
	if f := Check(c, Serve{TP: 16}); len(f) != 0 {
		t.Errorf("MLA has no KV-head constraint: %+v", f)
	}
}
