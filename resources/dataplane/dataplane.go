// Package dataplane runs rayform's data-plane check: check.py, one process
// per node inside the node's Ray container (so under the environment rayform
// pinned there, with the image's own torch, Gloo and NCCL), a c10d
// rendezvous on the head's fabric address, a Gloo all_reduce and, where CUDA
// is available, an NCCL all_reduce of a sized buffer. It parses the result
// line every rank prints, compares the address and interface each backend
// used with the node's fabric address, and renders a table.
//
// The script is a real file (check.py next to this one) and runs standalone:
//
//	RANK=0 WORLD_SIZE=2 MASTER_ADDR=192.168.200.12 MASTER_PORT=29417 \
//	    NCCL_DEBUG=INFO python3 resources/dataplane/check.py --backends gloo,nccl
//
// (see its docstring for every argument).
package dataplane

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
)

// Script is check.py.
//
//go:embed check.py
var Script []byte

// ResultPrefix starts the result line a rank prints on stdout.
const ResultPrefix = "RAYFORM_CHECK "

// Port range the rendezvous port is drawn from: torch's usual c10d ports,
// outside Ray's fixed ports (6379 GCS, 8265 dashboard, 10001 client, 52365
// agent), Ray's worker port range (10002-19999), the kernel's ephemeral range
// (32768-60999, where Ray's other ports and vLLM's own c10d port fall) and
// vLLM's API port (8000 by default).
const (
	PortMin = 29400
	PortMax = 29499
)

// PickPort draws a rendezvous port from [PortMin, PortMax], none of avoid.
func PickPort(avoid ...int) int {
	for {
		p := PortMin + rand.IntN(PortMax-PortMin+1)
		if !slices.Contains(avoid, p) || len(avoid) > PortMax-PortMin {
			return p
		}
	}
}

// Result is one rank's result line.
type Result struct {
	Version     int                 `json:"version"`
	OK          bool                `json:"ok"`
	Rank        int                 `json:"rank"`
	WorldSize   int                 `json:"world_size"`
	Node        string              `json:"node"`
	Master      string              `json:"master"`
	Phase       string              `json:"phase"`
	Error       string              `json:"error,omitempty"`
	Torch       string              `json:"torch,omitempty"`
	ImportS     float64             `json:"import_s,omitempty"`
	StoreS      float64             `json:"store_s,omitempty"`
	RendezvousS float64             `json:"rendezvous_s,omitempty"`
	ElapsedS    float64             `json:"elapsed_s,omitempty"`
	Env         map[string]string   `json:"env,omitempty"`
	Backends    map[string]*Backend `json:"backends,omitempty"`
	Link        *Link               `json:"link,omitempty"`
}

// Backend is what one backend's all_reduce measured and which address and
// interface its connections used.
type Backend struct {
	OK          bool     `json:"ok"`
	Addr        string   `json:"addr,omitempty"`
	Iface       string   `json:"iface,omitempty"`
	OtherAddrs  []string `json:"other_addrs,omitempty"`
	Peers       []string `json:"peers,omitempty"`
	Connections int      `json:"connections"`
	Bytes       int64    `json:"bytes"`
	Iters       int      `json:"iters"`
	TimeS       float64  `json:"time_s"`
	AlgBWGBps   float64  `json:"algbw_gbps"`
	BusBWGBps   float64  `json:"busbw_gbps"`
	Note        string   `json:"note,omitempty"`
	// NCCL only, from its INFO lines.
	BootstrapIface string `json:"bootstrap_iface,omitempty"`
	BootstrapAddr  string `json:"bootstrap_addr,omitempty"`
	Net            string `json:"net,omitempty"`
	NetDetail      string `json:"net_detail,omitempty"`
	NCCLVersion    string `json:"nccl_version,omitempty"`
	Device         string `json:"device,omitempty"`
}

// Link is the host's view of the fabric interface.
type Link struct {
	Iface     string `json:"iface"`
	SpeedMbps *int   `json:"speed_mbps"`
}

// ParseResult finds the result line in a rank's output.
func ParseResult(out []byte) (*Result, error) {
	var found *Result
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, ResultPrefix)
		if i < 0 {
			continue
		}
		var r Result
		if err := json.Unmarshal([]byte(line[i+len(ResultPrefix):]), &r); err != nil {
			return nil, fmt.Errorf("data-plane check: unreadable result line: %w", err)
		}
		found = &r
	}
	if found == nil {
		return nil, errors.New("data-plane check: no result line in the output")
	}
	return found, nil
}

// Args is the command line of check.py for one rank (after the script).
func Args(rank, world int, master netip.Addr, port int, o Options) []string {
	o = o.withDefaults()
	args := []string{
		"--rank", fmt.Sprint(rank), "--world-size", fmt.Sprint(world),
		"--master-addr", master.String(), "--master-port", fmt.Sprint(port),
		"--timeout", fmt.Sprint(o.Timeout.Seconds()), "--size-mb", fmt.Sprint(o.SizeMiB),
		"--iters", fmt.Sprint(o.Iters), "--backends", o.Backends,
	}
	return args
}
