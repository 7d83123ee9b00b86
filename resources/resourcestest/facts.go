// Package resourcestest holds what tests of the kinds share: a
// configuration seen through the registered kinds (Config, Load), and
// observed facts (the answers a head's probe gets from Ray's dashboard
// and from vLLM, as those real servers write them, at the URLs the kinds
// ask for).
package resourcestest

import (
	"encoding/json"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/serve"
)

// SetRayTable makes hf's answer to the node-table probe of the dashboard
// on port say t, as Ray's dashboard writes /api/v0/nodes, or fail with
// t.Err (connection refused).
func SetRayTable(hf *observe.HostFacts, port int, t cluster.RayNodeFacts) {
	if hf.HTTP == nil {
		hf.HTTP = map[string]observe.HTTPResult{}
	}
	url := cluster.RayTableURL(port)
	if t.Err != "" {
		hf.HTTP[url] = observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Refused: true, Err: t.Err}, Via: "curl"}
		return
	}
	rows := t.List
	if rows == nil {
		rows = []cluster.RayNode{}
	}
	total := len(rows)
	if t.Partial {
		total++
	}
	body, _ := json.Marshal(map[string]any{"result": true, "msg": "",
		"data": map[string]any{"result": map[string]any{"total": total, "num_after_truncation": len(rows), "result": rows}}})
	hf.HTTP[url] = observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 200}, Via: "curl", Body: string(body)}
}

// RayTable reads hf's answer to the node-table probe on port.
func RayTable(hf *observe.HostFacts, port int) cluster.RayNodeFacts {
	r, ok := hf.HTTP[cluster.RayTableURL(port)]
	return cluster.ParseRayNodes(r, ok)
}

// SetServeAnswer makes hf's answers to a serve's probes on port say v, as
// vLLM writes /health and /v1/models; v not Observed removes them.
func SetServeAnswer(hf *observe.HostFacts, port int, v serve.VLLM) {
	health, models := serve.ServeURL(port, "/health"), serve.ServeURL(port, "/v1/models")
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
			list = []serve.Model{}
		}
		body, _ := json.Marshal(map[string]any{"object": "list", "data": list})
		r.Body = string(body)
	}
	hf.HTTP[models] = r
}

// SetServeRecord sets the record of serve name the probe read on hf.
func SetServeRecord(hf *observe.HostFacts, name string, rec observe.ProcessRecord) {
	if hf.Records == nil {
		hf.Records = map[string]observe.ProcessRecord{}
	}
	hf.Records[serve.ServeRecordName(name)] = rec
}
