package modelfit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The KV cache vLLM will have, computed as vLLM 0.32 computes it
// (vllm/v1/core/kv_cache_utils.py): one block holds BlockSize tokens of
// every attention layer of a worker (keys and values of the worker's KV
// heads), so a block is
//
//	layers of the pipeline stage × 2 × BlockSize × KV heads per rank × head_dim × element bytes
//
// (get_kv_cache_config_from_groups: num_blocks = available_memory //
// bytes_per_block; every worker gets the smallest count). A request at
// max_model_len takes cdiv(max_model_len, BlockSize) blocks
// (get_max_concurrency_for_kv_cache_config), so the maximum concurrency is
// num_blocks / that, and the token count vLLM logs is
// int(concurrency × max_model_len) (get_kv_cache_capacity), in the line
//
//	CPU KV cache size: 23,750 tokens, Maximum concurrency for 1,000 tokens per request: 23.75x
//
// ("GPU KV cache size" on CUDA). Before that, _check_enough_kv_cache_memory
// refuses to start when one max_model_len request does not fit in the
// memory less the null block the block pool keeps: "To serve at least one
// request with the model's max seq len (N), (X GiB KV cache is needed,
// which is larger than the available KV cache memory (Y GiB). Based on the
// available memory, the estimated maximum model length is L."

// Block sizes vLLM picks when --block-size is not given: the CPU platform
// sets 128 (vllm/platforms/cpu.py); on CUDA the attention backend decides,
// 16 for the usual ones.
const (
	BlockSizeCPU  = 128
	BlockSizeCUDA = 16
)

// Capacity is the KV cache of a serve as vLLM will log it.
type Capacity struct {
	// Device is what vLLM's line starts with: "CPU" or "GPU"; "" when the
	// platform is not known (the image was not asked yet).
	Device string
	// BlockSize is the tokens of one block; BlockSizeAssumed says it is the
	// platform's default, not --block-size.
	BlockSize        int
	BlockSizeAssumed bool
	// BytesPerBlock is one block of every layer of one worker.
	BytesPerBlock int64
	// KVBytes is each worker's KV cache memory; Exact says it is
	// --kv-cache-memory-bytes (vLLM uses it as given), not an upper bound
	// derived from gpu_memory_utilization (vLLM also subtracts what its
	// memory profile finds: activations, CUDA graphs, the non-torch
	// allocations).
	KVBytes int64
	Exact   bool
	// Blocks is the number of blocks; BlocksPerRequest those one
	// max_model_len request takes.
	Blocks, BlocksPerRequest int64
	MaxModelLen              int
	// Tokens and Concurrency are the two numbers of vLLM's line.
	Tokens      int64
	Concurrency float64
}

// LogLine is vLLM's line for c, without the logger's prefix (and without
// the device word when the platform is not known: the rest of the line is
// the same on both).
func (c Capacity) LogLine() string {
	return strings.TrimSpace(fmt.Sprintf("%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx",
		c.Device, commas(c.Tokens), commas(int64(c.MaxModelLen)), c.Concurrency))
}

// Fits reports whether vLLM accepts the serve: one max_model_len request
// fits in the blocks less the null block.
func (c Capacity) Fits() bool { return c.Blocks-1 >= c.BlocksPerRequest }

// EstimatedMaxLen is the longest max_model_len whose request fits, as
// vLLM's estimate_max_model_len finds it (whole blocks, less the null
// block).
func (c Capacity) EstimatedMaxLen() int {
	if c.Blocks <= 1 {
		return 0
	}
	return int(c.Blocks-1) * c.BlockSize
}

// String says what the prediction rests on, for plan: "--kv-cache-memory-bytes
// 67,108,864: 256 blocks of 128 tokens (vLLM's CPU default), 262,144 bytes
// each; 32 blocks a 4,096-token request".
func (c Capacity) String() string {
	from := fmt.Sprintf("--kv-cache-memory-bytes %s", commas(c.KVBytes))
	if !c.Exact {
		from = fmt.Sprintf("%.2f GiB a GPU after the weights, before vLLM's memory profile takes its share", float64(c.KVBytes)/gib)
	}
	bs := fmt.Sprintf("%d tokens", c.BlockSize)
	switch {
	case c.BlockSizeAssumed && c.Device == "":
		bs += " (vLLM's CUDA default; 128 on its CPU build)"
	case c.BlockSizeAssumed:
		bs += fmt.Sprintf(" (vLLM's %s default)", c.Device)
	}
	return fmt.Sprintf("%s: %s blocks of %s, %s bytes each; %s blocks a %s-token request",
		from, commas(c.Blocks), bs, commas(c.BytesPerBlock), commas(c.BlocksPerRequest), commas(int64(c.MaxModelLen)))
}

// KVCapacity predicts the KV cache vLLM will report for c served as s: from
// s.KVCacheMemoryBytes exactly, else (on GPUs whose memory and the
// weights' size are known) an upper bound from gpu_memory_utilization. ok
// is false when nothing can be said (an MLA model, an unknown KV size).
func KVCapacity(c ModelConfig, s Serve) (Capacity, bool) {
	tp, pp := max(s.TP, 1), max(s.PP, 1)
	maxLen := s.MaxModelLen
	if maxLen == 0 {
		maxLen = c.MaxLen
	}
	perLayerToken := kvBytesPerLayerToken(c, s, tp)
	if perLayerToken == 0 || maxLen <= 0 {
		return Capacity{}, false
	}
	capy := Capacity{BlockSize: s.BlockSize, MaxModelLen: maxLen}
	switch {
	case s.CPU:
		capy.Device = "CPU"
	case s.PlatformKnown || s.KVCacheMemoryBytes == 0:
		// Asked, or sized from the GPUs' memory below.
		capy.Device = "GPU"
	}
	if capy.BlockSize == 0 {
		capy.BlockSize, capy.BlockSizeAssumed = BlockSizeCUDA, true
		if s.CPU {
			capy.BlockSize = BlockSizeCPU
		}
	}
	layers := int64(math.Ceil(float64(c.NumHiddenLayers) / float64(pp)))
	capy.BytesPerBlock = layers * int64(capy.BlockSize) * perLayerToken
	switch {
	case s.KVCacheMemoryBytes > 0:
		capy.KVBytes, capy.Exact = s.KVCacheMemoryBytes, true
	case !s.CPU && s.GPUMemoryBytes > 0 && s.WeightBytes > 0:
		util := s.GPUMemoryUtilization
		if util <= 0 {
			util = 0.9
		}
		capy.KVBytes = int64(util*float64(s.GPUMemoryBytes)) - s.WeightBytes/int64(tp*pp)
		if capy.KVBytes <= 0 {
			return Capacity{}, false
		}
	default:
		return Capacity{}, false
	}
	capy.Blocks = capy.KVBytes / capy.BytesPerBlock
	capy.BlocksPerRequest = int64((maxLen + capy.BlockSize - 1) / capy.BlockSize)
	capy.Concurrency = float64(capy.Blocks) / float64(capy.BlocksPerRequest)
	capy.Tokens = int64(capy.Concurrency * float64(maxLen))
	return capy, true
}

// kvBytesPerLayerToken is the KV cache of one token in one layer of one
// worker: keys and values of the rank's KV heads (at least one,
// replicated), in the KV cache's element size.
func kvBytesPerLayerToken(c ModelConfig, s Serve, tp int) int64 {
	if c.MLA || c.NumKVHeads == 0 || c.HeadDim == 0 || c.NumHiddenLayers == 0 {
		return 0
	}
	heads := max(1, c.NumKVHeads/tp)
	return int64(2 * heads * c.HeadDim * kvElementBytes(c, s))
}

// kvElementBytes is the size of one KV cache element: --kv-cache-dtype
// when it names one, else the model's dtype (--dtype, or the config's
// default).
func kvElementBytes(c ModelConfig, s Serve) int {
	switch kv := strings.ToLower(s.KVCacheDtype); {
	case strings.HasPrefix(kv, "fp8"):
		return 1
	case kv == "bfloat16" || kv == "float16" || kv == "half":
		return 2
	}
	if n := DtypeBytes(s.Dtype); n > 0 {
		return n
	}
	return max(c.DtypeBytes, 1)
}

// DtypeBytes is the element size of a vLLM --dtype value; 0 for "auto"
// and unknown names (the config's default applies).
func DtypeBytes(dtype string) int {
	switch strings.ToLower(dtype) {
	case "float32", "float":
		return 4
	case "float16", "half", "bfloat16":
		return 2
	}
	return 0
}

// commas writes n as Python's f"{n:,}" does.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
