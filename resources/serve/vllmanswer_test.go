package serve_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/serve"
)

// TestParseVLLM: vLLM's /health and /v1/models answers as the server
// writes them; a /v1/models that is not JSON is an error of that check;
// nothing when the port was not probed.
func TestParseVLLM(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "observe", "vllm-models.json"))
	if err != nil {
		t.Fatal(err)
	}
	ok := observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 200}, Via: "curl"}
	models := ok
	models.Body = string(body)
	v := serve.ParseVLLM(ok, models, true)
	if !v.Observed || v.Health.Status != 200 || len(v.Models) != 1 || v.Models[0].ID != "qwen3.5-122b" || v.ModelsCheck.Err != "" {
		t.Errorf("answers: %+v", v)
	}
	models.Body = "{"
	if v := serve.ParseVLLM(ok, models, true); v.ModelsCheck.Err == "" || v.Models != nil {
		t.Errorf("malformed /v1/models: %+v", v)
	}
	if v := serve.ParseVLLM(ok, models, false); v.Observed {
		t.Errorf("not probed: %+v", v)
	}
}
