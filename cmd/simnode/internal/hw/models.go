package hw

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Model describes what vLLM needs to know about a checkpoint.
type Model struct {
	// Architecture is what "Resolved architecture:" prints.
	Architecture string `json:"architecture"`
	// WeightsGiB is the whole checkpoint; each of TP x PP ranks loads its share.
	WeightsGiB float64 `json:"weights_gib"`
	// Shards is the number of safetensors files.
	Shards int `json:"shards"`
	// MaxModelLen is the derived context length.
	MaxModelLen int `json:"max_model_len"`
	// KVBytesPerToken is the KV cache size of one token for the whole model
	// (split across TP ranks).
	KVBytesPerToken int64 `json:"kv_bytes_per_token"`
}

// builtinModels are checkpoints the seeds and docs use.
var builtinModels = map[string]Model{
	"Qwen/Qwen3.5-122B-A10B-FP8":          {Architecture: "Qwen3_5MoeForConditionalGeneration", WeightsGiB: 119.0, Shards: 39, MaxModelLen: 262144, KVBytesPerToken: 98304},
	"meta-llama/Llama-3.3-70B-Instruct":   {Architecture: "LlamaForCausalLM", WeightsGiB: 131.4, Shards: 30, MaxModelLen: 131072, KVBytesPerToken: 327680},
	"Qwen/Qwen3-0.6B":                     {Architecture: "Qwen3ForCausalLM", WeightsGiB: 1.4, Shards: 1, MaxModelLen: 40960, KVBytesPerToken: 114688},
	"Qwen/Qwen2.5-1.5B-Instruct":          {Architecture: "Qwen2ForCausalLM", WeightsGiB: 2.9, Shards: 1, MaxModelLen: 32768, KVBytesPerToken: 28672},
	"facebook/opt-125m":                   {Architecture: "OPTForCausalLM", WeightsGiB: 0.24, Shards: 1, MaxModelLen: 2048, KVBytesPerToken: 36864},
	"swiss-ai/Apertus-8B-Instruct-2509":   {Architecture: "ApertusForCausalLM", WeightsGiB: 15.0, Shards: 4, MaxModelLen: 65536, KVBytesPerToken: 131072},
	"meta-llama/Llama-3.1-8B-Instruct":    {Architecture: "LlamaForCausalLM", WeightsGiB: 14.96, Shards: 4, MaxModelLen: 131072, KVBytesPerToken: 131072},
	"openai/gpt-oss-120b":                 {Architecture: "GptOssForCausalLM", WeightsGiB: 60.8, Shards: 15, MaxModelLen: 131072, KVBytesPerToken: 73728},
	"nvidia/Llama-3.3-70B-Instruct-FP4":   {Architecture: "LlamaForCausalLM", WeightsGiB: 39.7, Shards: 9, MaxModelLen: 131072, KVBytesPerToken: 327680},
	"hellohal2064/Qwen3.5-122B-A10B-FP8":  {Architecture: "Qwen3_5MoeForConditionalGeneration", WeightsGiB: 119.0, Shards: 39, MaxModelLen: 262144, KVBytesPerToken: 98304},
	"Qwen/Qwen3-Coder-30B-A3B-Instruct":   {Architecture: "Qwen3MoeForCausalLM", WeightsGiB: 56.9, Shards: 16, MaxModelLen: 262144, KVBytesPerToken: 98304},
	"RedHatAI/Llama-3.3-70B-Instruct-FP8": {Architecture: "LlamaForCausalLM", WeightsGiB: 67.7, Shards: 15, MaxModelLen: 131072, KVBytesPerToken: 327680},
}

var paramsRE = regexp.MustCompile(`(?i)(\d+(?:\.\d+)?)B`)

// LookupModel returns the catalog entry for name: the hardware file's
// entries, then the built-in list, then an estimate from the name ("8B" ->
// 8e9 parameters, 1 byte each with FP8/FP4 in the name, else 2).
func (h *Hardware) LookupModel(name string) Model {
	if h != nil {
		if m, ok := h.Models[name]; ok {
			return fillModel(name, m)
		}
	}
	if m, ok := builtinModels[name]; ok {
		return m
	}
	return fillModel(name, Model{})
}

func fillModel(name string, m Model) Model {
	if m.WeightsGiB <= 0 {
		params := 1.0
		if sm := paramsRE.FindAllStringSubmatch(name, -1); len(sm) > 0 {
			if f, err := strconv.ParseFloat(sm[0][1], 64); err == nil && f > 0 {
				params = f
			}
		}
		bytesPer := 2.0
		up := strings.ToUpper(name)
		if strings.Contains(up, "FP8") || strings.Contains(up, "FP4") || strings.Contains(up, "AWQ") {
			bytesPer = 1
		}
		m.WeightsGiB = math.Round(params*1e9*bytesPer/(1<<30)*100) / 100
	}
	if m.Shards <= 0 {
		m.Shards = int(math.Max(1, math.Ceil(m.WeightsGiB/4.6)))
	}
	if m.Architecture == "" {
		m.Architecture = "LlamaForCausalLM"
		if strings.Contains(strings.ToLower(name), "qwen") {
			m.Architecture = "Qwen3ForCausalLM"
		}
	}
	if m.MaxModelLen <= 0 {
		m.MaxModelLen = 32768
	}
	if m.KVBytesPerToken <= 0 {
		m.KVBytesPerToken = 131072
	}
	return m
}
