// vLLM's answers: what a server's port says to GET /health and
// /v1/models.

package serve

import (
	"encoding/json"

	"github.com/rayform/rayform/engine/observe"
)

// Model is one entry of vLLM's /v1/models.
type Model struct {
	ID          string `json:"id"`
	Root        string `json:"root,omitempty"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
	OwnedBy     string `json:"owned_by,omitempty"`
}

// VLLM is what a vLLM server's port answered (see ParseVLLM).
type VLLM struct {
	// Observed is false when its port was not probed.
	Observed bool              `json:"observed"`
	Health   observe.HTTPCheck `json:"health"`
	Models   []Model           `json:"models,omitempty"`
	// ModelsCheck is the HTTP outcome of /v1/models.
	ModelsCheck observe.HTTPCheck `json:"models_check"`
}

// ParseVLLM reads a vLLM server's answers to GET /health and /v1/models
// (HostFacts.HTTP of their URLs; ok false when they were not probed).
func ParseVLLM(health, models observe.HTTPResult, ok bool) VLLM {
	if !ok {
		return VLLM{}
	}
	v := VLLM{Observed: true, Health: health.HTTPCheck}
	v.ModelsCheck, v.Models = ParseModels(models)
	return v
}

// ParseModels reads vLLM's /v1/models from its answer: the HTTP outcome
// (with the decoding error, if any) and the models.
func ParseModels(r observe.HTTPResult) (observe.HTTPCheck, []Model) {
	hc := r.HTTPCheck
	if hc.Status != 200 {
		return hc, nil
	}
	var resp struct {
		Data []Model `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.Body), &resp); err != nil {
		hc.Err = "/v1/models: " + err.Error()
		return hc, nil
	}
	return hc, resp.Data
}
