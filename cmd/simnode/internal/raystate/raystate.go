// Package raystate renders Ray's views of the cluster from the GCS node
// table: the state API's node rows (`ray list nodes` in json, yaml and table
// formats, and the dashboard's /api/v0/nodes), and `ray status` text.
//
// Fast mode only: this is part of simnode's model of Ray, which the lab
// runs with `lab up -ray simnode` (lab up's default, `make demo
// RAY=simnode`, and the end-to-end tests whose subject is not Ray). No
// end-to-end test of Ray's behaviour uses it: those run the real Ray 2.53.0
// (`-ray real`).
package raystate

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
)

// Value is an ordered JSON/YAML value: pylog.KV, []any, string, bool,
// float64, int64 or nil.
type Value = any

// resourcesValue humanifies resources as the state API does: any key
// containing "memory" becomes "34.758 GiB"; the rest stay floats. Keys keep
// Ray's order: node:__internal_head__, CPU, memory, node:<ip>, GPU,
// object_store_memory, accelerator_type:..., then custom ones sorted.
func resourcesValue(res map[string]float64) pylog.KV {
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		switch {
		case k == "node:__internal_head__":
			return 0
		case k == "CPU":
			return 1
		case k == "memory":
			return 2
		case strings.HasPrefix(k, "node:"):
			return 3
		case k == "GPU":
			return 4
		case k == "object_store_memory":
			return 5
		case strings.HasPrefix(k, "accelerator_type:"):
			return 6
		}
		return 7
	}
	sort.Slice(keys, func(i, j int) bool {
		if rank(keys[i]) != rank(keys[j]) {
			return rank(keys[i]) < rank(keys[j])
		}
		return keys[i] < keys[j]
	})
	kv := pylog.KV{}
	for _, k := range keys {
		if strings.Contains(k, "memory") {
			kv = append(kv, pylog.Pair{Key: k, Value: pylog.RayStateMemory(res[k])})
		} else {
			kv = append(kv, pylog.Pair{Key: k, Value: res[k]})
		}
	}
	return kv
}

func labelsValue(l map[string]string) pylog.KV {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := pylog.KV{}
	for _, k := range keys {
		kv = append(kv, pylog.Pair{Key: k, Value: l[k]})
	}
	return kv
}

// msTime renders a millisecond timestamp as the state API's detail view
// does: '2023-07-11 23:12:09.508000' (in UTC here; Ray uses local time).
func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000000")
}

// NodeRow is one NodeState as `ray list nodes` prints it.
func NodeRow(n gcs.NodeInfo, detail bool) pylog.KV {
	row := pylog.KV{
		{Key: "node_id", Value: n.NodeID},
		{Key: "node_ip", Value: n.NodeIP},
		{Key: "is_head_node", Value: n.IsHead},
		{Key: "state", Value: n.State},
		{Key: "state_message", Value: nilIfEmpty(n.StateMessage)},
		{Key: "node_name", Value: n.NodeName},
		{Key: "resources_total", Value: resourcesValue(n.Resources)},
		{Key: "labels", Value: labelsValue(n.Labels)},
	}
	if detail {
		row = append(row, pylog.Pair{Key: "start_time_ms", Value: msTime(n.StartTimeMs)}, pylog.Pair{Key: "end_time_ms", Value: msTime(n.EndTimeMs)})
	}
	return row
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// JSON encodes v like Python's json.dumps (", " and ": " separators, keys
// in insertion order), as `ray list --format json` prints it.
func JSON(v Value) string { return pylog.JSON(v, false) }

var (
	yamlInt       = regexp.MustCompile(`^[-+]?(0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|0o?[0-7_]+)$`)
	yamlFloat     = regexp.MustCompile(`^[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$`)
	yamlTimestamp = regexp.MustCompile(`^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]*)?)?`)
)

// yamlNeedsQuote reports whether PyYAML would quote s: it would resolve to
// another type, or starts or contains YAML indicators.
func yamlNeedsQuote(s string) bool {
	if s == "" || s != strings.TrimSpace(s) {
		return true
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "~", "y", "n":
		return true
	}
	if yamlInt.MatchString(s) || (yamlFloat.MatchString(s) && strings.ContainsAny(s, "0123456789")) || yamlTimestamp.MatchString(s) {
		return true
	}
	if strings.ContainsAny(s[:1], "-?:,[]{}#&*!|>'\"%@`") {
		return true
	}
	return strings.Contains(s, ": ") || strings.Contains(s, " #")
}

func yamlScalar(v Value) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		return pylog.PyFloat(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case string:
		if yamlNeedsQuote(x) {
			return "'" + strings.ReplaceAll(x, "'", "''") + "'"
		}
		return x
	}
	return fmt.Sprint(v)
}

// YAML encodes a list of rows as PyYAML's dump(indent=4,
// explicit_start=True, explicit_end=True, sort_keys=False) does.
func YAML(rows []pylog.KV) string {
	var b strings.Builder
	b.WriteString("---\n")
	if len(rows) == 0 {
		b.WriteString("[]\n...\n")
		return b.String()
	}
	for _, r := range rows {
		for i, p := range r {
			prefix := "    "
			if i == 0 {
				prefix = "-   "
			}
			writeYAMLPair(&b, prefix, "    ", p)
		}
	}
	b.WriteString("...\n")
	return b.String()
}

func writeYAMLPair(b *strings.Builder, prefix, indent string, p pylog.Pair) {
	if kv, ok := p.Value.(pylog.KV); ok {
		if len(kv) == 0 {
			fmt.Fprintf(b, "%s%s: {}\n", prefix, yamlKey(p.Key))
			return
		}
		fmt.Fprintf(b, "%s%s:\n", prefix, yamlKey(p.Key))
		for _, q := range kv {
			writeYAMLPair(b, indent+"    ", indent+"    ", q)
		}
		return
	}
	fmt.Fprintf(b, "%s%s: %s\n", prefix, yamlKey(p.Key), yamlScalar(p.Value))
}

func yamlKey(k string) string {
	if yamlNeedsQuote(k) {
		return "'" + strings.ReplaceAll(k, "'", "''") + "'"
	}
	return k
}

// Table renders the state CLI's default table.
func Table(now time.Time, rows []pylog.KV) string {
	var b strings.Builder
	fmt.Fprintf(&b, "======== List: %s ========\n", now.Format("2006-01-02 15:04:05.000000"))
	b.WriteString("Stats:\n------------------------------\n")
	fmt.Fprintf(&b, "Total: %d\n\n", len(rows))
	b.WriteString("Table:\n------------------------------\n")
	if len(rows) == 0 {
		return b.String()
	}
	headers := []string{}
	for _, p := range rows[0] {
		headers = append(headers, strings.ToUpper(p.Key))
	}
	// Each cell may span several lines (dicts render as "k: v" lines).
	cells := make([][][]string, len(rows))
	widths := make([]int, len(headers))
	for i, h := range headers {
		widths[i] = len(h)
	}
	idxw := len(strconv.Itoa(len(rows) - 1))
	for r, row := range rows {
		cells[r] = make([][]string, len(row))
		for c, p := range row {
			var lines []string
			switch v := p.Value.(type) {
			case pylog.KV:
				for _, q := range v {
					lines = append(lines, fmt.Sprintf("%s: %s", q.Key, tableScalar(q.Value)))
				}
			default:
				lines = []string{tableScalar(v)}
			}
			if len(lines) == 0 {
				lines = []string{""}
			}
			for _, l := range lines {
				if len(l) > widths[c] {
					widths[c] = len(l)
				}
			}
			cells[r][c] = lines
		}
	}
	line := strings.Repeat(" ", idxw+1)
	for i, h := range headers {
		line += "  " + pad(h, widths[i])
	}
	b.WriteString(strings.TrimRight(line, " ") + "\n")
	for r := range rows {
		height := 1
		for _, c := range cells[r] {
			if len(c) > height {
				height = len(c)
			}
		}
		for l := 0; l < height; l++ {
			var s string
			if l == 0 {
				s = fmt.Sprintf(" %*d", idxw, r)
			} else {
				s = strings.Repeat(" ", idxw+1)
			}
			for c := range headers {
				v := ""
				if l < len(cells[r][c]) {
					v = cells[r][c][l]
				}
				s += "  " + pad(v, widths[c])
			}
			b.WriteString(strings.TrimRight(s, " ") + "\n")
		}
	}
	return b.String()
}

func pad(s string, w int) string { return s + strings.Repeat(" ", w-len(s)) }

func tableScalar(v Value) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		return pylog.PyFloat(x)
	}
	return fmt.Sprint(v)
}

// StatusText renders `ray status` (autoscaler v1 format) for st at now.
func StatusText(now time.Time, st *gcs.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "======== Autoscaler status: %s ========\n", now.Format("2006-01-02 15:04:05.000000"))
	b.WriteString("Node status\n---------------------------------------------------------------\n")
	b.WriteString("Active:\n")
	alive := 0
	var failures []gcs.NodeInfo
	for _, n := range st.Nodes {
		if n.State == gcs.Alive {
			fmt.Fprintf(&b, " 1 node_%s\n", n.NodeID)
			alive++
		} else {
			failures = append(failures, n)
		}
	}
	if alive == 0 {
		b.WriteString(" (no active nodes)\n")
	}
	b.WriteString("Pending:\n (no pending nodes)\n")
	b.WriteString("Recent failures:\n")
	if len(failures) == 0 {
		b.WriteString(" (no failures)\n")
	}
	for _, n := range failures {
		fmt.Fprintf(&b, " node_%s: NodeTerminated (ip: %s)\n", n.NodeID, n.NodeIP)
	}
	b.WriteString("\nResources\n---------------------------------------------------------------\n")
	b.WriteString("Usage:\n")
	total := map[string]float64{}
	avail := map[string]float64{}
	for _, n := range st.Nodes {
		if n.State != gcs.Alive {
			continue
		}
		for k, v := range n.Resources {
			total[k] += v
		}
		for k, v := range n.Available {
			avail[k] += v
		}
	}
	keys := make([]string, 0, len(total))
	for k := range total {
		if strings.HasPrefix(k, "node:") || strings.HasPrefix(k, "accelerator_type:") {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		used := math.Max(0, total[k]-avail[k])
		if k == "memory" || k == "object_store_memory" {
			fmt.Fprintf(&b, " %s/%s %s\n", pylog.RayStatusMemory(used), pylog.RayStatusMemory(total[k]), k)
			continue
		}
		fmt.Fprintf(&b, " %s/%s %s\n", pylog.PyFloat(used), pylog.PyFloat(total[k]), k)
	}
	b.WriteString("\nDemands:\n")
	if len(st.PendingPGs) == 0 {
		b.WriteString(" (no resource demands)\n")
	}
	for _, p := range st.PendingPGs {
		fmt.Fprintf(&b, " %s: 1+ pending placement groups\n", FormatPG(p.Bundles, p.Strategy))
	}
	return b.String()
}

// FormatPG is the autoscaler's format_pg: identical bundles grouped as
// "{'GPU': 1.0} * 2 (PACK)".
func FormatPG(bundles []map[string]float64, strategy string) string {
	type group struct {
		repr  string
		count int
	}
	var groups []group
	for _, bd := range bundles {
		r := BundleRepr(bd)
		found := false
		for i := range groups {
			if groups[i].repr == r {
				groups[i].count++
				found = true
			}
		}
		if !found {
			groups = append(groups, group{r, 1})
		}
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("%s * %d", g.repr, g.count)
	}
	return strings.Join(parts, ", ") + " (" + strategy + ")"
}

// BundleRepr renders a bundle as a Python dict literal, GPU first and the
// node: anchor after it, as vLLM builds it.
func BundleRepr(bd map[string]float64) string {
	keys := make([]string, 0, len(bd))
	for k := range bd {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ni, nj := strings.HasPrefix(keys[i], "node:"), strings.HasPrefix(keys[j], "node:")
		if ni != nj {
			return !ni
		}
		return keys[i] < keys[j]
	})
	kv := pylog.KV{}
	for _, k := range keys {
		kv = append(kv, pylog.Pair{Key: k, Value: bd[k]})
	}
	return pylog.Repr(kv)
}

// LoadMetricsReport is the autoscaler monitor's report of st, as the
// dashboard's /api/cluster_status (format 0) returns it under
// clusterStatus: Ray 2.53's monitor.py writes
// {"load_metrics_report": asdict(LoadMetricsSummary), "time", "monitor_pid"}
// to the GCS's internal KV, with usage_by_node keyed by node ID (as the
// real Ray 2.53 answered in the lab, though load_metrics.py names the key
// an IP), each resource as [used, total] (total − available);
// the dashboard turns every key, resource names included, to camel case
// (dashboard/utils.py to_google_style). Ray's monitor writes it every 5 s;
// simnode's answers from the GCS's state at the moment, placement groups'
// reservations taken out of the nodes' available resources as in Ray.
func LoadMetricsReport(now time.Time, st *gcs.Status, monitorPID int) pylog.KV {
	usage := map[string][2]float64{}
	byNode := pylog.KV{}
	for _, n := range st.Nodes {
		if n.State != gcs.Alive {
			continue
		}
		res := pylog.KV{}
		for _, k := range slices.Sorted(maps.Keys(n.Resources)) {
			total := n.Resources[k]
			used := math.Max(0, total-n.Available[k])
			res = append(res, pylog.Pair{Key: CamelCase(k), Value: []any{used, total}})
			u := usage[k]
			usage[k] = [2]float64{u[0] + used, u[1] + total}
		}
		byNode = append(byNode, pylog.Pair{Key: n.NodeID, Value: res})
	}
	total := pylog.KV{}
	for _, k := range slices.Sorted(maps.Keys(usage)) {
		total = append(total, pylog.Pair{Key: CamelCase(k), Value: []any{usage[k][0], usage[k][1]}})
	}
	return pylog.KV{
		{Key: "loadMetricsReport", Value: pylog.KV{
			{Key: "usage", Value: total},
			{Key: "resourceDemand", Value: []any{}},
			{Key: "pgDemand", Value: pendingPGs(st)},
			{Key: "requestDemand", Value: []any{}},
			{Key: "nodeTypes", Value: []any{}},
			{Key: "headIp", Value: nil},
			{Key: "usageByNode", Value: byNode},
			{Key: "nodeTypeMapping", Value: nil},
			{Key: "idleTimeMap", Value: pylog.KV{}},
		}},
		{Key: "time", Value: float64(now.UnixNano()) / 1e9},
		{Key: "monitorPid", Value: int64(monitorPID)},
	}
}

// pendingPGs is the report's pg_demand: [bundles-dict, count] pairs.
func pendingPGs(st *gcs.Status) []any {
	out := []any{}
	for _, p := range st.PendingPGs {
		var bundles []any
		for _, b := range p.Bundles {
			kv := pylog.KV{}
			for _, k := range slices.Sorted(maps.Keys(b)) {
				kv = append(kv, pylog.Pair{Key: CamelCase(k), Value: b[k]})
			}
			bundles = append(bundles, kv)
		}
		out = append(out, []any{pylog.KV{{Key: "bundles", Value: bundles}, {Key: "strategy", Value: p.Strategy}}, int64(1)})
	}
	return out
}

// CamelCase is the dashboard's to_camel_case: split on "_", the first
// part kept, every other title-cased ("object_store_memory" →
// "objectStoreMemory", "node:__internal_head__" → "node:InternalHead").
func CamelCase(s string) string {
	parts := strings.Split(s, "_")
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		if p == "" {
			continue
		}
		b.WriteString(pyTitle(p))
	}
	return b.String()
}

// pyTitle is Python's str.title for ASCII: a letter after a non-letter
// upper case, every other letter lower case ("type:GB10" → "Type:Gb10").
func pyTitle(s string) string {
	out := []byte(s)
	prev := false
	for i, c := range out {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		switch {
		case letter && !prev && c >= 'a':
			out[i] = c - 'a' + 'A'
		case letter && prev && c <= 'Z':
			out[i] = c - 'A' + 'a'
		}
		prev = letter
	}
	return string(out)
}
