// Ray's node table: the parsers of its two readings (the dashboard's
// /api/v0/nodes, ray list nodes --format json) and its rows.

package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/observe"
)

// RayNode is one row of Ray's node table (`ray list nodes`, /api/v0/nodes).
type RayNode struct {
	NodeID       string `json:"node_id"`
	NodeIP       string `json:"node_ip"`
	IsHead       bool   `json:"is_head_node"`
	State        string `json:"state"` // ALIVE or DEAD
	StateMessage string `json:"state_message,omitempty"`
	NodeName     string `json:"node_name,omitempty"`
	// Resources are resources_total; humanized memory strings such as
	// "34.758 GiB" are converted to bytes.
	Resources map[string]float64 `json:"resources_total,omitempty"`
	Labels    map[string]string  `json:"labels,omitempty"`
}

// GPUs is the node's total GPU resource.
func (n RayNode) GPUs() float64 { return n.Resources["GPU"] }

// RayNodeFacts is Ray's node table as seen from the head.
type RayNodeFacts struct {
	// Source is "dashboard" (/api/v0/nodes) or "cli" (ray list nodes);
	// empty when not observed.
	Source string    `json:"source,omitempty"`
	List   []RayNode `json:"list,omitempty"`
	// Partial is true when the dashboard said the list is truncated or had
	// a partial failure: do not treat it as the whole cluster.
	Partial bool `json:"partial,omitempty"`
	// Unread is true when the answer could not be read: too slow, too
	// large, cut short, or not the JSON Ray writes. It says nothing of
	// the cluster (unknown), unlike an Err from Ray itself (nothing
	// listening, an error status, Ray's own failure message).
	Unread bool   `json:"unread,omitempty"`
	Err    string `json:"err,omitempty"`
}

// Alive returns the ALIVE nodes.
func (f RayNodeFacts) Alive() []RayNode {
	var out []RayNode
	for _, n := range f.List {
		if n.State == "ALIVE" {
			out = append(out, n)
		}
	}
	return out
}

// rayNodeJSON is one row of Ray's node state (`ray list nodes`,
// /api/v0/nodes). resources_total values are floats, or strings like
// "34.758 GiB" for memory once Ray humanizes them.
type rayNodeJSON struct {
	NodeID       string                     `json:"node_id"`
	NodeIP       string                     `json:"node_ip"`
	IsHead       bool                       `json:"is_head_node"`
	State        string                     `json:"state"`
	StateMessage *string                    `json:"state_message"`
	NodeName     string                     `json:"node_name"`
	Resources    map[string]json.RawMessage `json:"resources_total"`
	Labels       map[string]string          `json:"labels"`
}

// ParseRayNodes reads Ray's node table from the answer to a GET of the
// dashboard's /api/v0/nodes, or of its fallback `ray list nodes --format
// json` (Via "exec"); ok false when it was not probed. An answer the
// probe could not read whole (observe.HTTPCheck.Unread), or that is not
// Ray's JSON, is Unread.
func ParseRayNodes(r observe.HTTPResult, ok bool) RayNodeFacts {
	if !ok {
		return RayNodeFacts{}
	}
	rn := RayNodeFacts{Source: "dashboard"}
	if r.Via == "exec" {
		rn.Source = "cli"
	}
	body := []byte(r.Body)
	var rows []rayNodeJSON
	if r.Unread() {
		rn.Unread = true
		rn.Err = rn.Source + ": " + r.Err
		return rn
	}
	switch rn.Source {
	case "dashboard":
		if r.Err != "" {
			rn.Err = "dashboard: " + r.Err
			return rn
		}
		var env struct {
			Result bool   `json:"result"`
			Msg    string `json:"msg"`
			Data   struct {
				Result struct {
					Total              int             `json:"total"`
					NumAfterTruncation int             `json:"num_after_truncation"`
					Result             []rayNodeJSON   `json:"result"`
					PartialWarning     json.RawMessage `json:"partial_failure_warning"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			rn.Unread = true
			rn.Err = "dashboard /api/v0/nodes: the answer is not the JSON Ray writes (" + err.Error() + ")"
			return rn
		}
		if !env.Result {
			rn.Err = "dashboard /api/v0/nodes: " + env.Msg
			return rn
		}
		r := env.Data.Result
		rows = r.Result
		w := strings.Trim(string(r.PartialWarning), `" `)
		rn.Partial = r.NumAfterTruncation < r.Total || (w != "" && w != "null")
	default: // cli
		if r.Err != "" {
			rn.Err = r.Err
			return rn
		}
		list, err := ParseRayNodeList(body)
		if err != nil {
			rn.Unread = true
			rn.Err = err.Error()
			return rn
		}
		rn.List = list
		return rn
	}
	rn.List = rayNodes(rows)
	return rn
}

// ParseRayNodeList decodes the output of `ray list nodes --format json`,
// skipping anything Ray printed before the JSON (log lines, warnings). It
// is the one reader of that output, for observe and for apply's checks.
func ParseRayNodeList(out []byte) ([]RayNode, error) {
	js := observe.FirstJSON(out)
	if len(js) == 0 || js[0] != '[' && js[0] != '{' {
		return nil, fmt.Errorf("ray list nodes printed no JSON: %s", quoteStart(out))
	}
	var rows []rayNodeJSON
	// Decode the first value only: Ray may log after it too.
	if err := json.NewDecoder(bytes.NewReader(js)).Decode(&rows); err != nil {
		return nil, fmt.Errorf("ray list nodes: %w", err)
	}
	return rayNodes(rows), nil
}

// quoteMax is the most of a reading an error message quotes.
const quoteMax = 200

// quoteStart quotes the start of out, trimmed, at most quoteMax bytes of
// it, with the size of the rest: an error never carries a bulk reading.
func quoteStart(out []byte) string {
	out = bytes.TrimSpace(out)
	if len(out) <= quoteMax {
		return strconv.Quote(string(out))
	}
	return fmt.Sprintf("%q… (%d bytes in all)", out[:quoteMax], len(out))
}

// rayNodes converts the rows of Ray's node table.
func rayNodes(rows []rayNodeJSON) []RayNode {
	var list []RayNode
	for _, r := range rows {
		n := RayNode{NodeID: r.NodeID, NodeIP: r.NodeIP, IsHead: r.IsHead, State: r.State,
			NodeName: r.NodeName, Labels: r.Labels}
		if r.StateMessage != nil {
			n.StateMessage = *r.StateMessage
		}
		if len(r.Resources) > 0 {
			n.Resources = make(map[string]float64, len(r.Resources))
			for k, v := range r.Resources {
				if f, ok := rayQuantity(v); ok {
					n.Resources[k] = f
				}
			}
		}
		list = append(list, n)
	}
	return list
}

// rayQuantity decodes a resources_total value: a number, or a humanized
// byte string ("34.758 GiB", "512.000 MiB", "100 B").
func rayQuantity(raw json.RawMessage) (float64, bool) {
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	num, unit, _ := strings.Cut(strings.TrimSpace(s), " ")
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	var m float64
	switch unit {
	case "", "B":
		m = 1
	case "KiB":
		m = 1 << 10
	case "MiB":
		m = 1 << 20
	case "GiB":
		m = 1 << 30
	case "TiB":
		m = 1 << 40
	case "PiB":
		m = 1 << 50
	default:
		return 0, false
	}
	return f * m, true
}
