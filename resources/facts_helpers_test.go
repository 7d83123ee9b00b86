package resources_test

import (
	"encoding/json"
	"fmt"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources"
)

// The ports of the synthetic cluster's head (the defaults): Ray's
// dashboard and the serve.
const (
	benchDashPort  = 8265
	benchServePort = 8000
)

func dashURL(port int) string {
	return fmt.Sprintf("http://127.0.0.1:%d/api/v0/nodes?limit=1000", port)
}

// setRayTable makes hf's answer to the node-table probe on the dashboard's
// port say t, as Ray's dashboard would (/api/v0/nodes), or fail with t.Err.
func setRayTable(hf *observe.HostFacts, port int, t observe.RayNodeFacts) {
	if hf.HTTP == nil {
		hf.HTTP = map[string]observe.HTTPResult{}
	}
	if t.Err != "" {
		hf.HTTP[dashURL(port)] = observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Refused: true, Err: t.Err}, Via: "curl"}
		return
	}
	rows := t.List
	if rows == nil {
		rows = []observe.RayNode{}
	}
	total := len(rows)
	if t.Partial {
		total++
	}
	body, _ := json.Marshal(map[string]any{"result": true, "msg": "",
		"data": map[string]any{"result": map[string]any{"total": total, "num_after_truncation": len(rows), "result": rows}}})
	hf.HTTP[dashURL(port)] = observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 200}, Via: "curl", Body: string(body)}
}

// rayTable reads hf's answer to the node-table probe on port.
func rayTable(hf *observe.HostFacts, port int) observe.RayNodeFacts {
	r, ok := hf.HTTP[dashURL(port)]
	return observe.ParseRayNodes(r, ok)
}

// setServeAnswer makes hf's answers to a serve's probes on port say v, as
// vLLM would (/health, /v1/models); v not Observed removes them.
func setServeAnswer(hf *observe.HostFacts, port int, v observe.VLLM) {
	health := fmt.Sprintf("http://127.0.0.1:%d/health", port)
	models := fmt.Sprintf("http://127.0.0.1:%d/v1/models", port)
	if hf.HTTP == nil {
		hf.HTTP = map[string]observe.HTTPResult{}
	}
	if !v.Observed {
		delete(hf.HTTP, health)
		delete(hf.HTTP, models)
		return
	}
	hf.HTTP[health] = observe.HTTPResult{HTTPCheck: v.Health, Via: "curl"}
	r := observe.HTTPResult{HTTPCheck: v.ModelsCheck, Via: "curl"}
	if v.ModelsCheck.Status == 200 {
		list := v.Models
		if list == nil {
			list = []observe.Model{}
		}
		body, _ := json.Marshal(map[string]any{"object": "list", "data": list})
		r.Body = string(body)
	}
	hf.HTTP[models] = r
}

// serveAnswer is resources' reading of a serve's answers on port.
func serveAnswer(hf *observe.HostFacts, port int) observe.VLLM {
	return resources.ServeAnswer(hf, port)
}
