// Package pylog renders log lines in the formats the simulated programs'
// real counterparts use: Ray's cli_logger (record style), Ray's C++ logger,
// glog as printed by torch's c10d, vLLM's Python logging, tqdm progress bars,
// Python reprs of dicts and lists, and Ray's and vLLM's memory humanizers.
package pylog

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RayRecord formats one line of Ray's cli_logger in "record" style (what
// `ray start` prints when stdout is not a terminal), e.g.
//
//	2024-04-02 01:39:24,189	INFO scripts.py:744 -- Local node IP: 172.18.0.2
func RayRecord(t time.Time, level, fileLine, msg string) string {
	return fmt.Sprintf("%s\t%s %s -- %s", PyTime(t), level, fileLine, msg)
}

// PyTime formats t as Python logging's default asctime: 2006-01-02 15:04:05,000.
func PyTime(t time.Time) string {
	return t.Format("2006-01-02 15:04:05") + "," + fmt.Sprintf("%03d", t.Nanosecond()/1e6)
}

// RayCpp formats one line of Ray's C++ logger (raylet, GCS client), e.g.
//
//	[2025-02-16 16:05:55,537 E 350061 350061] gcs_rpc_client.h:179: Failed to connect ...
func RayCpp(t time.Time, level byte, pid, tid int, fileLine, msg string) string {
	return fmt.Sprintf("[%s %c %d %d] %s: %s", PyTime(t), level, pid, tid, fileLine, msg)
}

// Glog formats one line of glog as torch prints it, e.g.
//
//	[W1129 23:22:25.585741812 socket.cpp:764] [c10d] The client socket ...
func Glog(t time.Time, level byte, fileLine, msg string) string {
	return fmt.Sprintf("[%c%s.%09d %s] %s", level, t.Format("0102 15:04:05"), t.Nanosecond(), fileLine, msg)
}

// VLLM formats one line of vLLM's logger, e.g.
//
//	INFO 03-09 12:56:57 [utils.py:302] message
func VLLM(t time.Time, level, fileLine, msg string) string {
	return fmt.Sprintf("%s %s [%s] %s", level, t.Format("01-02 15:04:05"), fileLine, msg)
}

// NCCL formats one NCCL debug line, e.g.
//
//	vm:1004:1004 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth9
//
// WARN lines carry a timestamp and the source location:
//
//	[2026-11-29 23:22:58] vm:1004:1004 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found
func NCCL(t time.Time, host string, pid, dev int, level, fileLine, msg string) string {
	if level == "WARN" {
		return fmt.Sprintf("[%s] %s:%d:%d [%d] %s NCCL WARN %s", t.Format("2006-01-02 15:04:05"), host, pid, pid, dev, fileLine, msg)
	}
	return fmt.Sprintf("%s:%d:%d [%d] NCCL %s %s", host, pid, pid, dev, level, msg)
}

// Clock formats a duration as tqdm's format_interval does (whole seconds,
// truncated): MM:SS, or H:MM:SS past an hour.
func Clock(d time.Duration) string {
	s := int(d / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, (s%3600)/60, s%60)
	}
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}

// Rate formats tqdm's rate_fmt with a leading width-5 number: " 4.38s/it"
// below one item a second, "21.57it/s" above; "?it/s" before the first item.
func Rate(n int, elapsed time.Duration) string {
	if n == 0 || elapsed <= 0 {
		return "?it/s"
	}
	rate := float64(n) / elapsed.Seconds()
	if rate < 1 {
		return fmt.Sprintf("%5.2fs/it", 1/rate)
	}
	return fmt.Sprintf("%5.2fit/s", rate)
}

// WeightsProgress formats vLLM's safetensors loading bar (weight_utils.py
// _BAR_FORMAT, plain text with a newline), e.g.
//
//	Loading safetensors checkpoint shards:  21% Completed | 8/39 [00:12<00:44,  4.02s/it]
func WeightsProgress(desc string, n, total int, elapsed time.Duration) string {
	pct := 0.0
	if total > 0 {
		pct = 100 * float64(n) / float64(total)
	}
	remaining := "?"
	if n > 0 {
		per := elapsed / time.Duration(n)
		remaining = Clock(per * time.Duration(total-n))
	}
	return fmt.Sprintf("%s: %3.0f%% Completed | %d/%d [%s<%s, %s]", desc, pct, n, total, Clock(elapsed), remaining, Rate(n, elapsed))
}

// Bar formats tqdm's default bar with a 10-cell meter, e.g.
//
//	Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:01<00:00, 26.31it/s]
func Bar(desc string, n, total int, elapsed time.Duration) string {
	frac := 0.0
	if total > 0 {
		frac = float64(n) / float64(total)
	}
	const width = 10
	cells := frac * width
	full := int(cells)
	var b strings.Builder
	b.WriteString(strings.Repeat("█", full))
	if full < width {
		parts := []string{" ", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}
		b.WriteString(parts[int((cells-float64(full))*8)])
		b.WriteString(strings.Repeat(" ", width-full-1))
	}
	remaining := "?"
	if n > 0 {
		per := elapsed / time.Duration(n)
		remaining = Clock(per * time.Duration(total-n))
	}
	return fmt.Sprintf("%s: %3.0f%%|%s| %d/%d [%s<%s, %s]", desc, frac*100, b.String(), n, total, Clock(elapsed), remaining, Rate(n, elapsed))
}

// RayStatusMemory formats bytes as the autoscaler's ray status does:
// "0B", "57.74GiB", "3.39TiB".
func RayStatusMemory(b float64) string {
	if b == 0 {
		return "0B"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.2f%s", b, units[i])
}

// RayStateMemory formats bytes as the state API's humanify does:
// "34.758 GiB", "2.000 GiB".
func RayStateMemory(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.3f %s", b, units[i])
}

// PyFloat formats f as Python's repr(float) does: 1.0, 0.001, 0.9, 1e-05.
func PyFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "inf"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if strings.Contains(s, "e") {
		// Python writes 1e-05, Go 1e-05 too; keep as is.
		return s
	}
	return s
}

// Repr renders a Go value as Python's repr would render the equivalent
// Python value. Maps render with keys in the order given by KV slices; plain
// maps sort their keys.
func Repr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return pyStr(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return PyFloat(x)
	case []string:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = pyStr(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []any:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = Repr(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case KV:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = Repr(p.Key) + ": " + Repr(p.Value)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []KV:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = Repr(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]float64:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv KV
		for _, k := range keys {
			kv = append(kv, Pair{k, x[k]})
		}
		return Repr(kv)
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv KV
		for _, k := range keys {
			kv = append(kv, Pair{k, x[k]})
		}
		return Repr(kv)
	default:
		return fmt.Sprint(x)
	}
}

// Pair is one entry of an ordered Python dict.
type Pair struct {
	Key   string
	Value any
}

// KV is an ordered Python dict.
type KV []Pair

func pyStr(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// JSON encodes v as Python's json.dumps does, keys in insertion order:
// ", " and ": " separators, or "," and ":" when compact (FastAPI's
// JSONResponse). v is built from KV, []KV, []any, string, bool, float64,
// int, int64 and nil; other values go through encoding/json.
func JSON(v any, compact bool) string {
	var b strings.Builder
	writeJSON(&b, v, compact)
	return b.String()
}

func writeJSON(b *strings.Builder, v any, compact bool) {
	comma, colon := ", ", ": "
	if compact {
		comma, colon = ",", ":"
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		q, _ := json.Marshal(x)
		b.Write(q)
	case float64:
		b.WriteString(PyFloat(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case KV:
		b.WriteByte('{')
		for i, p := range x {
			if i > 0 {
				b.WriteString(comma)
			}
			q, _ := json.Marshal(p.Key)
			b.Write(q)
			b.WriteString(colon)
			writeJSON(b, p.Value, compact)
		}
		b.WriteByte('}')
	case []KV:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(comma)
			}
			writeJSON(b, e, compact)
		}
		b.WriteByte(']')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(comma)
			}
			writeJSON(b, e, compact)
		}
		b.WriteByte(']')
	default:
		q, _ := json.Marshal(x)
		b.Write(q)
	}
}
