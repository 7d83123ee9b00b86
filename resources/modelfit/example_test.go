package modelfit_test

import (
	"fmt"
	"os"

	"github.com/rayform/rayform/resources/modelfit"
)

// Llama 3.2 1B (32 heads, 8 KV heads, 16 layers) asked to run with
// tensor_parallel_size 3 and max_model_len 200000.
func ExampleCheck() {
	data, err := os.ReadFile("../../testdata/modelfit/llama-3.2-1b-instruct/config.json")
	if err != nil {
		panic(err)
	}
	c, err := modelfit.ParseConfig(data)
	if err != nil {
		panic(err)
	}
	for _, f := range modelfit.Check(c, modelfit.Serve{TP: 3, MaxModelLen: 200000}) {
		fmt.Printf("%s: %s: %s\n  %s\n  fix: %s\n", f.Severity, f.Attribute, f.Summary, f.Detail, f.Fix)
	}
	// Output:
	// error: tensor_parallel_size: tensor_parallel_size 3 does not divide the model's 32 attention heads
	//   vLLM refuses to start: "Total number of attention heads (32) must be divisible by tensor parallel size (3)."
	//   fix: Use a tensor_parallel_size that divides 32 and its KV heads (1, 2, 4, 8, 16, 32); spread the other GPUs with pipeline_parallel_size.
	// error: max_model_len: max_model_len 200000 exceeds the 131072 tokens the model supports (max_position_embeddings, RoPE scaling llama3)
	//   vLLM refuses a max_model_len above the length it derives from config.json: positions past it give NaN (RoPE) or out-of-bounds errors (absolute positions).
	//   fix: Set max_model_len to at most 131072, or use the model's long-context variant (a RoPE scaling in its config, as its card describes).
}
