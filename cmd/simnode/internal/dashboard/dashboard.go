// Package dashboard is the simulated Ray dashboard's HTTP API on the head
// node (--dashboard-host:--dashboard-port): /api/gcs_healthz, /api/version,
// the state API's /api/v0/nodes, /nodes?view=summary and
// /api/cluster_status.
//
// Fast mode only: this is part of simnode's model of Ray, which the lab
// runs with `lab up -ray simnode` (lab up's default, `make demo
// RAY=simnode`, and the end-to-end tests whose subject is not Ray). No
// end-to-end test of Ray's behaviour uses it: those run the real Ray 2.53.0
// (`-ray real`).
package dashboard

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/raystate"
)

// Source is the cluster state the dashboard reads.
type Source interface {
	Status() *gcs.Status
}

// Handler returns the dashboard's HTTP handler, behind Ray's token
// authentication when auth's mode is "token".
func Handler(src Source, now func() time.Time, auth Auth) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/authentication_mode", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, pylog.KV{{Key: "authentication_mode", Value: auth.Mode}})
	})
	mux.HandleFunc("/api/gcs_healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "success")
	})
	mux.HandleFunc("/api/version", func(w http.ResponseWriter, r *http.Request) {
		st := src.Status()
		writeJSON(w, pylog.KV{
			{Key: "version", Value: "4"},
			{Key: "ray_version", Value: gcs.RayVersion},
			{Key: "ray_commit", Value: "7f5e2f5a2b1d6c3e9f0a8b7c6d5e4f3a2b1c0d9e"},
			{Key: "session_name", Value: st.SessionName},
		})
	})
	mux.HandleFunc("/api/v0/nodes", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		detail := q.Get("detail") == "1" || strings.EqualFold(q.Get("detail"), "true")
		limit := 100
		if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 {
			limit = l
		}
		nodes := src.Status().Nodes
		gcs.SortNodes(nodes)
		keys, preds, vals := q["filter_keys"], q["filter_predicates"], q["filter_values"]
		var rows []pylog.KV
		for _, n := range nodes {
			row := raystate.NodeRow(n, detail)
			if matches(row, keys, preds, vals) {
				rows = append(rows, row)
			}
		}
		filtered := len(rows)
		if len(rows) > limit {
			rows = rows[:limit]
		}
		if rows == nil {
			rows = []pylog.KV{}
		}
		writeJSON(w, pylog.KV{
			{Key: "result", Value: true},
			{Key: "msg", Value: ""},
			{Key: "data", Value: pylog.KV{{Key: "result", Value: pylog.KV{
				{Key: "total", Value: int64(len(nodes))},
				{Key: "num_after_truncation", Value: int64(len(rows))},
				{Key: "num_filtered", Value: int64(filtered)},
				{Key: "result", Value: rows},
				{Key: "partial_failure_warning", Value: ""},
				{Key: "warnings", Value: nil},
			}}}},
		})
	})
	mux.HandleFunc("/nodes", func(w http.ResponseWriter, r *http.Request) {
		st := src.Status()
		var summary []any
		for _, n := range st.Nodes {
			res := pylog.KV{}
			for k, v := range n.Resources {
				res = append(res, pylog.Pair{Key: k, Value: v})
			}
			summary = append(summary, pylog.KV{
				{Key: "ip", Value: n.NodeIP},
				{Key: "hostname", Value: n.Hostname},
				{Key: "raylet", Value: pylog.KV{
					{Key: "nodeId", Value: n.NodeID},
					{Key: "nodeManagerAddress", Value: n.NodeIP},
					{Key: "state", Value: n.State},
					{Key: "isHeadNode", Value: n.IsHead},
					{Key: "nodeName", Value: n.NodeName},
					{Key: "resourcesTotal", Value: res},
				}},
			})
		}
		if summary == nil {
			summary = []any{}
		}
		writeJSON(w, pylog.KV{{Key: "result", Value: true}, {Key: "msg", Value: "Node summary fetched."}, {Key: "data", Value: pylog.KV{{Key: "summary", Value: summary}}}})
	})
	mux.HandleFunc("/api/cluster_status", func(w http.ResponseWriter, r *http.Request) {
		st := src.Status()
		if r.URL.Query().Get("format") == "1" {
			writeJSON(w, pylog.KV{{Key: "result", Value: true}, {Key: "msg", Value: "Got formatted cluster status."}, {Key: "data", Value: pylog.KV{{Key: "clusterStatus", Value: raystate.StatusText(now(), st)}}}})
			return
		}
		writeJSON(w, pylog.KV{{Key: "result", Value: true}, {Key: "msg", Value: "Got cluster status."}, {Key: "data", Value: pylog.KV{{Key: "autoscalingStatus", Value: nil}, {Key: "autoscalingError", Value: nil}, {Key: "clusterStatus", Value: raystate.LoadMetricsReport(now(), st, os.Getpid())}}}})
	})
	return auth.guard(mux)
}

func matches(row pylog.KV, keys, preds, vals []string) bool {
	for i, k := range keys {
		if i >= len(preds) || i >= len(vals) {
			break
		}
		var got string
		for _, p := range row {
			if p.Key == k {
				got = fmt.Sprint(p.Value)
				if b, ok := p.Value.(bool); ok {
					got = strconv.FormatBool(b)
				}
			}
		}
		eq := strings.EqualFold(got, vals[i])
		if (preds[i] == "=" && !eq) || (preds[i] == "!=" && eq) {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, v pylog.KV) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, raystate.JSON(v))
}
