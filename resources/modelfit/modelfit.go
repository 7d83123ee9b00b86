// Package modelfit judges, before anything starts, whether a model fits a
// vllm_serve: from the model's own config.json (and its weight sizes) and
// the serve's tensor/pipeline parallel sizes, max_model_len,
// gpu_memory_utilization and the GPUs' memory. It is pure: the caller
// reads config.json and model.safetensors.index.json (from a node that
// has the weights, or the Hub) and maps each Finding's Attribute to the
// file:line of that attribute.
//
// The checks follow vLLM's own, so a finding here is an error vLLM would
// raise after the weights were downloaded and the cluster was up:
//
//   - ModelConfig.verify_with_parallel_config: "Total number of attention
//     heads (N) must be divisible by tensor parallel size (M)."
//   - the model code (e.g. LlamaAttention): KV heads are split across TP
//     ranks when there are at least as many as ranks (num_kv_heads % tp
//     == 0), else replicated (tp % num_kv_heads == 0); otherwise an
//     AssertionError while the model is built.
//   - get_pp_indices: pipeline stages split num_hidden_layers; more stages
//     than layers leaves stages without a layer.
//   - _get_and_verify_max_len: the smallest of max_position_embeddings,
//     n_positions, max_seq_len, seq_length, model_max_length,
//     max_target_positions, max_sequence_length, max_seq_length, seq_len
//     (model_max_length wins when present), times the RoPE scaling factor
//     except for llama3, su and longrope (yarn: original_max_position_
//     embeddings × factor; Gemma 3 is already scaled); a larger
//     max_model_len fails unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.
//   - the KV cache must hold at least one max_model_len sequence next to
//     the weights inside gpu_memory_utilization × GPU memory.
//
// Sources: vllm-project/vllm vllm/config/model.py (verify_with_parallel_
// config, get_total_num_kv_heads, _get_and_verify_max_len) and
// vllm/model_executor/models/llama.py (LlamaAttention).
package modelfit

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ModelConfig is what modelfit reads from a model's config.json (the text
// config of a multimodal model).
type ModelConfig struct {
	ModelType     string
	Architectures []string
	// NumAttentionHeads and NumKVHeads (equal to the heads when the config
	// names no KV heads; 0 for MLA models, whose KV cache is not per head).
	NumAttentionHeads int
	NumKVHeads        int
	NumHiddenLayers   int
	HiddenSize        int
	HeadDim           int
	// MaxLen is the context length vLLM derives (see the package doc);
	// MaxLenKey the attribute it came from; 0 when the config names none
	// (vLLM then assumes 2048).
	MaxLen    int
	MaxLenKey string
	// RopeType and RopeFactor are the RoPE scaling of the config, if any.
	RopeType   string
	RopeFactor float64
	// ModelMaxLength is model_max_length when the config has it: vLLM
	// accepts a max_model_len up to it.
	ModelMaxLength int
	// DtypeBytes is the size of one weight/KV element vLLM uses by default
	// (2 for bfloat16 and float16; float32 models are cast to 16 bits).
	DtypeBytes int
	// MLA is DeepSeek's multi-head latent attention (kv_lora_rank set).
	MLA bool
	// AutoMap is set when config.json has an auto_map: the model brings
	// its own config and model code (loaded with --trust-remote-code).
	AutoMap bool
}

// maxLenKeys are vLLM's possible_keys, in its order.
var maxLenKeys = []string{"max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
	"max_target_positions", "max_sequence_length", "max_seq_length", "seq_len"}

// mlaTypes are the model types vLLM treats as DeepSeek MLA when
// kv_lora_rank is set (ModelConfig.is_deepseek_mla).
var mlaTypes = map[string]bool{"deepseek_v2": true, "deepseek_v3": true, "deepseek_v32": true, "deepseek_mtp": true,
	"kimi_k2": true, "kimi_linear": true, "longcat_flash": true, "pangu_ultra_moe": true, "pangu_ultra_moe_mtp": true}

// ParseConfig reads config.json.
func ParseConfig(data []byte) (ModelConfig, error) {
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		return ModelConfig{}, fmt.Errorf("config.json: %w", err)
	}
	c := ModelConfig{ModelType: str(top["model_type"]), AutoMap: top["auto_map"] != nil}
	if a, ok := top["architectures"].([]any); ok {
		for _, v := range a {
			c.Architectures = append(c.Architectures, str(v))
		}
	}
	// A multimodal model's language model is described by text_config.
	m := top
	if tc, ok := top["text_config"].(map[string]any); ok {
		m = tc
	}
	if mt := str(m["model_type"]); mt != "" && c.ModelType == "" {
		c.ModelType = mt
	}
	textType := orDefault(str(m["model_type"]), c.ModelType)
	c.parseAttention(top, m, textType)
	// bfloat16 and float16 are 2 bytes, and vLLM's "auto" dtype casts a
	// float32 model to 16 bits on GPUs (_resolve_auto_dtype).
	c.DtypeBytes = 2
	c.MaxLen = int(c.contextLength(m, textType))
	return c, nil
}

// parseAttention reads the language model m's attention shape: heads,
// layers, head size, MLA, and the KV heads as vLLM counts them
// (get_total_num_kv_heads).
func (c *ModelConfig) parseAttention(top, m map[string]any, textType string) {
	c.NumAttentionHeads = integer(m["num_attention_heads"])
	c.NumHiddenLayers = integer(m["num_hidden_layers"])
	c.HiddenSize = integer(m["hidden_size"])
	c.HeadDim = integer(m["head_dim"])
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	c.MLA = mlaTypes[textType] && m["kv_lora_rank"] != nil
	switch {
	case c.MLA:
		c.NumKVHeads = 0
	case boolean(m["multi_query"]) && !boolean(top["new_decoder_architecture"]):
		c.NumKVHeads = 1
	default:
		c.NumKVHeads = c.NumAttentionHeads
		for _, k := range []string{"n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"} {
			if v := integer(m[k]); v > 0 {
				c.NumKVHeads = v
				break
			}
		}
	}
}

// contextLength is the context length of the language model m as
// _get_and_verify_max_len derives it: the smallest of the length keys
// (model_max_length wins), 2048 without any, times the RoPE scaling
// factor; it records the key and the RoPE type and factor in c.
func (c *ModelConfig) contextLength(m map[string]any, textType string) float64 {
	derived := math.Inf(1)
	for _, k := range maxLenKeys {
		if v := number(m[k]); v > 0 {
			if v < derived {
				derived, c.MaxLenKey = v, k
			}
		}
	}
	if v := number(m["model_max_length"]); v > 0 {
		derived, c.MaxLenKey = v, "model_max_length"
		c.ModelMaxLength = int(v)
	}
	if math.IsInf(derived, 1) {
		derived, c.MaxLenKey = 2048, ""
	}
	rope := ropeParams(m)
	if rope == nil || strings.Contains(textType, "gemma3") {
		return derived
	}
	factor := 1.0
	for _, rp := range rope {
		t := orDefault(str(rp["rope_type"]), str(rp["type"]))
		c.RopeType = t
		if t == "su" || t == "longrope" || t == "llama3" {
			continue
		}
		if f := number(rp["factor"]); f > 0 {
			factor = f
		}
		if t == "yarn" {
			if o := number(rp["original_max_position_embeddings"]); o > 0 {
				derived = o
			}
		}
	}
	c.RopeFactor = factor
	return derived * factor
}

// ropeParams returns the RoPE scaling dictionaries: transformers v4's
// rope_scaling, or v5's rope_parameters (one, or one per layer type).
func ropeParams(m map[string]any) []map[string]any {
	for _, key := range []string{"rope_parameters", "rope_scaling"} {
		rp, ok := m[key].(map[string]any)
		if !ok {
			continue
		}
		if _, flat := rp["rope_type"]; flat {
			return []map[string]any{rp}
		}
		if _, flat := rp["type"]; flat {
			return []map[string]any{rp}
		}
		var out []map[string]any
		keys := make([]string, 0, len(rp))
		for k := range rp {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if sub, ok := rp[k].(map[string]any); ok {
				out = append(out, sub)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// WeightBytes returns the size of the weights from
// model.safetensors.index.json: the sum of the sizes of the shard files it
// names when sizes has them all (file name → bytes, from the disk or the
// Hub's listing), else its metadata.total_size (the tensors' bytes).
func WeightBytes(index []byte, sizes map[string]int64) (int64, error) {
	var idx struct {
		Metadata struct {
			TotalSize json.Number `json:"total_size"`
		} `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return 0, fmt.Errorf("model.safetensors.index.json: %w", err)
	}
	files := map[string]bool{}
	for _, f := range idx.WeightMap {
		files[f] = true
	}
	if len(files) > 0 && sizes != nil {
		var sum int64
		complete := true
		for f := range files {
			n, ok := sizes[f]
			if !ok {
				complete = false
				break
			}
			sum += n
		}
		if complete {
			return sum, nil
		}
	}
	if idx.Metadata.TotalSize == "" {
		return 0, fmt.Errorf("model.safetensors.index.json: no metadata.total_size and no shard sizes")
	}
	n, err := strconv.ParseFloat(string(idx.Metadata.TotalSize), 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("model.safetensors.index.json: metadata.total_size %q", idx.Metadata.TotalSize)
	}
	return int64(n), nil
}

// Serve is what the vllm_serve asks for and what the GPUs have.
type Serve struct {
	// TP and PP are tensor_parallel_size and pipeline_parallel_size (0 = 1).
	TP, PP int
	// MaxModelLen is max_model_len (0 = the model's).
	MaxModelLen int
	// AllowLongMaxModelLen is VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in the
	// serve's environment: vLLM's own override.
	AllowLongMaxModelLen bool
	// GPUMemoryUtilization is gpu_memory_utilization (0 = vLLM's 0.9).
	GPUMemoryUtilization float64
	// GPUMemoryBytes is each GPU's memory (0 = unknown: no memory check).
	// On unified-memory hosts (GB10, GH200) the caller passes what the OS
	// leaves (MemAvailable), not the nominal size.
	GPUMemoryBytes int64
	// UnifiedMemory words the memory findings for such hosts.
	UnifiedMemory bool
	// WeightBytes is the size of the weights (0 = unknown).
	WeightBytes int64
	// KVCacheMemoryBytes is --kv-cache-memory-bytes (extra_args): each
	// worker's KV cache, which vLLM then takes as given instead of sizing
	// it from gpu_memory_utilization (0 = not given).
	KVCacheMemoryBytes int64
	// BlockSize is --block-size (0 = the platform's default).
	BlockSize int
	// Dtype and KVCacheDtype are --dtype and --kv-cache-dtype ("" = auto).
	Dtype, KVCacheDtype string
	// CPU is set when the image's vLLM is a CPU build (its version ends in
	// "+cpu", which is how vLLM itself picks its CPU platform): no GPU
	// memory is involved, blocks hold 128 tokens, the log says "CPU".
	// PlatformKnown says the image's vLLM was asked (CPU is then the
	// answer, not a default).
	CPU, PlatformKnown bool
}

// Severity says whether a finding stops the plan.
type Severity int

// Severities.
const (
	// Error: vLLM would refuse or fail; the plan stops.
	Error Severity = iota
	// Warning: it may start, but close to a limit.
	Warning
)

func (s Severity) String() string {
	if s == Error {
		return "error"
	}
	return "warning"
}

// Finding is one misfit.
type Finding struct {
	Severity Severity
	// Attribute is the vllm_serve attribute to point at:
	// tensor_parallel_size, pipeline_parallel_size, max_model_len,
	// gpu_memory_utilization.
	Attribute string
	// Summary is one line with the numbers; Detail explains; Fix says what
	// to change.
	Summary, Detail, Fix string
}

// gib is one GiB.
const gib = 1 << 30

// Check returns the findings of c served as s, errors first.
func Check(c ModelConfig, s Serve) []Finding {
	var out []Finding
	for _, check := range []func(ModelConfig, Serve) []Finding{
		checkTensorParallel,
		checkPipelineStages,
		checkContextLength,
		checkKVCacheSize,
		checkMemory,
	} {
		out = append(out, check(c, s)...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Severity < out[j].Severity })
	return out
}

// checkTensorParallel judges the attention heads, then the KV heads,
// across tensor-parallel ranks.
func checkTensorParallel(c ModelConfig, s Serve) []Finding {
	tp := max(s.TP, 1)
	if c.NumAttentionHeads > 0 && c.NumAttentionHeads%tp != 0 {
		return []Finding{{
			Severity:  Error,
			Attribute: "tensor_parallel_size",
			Summary:   fmt.Sprintf("tensor_parallel_size %d does not divide the model's %d attention heads", tp, c.NumAttentionHeads),
			Detail: fmt.Sprintf("vLLM refuses to start: \"Total number of attention heads (%d) must be divisible by tensor parallel size (%d).\"",
				c.NumAttentionHeads, tp),
			Fix: "Use a tensor_parallel_size that divides " + strconv.Itoa(c.NumAttentionHeads) + " and its KV heads (" + validTP(c) +
				"); spread the other GPUs with pipeline_parallel_size.",
		}}
	}
	kv := c.NumKVHeads
	if kv <= 0 || c.MLA {
		return nil
	}
	if bad := (kv >= tp && kv%tp != 0) || (kv < tp && tp%kv != 0); !bad {
		return nil
	}
	how := fmt.Sprintf("%d KV heads cannot be split evenly over %d ranks", kv, tp)
	if kv < tp {
		how = fmt.Sprintf("%d KV heads cannot be replicated evenly over %d ranks (%d %% %d = %d)", kv, tp, tp, kv, tp%kv)
	}
	return []Finding{{
		Severity:  Error,
		Attribute: "tensor_parallel_size",
		Summary:   fmt.Sprintf("tensor_parallel_size %d does not fit the model's %d KV heads", tp, kv),
		Detail:    "vLLM's model code splits the KV heads across tensor-parallel ranks, or replicates them when there are fewer heads than ranks; " + how + ", so building the model fails with an AssertionError after the weights are fetched.",
		Fix:       "Use a tensor_parallel_size that divides " + strconv.Itoa(c.NumAttentionHeads) + " and fits " + strconv.Itoa(kv) + " KV heads (" + validTP(c) + ").",
	}}
}

// checkPipelineStages judges the pipeline stages over the layers.
func checkPipelineStages(c ModelConfig, s Serve) []Finding {
	pp := max(s.PP, 1)
	if c.NumHiddenLayers <= 0 || pp <= c.NumHiddenLayers {
		return nil
	}
	return []Finding{{
		Severity:  Error,
		Attribute: "pipeline_parallel_size",
		Summary:   fmt.Sprintf("pipeline_parallel_size %d exceeds the model's %d layers", pp, c.NumHiddenLayers),
		Detail:    "Each pipeline stage holds a contiguous block of layers; with more stages than layers some stages hold none.",
		Fix:       fmt.Sprintf("Use pipeline_parallel_size at most %d.", c.NumHiddenLayers),
	}}
}

// checkContextLength judges max_model_len against the context length the
// model supports (a warning when VLLM_ALLOW_LONG_MAX_MODEL_LEN is set).
func checkContextLength(c ModelConfig, s Serve) []Finding {
	maxLen := c.MaxLen
	if s.MaxModelLen <= 0 || maxLen <= 0 || s.MaxModelLen <= maxLen || (c.ModelMaxLength != 0 && s.MaxModelLen <= c.ModelMaxLength) {
		return nil
	}
	from := c.MaxLenKey
	if from == "" {
		from = "vLLM's default when config.json names no length"
	}
	if c.RopeType != "" {
		from += fmt.Sprintf(", RoPE scaling %s", c.RopeType)
		if c.RopeFactor != 1 && c.RopeFactor != 0 {
			from += " × " + strconv.FormatFloat(c.RopeFactor, 'f', -1, 64)
		}
	}
	f := Finding{
		Severity:  Error,
		Attribute: "max_model_len",
		Summary:   fmt.Sprintf("max_model_len %d exceeds the %d tokens the model supports (%s)", s.MaxModelLen, maxLen, from),
		Detail:    "vLLM refuses a max_model_len above the length it derives from config.json: positions past it give NaN (RoPE) or out-of-bounds errors (absolute positions).",
		Fix:       fmt.Sprintf("Set max_model_len to at most %d, or use the model's long-context variant (a RoPE scaling in its config, as its card describes).", maxLen),
	}
	if s.AllowLongMaxModelLen {
		f.Severity = Warning
		f.Detail = "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 makes vLLM accept it with a warning; positions past " + strconv.Itoa(maxLen) + " give NaN (RoPE) or out-of-bounds errors (absolute positions)."
	}
	return []Finding{f}
}

// checkKVCacheSize judges an explicit KV cache size (--kv-cache-memory-bytes)
// exactly as vLLM's own check does.
func checkKVCacheSize(c ModelConfig, s Serve) []Finding {
	capy, ok := KVCapacity(c, s)
	if !ok || !capy.Exact || capy.Fits() {
		return nil
	}
	needed := capy.BlocksPerRequest * capy.BytesPerBlock
	est := ""
	if l := capy.EstimatedMaxLen(); l > 0 {
		est = fmt.Sprintf(" Based on the available memory, the estimated maximum model length is %d.", l)
	}
	return []Finding{{
		Severity:  Error,
		Attribute: "max_model_len",
		Summary: fmt.Sprintf("max_model_len %d does not fit the KV cache: one request takes %d blocks of %d tokens, --kv-cache-memory-bytes %s holds %d (one kept free)",
			capy.MaxModelLen, capy.BlocksPerRequest, capy.BlockSize, commas(capy.KVBytes), capy.Blocks),
		Detail: fmt.Sprintf("vLLM refuses to start: \"To serve at least one request with the model's max seq len (%d), (%s GiB KV cache is needed, which is larger than the available KV cache memory (%s GiB).%s\" (%s)",
			capy.MaxModelLen, pyGiB(needed), pyGiB(capy.KVBytes-capy.BytesPerBlock), est, capy),
		Fix: fmt.Sprintf("Lower max_model_len to at most %d, or raise --kv-cache-memory-bytes in extra_args to at least %s.",
			capy.EstimatedMaxLen(), commas((capy.BlocksPerRequest+1)*capy.BytesPerBlock)),
	}}
}

// gpuBudget is one GPU's memory as a serve uses it: what vLLM may take
// (gpu_memory_utilization of it), the weights' share and the KV cache of
// one ctx-token sequence, and the headroom rayform asks for the rest.
type gpuBudget struct {
	util, budget, weights, kv, headroom float64
	ctx                                 int
	where                               string // how budget was reckoned
}

// budgetOf reckons one GPU's memory for serve s of model c.
func budgetOf(c ModelConfig, s Serve) gpuBudget {
	tp, pp := max(s.TP, 1), max(s.PP, 1)
	b := gpuBudget{util: s.GPUMemoryUtilization}
	if b.util <= 0 {
		b.util = 0.9
	}
	b.budget = b.util * float64(s.GPUMemoryBytes)
	b.weights = float64(s.WeightBytes) / float64(tp*pp)
	mem := "GPU memory"
	if s.UnifiedMemory {
		mem = "memory the OS leaves on the node"
	}
	maxLen := c.MaxLen
	b.ctx = s.MaxModelLen
	if b.ctx == 0 || b.ctx > maxLen && maxLen > 0 && !s.AllowLongMaxModelLen {
		b.ctx = maxLen
	}
	b.kv = kvBytesPerToken(c, s) * float64(b.ctx)
	if s.KVCacheMemoryBytes > 0 {
		b.kv = float64(s.KVCacheMemoryBytes) // judged exactly above; here it takes its room
	}
	b.headroom = math.Max(gib, 0.1*b.budget)
	b.where = fmt.Sprintf("%s × %.2f GiB of %s = %.2f GiB", strconv.FormatFloat(b.util, 'f', -1, 64), float64(s.GPUMemoryBytes)/gib, mem, b.budget/gib)
	return b
}

// checkMemory judges the weights and one sequence's KV cache against each
// GPU's memory (on vLLM's CPU build the host's memory, which rayform does
// not judge here).
func checkMemory(c ModelConfig, s Serve) []Finding {
	if s.CPU || s.GPUMemoryBytes <= 0 || s.WeightBytes <= 0 {
		return nil
	}
	tp, pp := max(s.TP, 1), max(s.PP, 1)
	b := budgetOf(c, s)
	switch {
	case b.weights > b.budget:
		return []Finding{{
			Severity:  Error,
			Attribute: "gpu_memory_utilization",
			Summary:   fmt.Sprintf("the model will not fit: %.2f GiB of weights per GPU, %.2f GiB available (%s)", b.weights/gib, b.budget/gib, b.where),
			Detail:    fmt.Sprintf("%.2f GiB of weights over tensor_parallel_size %d × pipeline_parallel_size %d GPUs is %.2f GiB each, before any KV cache.", float64(s.WeightBytes)/gib, tp, pp, b.weights/gib),
			Fix:       fmt.Sprintf("Spread it over more GPUs (at least %d in all), or use a quantized variant of the model.", int(math.Ceil(float64(s.WeightBytes)/b.budget))),
		}}
	case b.kv > 0 && b.weights+b.kv > b.budget && s.KVCacheMemoryBytes == 0:
		return []Finding{{
			Severity:  Error,
			Attribute: "max_model_len",
			Summary:   fmt.Sprintf("no room for the KV cache of one %d-token sequence: %.2f GiB of weights + %.2f GiB of KV cache per GPU > %.2f GiB available", b.ctx, b.weights/gib, b.kv/gib, b.budget/gib),
			Detail:    "vLLM refuses to start when its KV cache cannot hold one max_model_len sequence (\"The model's max seq len ... is larger than the maximum number of tokens that can be stored in KV cache\").",
			Fix:       fmt.Sprintf("Lower max_model_len (about %d fits), raise gpu_memory_utilization, or spread the model over more GPUs.", fitLen(b.budget-b.weights, kvBytesPerToken(c, s))),
		}}
	case b.weights+b.kv+b.headroom > b.budget:
		return []Finding{{
			Severity:  Warning,
			Attribute: "gpu_memory_utilization",
			Summary:   fmt.Sprintf("tight: %.2f GiB of weights + %.2f GiB of KV cache for one %d-token sequence per GPU leave %.2f GiB of the %.2f GiB available", b.weights/gib, b.kv/gib, b.ctx, (b.budget-b.weights-b.kv)/gib, b.budget/gib),
			Detail:    fmt.Sprintf("Activations, CUDA graphs and the rest of the KV cache need room too (rayform's estimate: %.2f GiB); vLLM may start with little concurrency or fail in its memory profile.", b.headroom/gib),
			Fix:       "Raise gpu_memory_utilization, lower max_model_len, or spread the model over more GPUs.",
		}}
	}
	return nil
}

// kvBytesPerToken is the KV cache one token takes on one GPU: keys and
// values for the layers of one pipeline stage and the KV heads of one
// tensor-parallel rank (at least one, replicated).
func kvBytesPerToken(c ModelConfig, s Serve) float64 {
	tp, pp := max(s.TP, 1), max(s.PP, 1)
	layers := int(math.Ceil(float64(c.NumHiddenLayers) / float64(pp)))
	return float64(int64(layers) * kvBytesPerLayerToken(c, s, tp))
}

// pyGiB is vLLM's format_gib: bytes in GiB rounded to 2 decimals, as
// Python prints a float ("0.01", "0.0").
func pyGiB(b int64) string {
	v := strconv.FormatFloat(math.Round(float64(b)/gib*100)/100, 'f', -1, 64)
	if !strings.Contains(v, ".") {
		v += ".0"
	}
	return v
}

// fitLen is the longest sequence whose KV cache fits in room bytes,
// rounded down to a multiple of 1024.
func fitLen(room, perToken float64) int {
	if perToken <= 0 || room <= 0 {
		return 0
	}
	return int(room/perToken) / 1024 * 1024
}

// validTP lists the tensor_parallel_size values up to 64 that vLLM accepts
// for c: dividing the heads, and splitting or replicating the KV heads.
func validTP(c ModelConfig) string {
	var ok []string
	for t := 1; t <= 64 && t <= max(c.NumAttentionHeads, 1); t++ {
		if c.NumAttentionHeads%t != 0 {
			continue
		}
		if kv := c.NumKVHeads; kv > 0 && !c.MLA && ((kv >= t && kv%t != 0) || (kv < t && t%kv != 0)) {
			continue
		}
		ok = append(ok, strconv.Itoa(t))
	}
	return strings.Join(ok, ", ")
}

// JSON helpers: config.json values are numbers, strings, bools or null.

func str(v any) string {
	s, _ := v.(string)
	return s
}

func number(v any) float64 {
	f, _ := v.(float64)
	return f
}

func integer(v any) int { return int(number(v)) }

func boolean(v any) bool {
	b, _ := v.(bool)
	return b
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
