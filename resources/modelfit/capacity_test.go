package modelfit

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// realVLLM holds logs of the real vLLM 0.32.0 (the lab image's CPU build)
// serving the lab's tiny Llama, whose config.json is next to them.
const realVLLM = "../../testdata/realvllm"

var (
	// vLLM's "non-default args: {...}" line: the arguments of the run.
	argRE = func(name, value string) *regexp.Regexp {
		return regexp.MustCompile(`'` + name + `': ` + value)
	}
	capacityRE = regexp.MustCompile(`(?:CPU|GPU) KV cache size: [0-9,]+ tokens, Maximum concurrency for [0-9,]+ tokens per request: [0-9.]+x`)
	refusedRE  = regexp.MustCompile(`To serve at least one request with the model's max seq len \(\d+\), \([0-9.]+ GiB KV cache is needed, which is larger than the available KV cache memory \([0-9.]+ GiB\)\.(?: Based on the available memory, the estimated maximum model length is \d+\.)?`)
)

// realRun reads a real vLLM log: the serve as its "non-default args" line
// gives it (on vLLM's CPU build) and the whole text.
func realRun(t *testing.T, name string) (Serve, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(realVLLM, name))
	if err != nil {
		t.Fatal(err)
	}
	log := string(raw)
	var args string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "non-default args: {") {
			args = l
			break
		}
	}
	if args == "" {
		t.Fatalf("%s has no non-default args line", name)
	}
	num := func(key string) int64 {
		m := argRE(key, `(\d+)`).FindStringSubmatch(args)
		if m == nil {
			return 0
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	s := Serve{CPU: true, TP: int(num("tensor_parallel_size")), PP: int(num("pipeline_parallel_size")),
		MaxModelLen: int(num("max_model_len")), KVCacheMemoryBytes: num("kv_cache_memory_bytes"), BlockSize: int(num("block_size"))}
	if m := argRE("dtype", `'(\w+)'`).FindStringSubmatch(args); m != nil {
		s.Dtype = m[1]
	}
	if s.MaxModelLen == 0 || s.KVCacheMemoryBytes == 0 {
		t.Fatalf("%s: the run set no max_model_len or kv_cache_memory_bytes: %s", name, args)
	}
	return s, log
}

func tinyLlama(t *testing.T) ModelConfig {
	t.Helper()
	return loadConfigFile(t, filepath.Join(realVLLM, "tiny-llama-config.json"))
}

// The prediction for each real run's own arguments is the line the real
// vLLM logged, digit for digit: the lab's serve (64 MiB, 4096 tokens:
// 32,768 tokens, 8.00x) and a run whose sizes do not divide evenly
// (50,000,000 bytes, 1000 tokens: 190 blocks of 128 tokens, 8 a request:
// 23,750 tokens, 23.75x), and the lab's serve with tensor_parallel_size 2
// (65,536 tokens, 16.00x).
func TestKVCapacityMatchesRealVLLM(t *testing.T) {
	c := tinyLlama(t)
	for _, tc := range []struct{ log, want string }{
		{"capacity-64M.log", "CPU KV cache size: 32,768 tokens, Maximum concurrency for 4,096 tokens per request: 8.00x"},
		{"capacity-50m.log", "CPU KV cache size: 23,750 tokens, Maximum concurrency for 1,000 tokens per request: 23.75x"},
		// tensor_parallel_size 2: each rank holds one of the 2 KV heads,
		// so the same bytes hold twice the tokens.
		{"capacity-tp2-64M.log", "CPU KV cache size: 65,536 tokens, Maximum concurrency for 4,096 tokens per request: 16.00x"},
	} {
		t.Run(tc.log, func(t *testing.T) {
			s, log := realRun(t, tc.log)
			logged := capacityRE.FindString(log)
			if logged != tc.want {
				t.Fatalf("the log's line is %q, the test expects %q", logged, tc.want)
			}
			capy, ok := KVCapacity(c, s)
			if !ok || !capy.Exact {
				t.Fatalf("no exact prediction for %+v: %+v", s, capy)
			}
			if got := capy.LogLine(); got != logged {
				t.Errorf("predicted %q (%s), vLLM logged %q", got, capy, logged)
			}
			if !capy.Fits() || len(Check(c, s)) != 0 {
				t.Errorf("a serve vLLM started is judged not to fit: %+v", Check(c, s))
			}
		})
	}
}

// The real vLLM refused the lab's tiny Llama with max_model_len 4096 and a
// 4 MiB KV cache; Check refuses it first, quoting vLLM's message with its
// numbers (0.01 GiB needed, 0.0 GiB available, 1920 tokens estimated).
func TestKVCacheTooSmallMatchesRealVLLM(t *testing.T) {
	c := tinyLlama(t)
	s, log := realRun(t, "kv-cache-too-small.log")
	logged := refusedRE.FindString(log)
	if logged == "" {
		t.Fatal("the log lacks vLLM's refusal")
	}
	fs := Check(c, s)
	if len(fs) != 1 || fs[0].Severity != Error || fs[0].Attribute != "max_model_len" {
		t.Fatalf("findings %+v, want one error at max_model_len", fs)
	}
	if !strings.Contains(fs[0].Detail, logged) {
		t.Errorf("the finding does not quote vLLM's message %q:\n%s", logged, fs[0].Detail)
	}
	if !strings.Contains(fs[0].Fix, "at most 1920") {
		t.Errorf("fix %q", fs[0].Fix)
	}
}

// The formula's parts: tensor parallelism splits the KV heads (replicated
// below one a rank), pipeline stages the layers (the largest stage
// counts), --block-size and the dtypes change the block; without an
// explicit size on GPUs the prediction is an upper bound.
func TestKVCapacityParts(t *testing.T) {
	c := tinyLlama(t) // 2 layers, 2 KV heads, head_dim 64
	base := Serve{CPU: true, MaxModelLen: 4096, KVCacheMemoryBytes: 64 << 20, Dtype: "float32"}
	tests := []struct {
		name          string
		edit          func(*Serve)
		bytesPerBlock int64
		blocks        int64
		tokens        int64
	}{
		{"lab", func(*Serve) {}, 2 * 128 * 2 * 2 * 64 * 4, 256, 32768},
		{"tp 2 splits the KV heads", func(s *Serve) { s.TP = 2 }, 2 * 128 * 2 * 1 * 64 * 4, 512, 65536},
		{"tp 4 replicates them", func(s *Serve) { s.TP = 4 }, 2 * 128 * 2 * 1 * 64 * 4, 512, 65536},
		{"pp 2 halves the layers", func(s *Serve) { s.PP = 2 }, 1 * 128 * 2 * 2 * 64 * 4, 512, 65536},
		{"block size 16", func(s *Serve) { s.BlockSize = 16 }, 2 * 16 * 2 * 2 * 64 * 4, 2048, 32768},
		{"bfloat16", func(s *Serve) { s.Dtype = "bfloat16" }, 2 * 128 * 2 * 2 * 64 * 2, 512, 65536},
		{"fp8 KV cache", func(s *Serve) { s.KVCacheDtype = "fp8" }, 2 * 128 * 2 * 2 * 64 * 1, 1024, 131072},
		{"GPU: block 16", func(s *Serve) { s.CPU = false }, 2 * 16 * 2 * 2 * 64 * 4, 2048, 32768},
	}
	for _, tc := range tests {
		s := base
		tc.edit(&s)
		capy, ok := KVCapacity(c, s)
		if !ok || capy.BytesPerBlock != tc.bytesPerBlock || capy.Blocks != tc.blocks || capy.Tokens != tc.tokens {
			t.Errorf("%s: %+v, want %d bytes a block, %d blocks, %d tokens", tc.name, capy, tc.bytesPerBlock, tc.blocks, tc.tokens)
		}
	}
	// An explicit size on an image not asked yet: the platform is unknown,
	// the line is given without its device word.
	unknown := base
	unknown.CPU = false
	if capy, _ := KVCapacity(c, unknown); capy.Device != "" || !strings.HasPrefix(capy.LogLine(), "KV cache size: 32,768 tokens") {
		t.Errorf("unknown platform: %q", capy.LogLine())
	}
	known := unknown
	known.PlatformKnown = true
	if capy, _ := KVCapacity(c, known); !strings.HasPrefix(capy.LogLine(), "GPU KV cache size: ") {
		t.Errorf("a CUDA image: %q", capy.LogLine())
	}
	gpu := Serve{MaxModelLen: 4096, GPUMemoryBytes: 80 << 30, GPUMemoryUtilization: 0.5, WeightBytes: 8 << 30, TP: 2}
	capy, ok := KVCapacity(c, gpu)
	if !ok || capy.Exact || capy.KVBytes != 36<<30 || capy.Device != "GPU" || !strings.Contains(capy.String(), "before vLLM's memory profile") {
		t.Errorf("GPU upper bound: %+v %s", capy, capy)
	}
	if _, ok := KVCapacity(c, Serve{MaxModelLen: 4096}); ok {
		t.Error("a prediction with no KV cache size known")
	}
}

// The real vLLM refused the tiny Llama (4 attention heads) with
// tensor_parallel_size 3 (testdata/realvllm/tp-heads.log); Check refuses it
// first, quoting the same sentence.
func TestTPHeadsMatchesRealVLLM(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(realVLLM, "tp-heads.log"))
	if err != nil {
		t.Fatal(err)
	}
	logged := regexp.MustCompile(`Total number of attention heads \(\d+\) must be divisible by tensor parallel size \(\d+\)\.`).FindString(string(raw))
	if logged == "" {
		t.Fatal("the log lacks vLLM's refusal")
	}
	fs := Check(tinyLlama(t), Serve{TP: 3, MaxModelLen: 4096})
	if len(fs) == 0 || fs[0].Attribute != "tensor_parallel_size" || !strings.Contains(fs[0].Detail, logged) {
		t.Errorf("findings %+v do not quote %q at tensor_parallel_size", fs, logged)
	}
}
