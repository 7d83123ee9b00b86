// Package nvsmi plays nvidia-smi: --query-gpu with --format=csv[,noheader]
// [,nounits], --query-compute-apps, -L, and the default table, reading the
// simulated hardware and the node's memory ledger. Without a hardware file
// it fails as nvidia-smi does without a driver (exit 9).
package nvsmi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/memledger"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// SimulatedKey and Simulator make the last line of `nvidia-smi --version`
// ("Simulated by        : rayform simnode"), a line NVIDIA's nvidia-smi
// never prints: rayform's probe reads it (observe's GPUFacts.Simulator) and
// status marks the node's GPUs "(simulated)". Every other answer is the
// real tool's, so the marker is the only difference rayform can see.
const (
	SimulatedKey = "Simulated by"
	Simulator    = "rayform simnode"
)

// Exit codes documented in nvidia-smi(1).
const (
	exitInvalidArg = 2
	exitNoDevices  = 6
	exitNoDriver   = 9
)

const (
	noDriverMsg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n\n"
	invalidArgs = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
)

type gpuState struct {
	idx     int
	g       hw.GPU
	h       *hw.Hardware
	usedMiB int64
}

func (s gpuState) unified() bool { return s.h.Unified(s.idx) }

func (s gpuState) reservedMiB() int64 {
	return int64(math.Round(float64(s.g.MemoryMiB) * 0.00428))
}

type field struct {
	header string
	unit   string // printed after the value unless nounits
	value  func(s gpuState, n int) string
}

func mib(s gpuState, v int64) string {
	if s.unified() {
		return "[N/A]"
	}
	return strconv.FormatInt(v, 10)
}

var gpuFields = map[string]field{
	"timestamp":          {header: "timestamp", value: nil},
	"driver_version":     {header: "driver_version", value: func(s gpuState, _ int) string { return s.h.DriverVersion }},
	"count":              {header: "count", value: func(_ gpuState, n int) string { return strconv.Itoa(n) }},
	"index":              {header: "index", value: func(s gpuState, _ int) string { return strconv.Itoa(s.idx) }},
	"name":               {header: "name", value: func(s gpuState, _ int) string { return s.g.Name }},
	"uuid":               {header: "uuid", value: func(s gpuState, _ int) string { return s.g.UUID }},
	"serial":             {header: "serial", value: func(gpuState, int) string { return "[N/A]" }},
	"pci.bus_id":         {header: "pci.bus_id", value: func(s gpuState, _ int) string { return s.g.PCIBusID }},
	"memory.total":       {header: "memory.total [MiB]", unit: " MiB", value: func(s gpuState, _ int) string { return mib(s, s.g.MemoryMiB) }},
	"memory.reserved":    {header: "memory.reserved [MiB]", unit: " MiB", value: func(s gpuState, _ int) string { return mib(s, s.reservedMiB()) }},
	"memory.used":        {header: "memory.used [MiB]", unit: " MiB", value: func(s gpuState, _ int) string { return mib(s, s.usedMiB) }},
	"memory.free":        {header: "memory.free [MiB]", unit: " MiB", value: func(s gpuState, _ int) string { return mib(s, s.g.MemoryMiB-s.reservedMiB()-s.usedMiB) }},
	"utilization.gpu":    {header: "utilization.gpu [%]", unit: " %", value: func(gpuState, int) string { return "0" }},
	"utilization.memory": {header: "utilization.memory [%]", unit: " %", value: func(s gpuState, _ int) string { return mib(s, 0) }},
	"temperature.gpu":    {header: "temperature.gpu", value: func(s gpuState, _ int) string { return strconv.Itoa(s.g.TemperatureC) }},
	"power.draw":         {header: "power.draw [W]", unit: " W", value: func(gpuState, int) string { return "11.20" }},
	"pstate":             {header: "pstate", value: func(gpuState, int) string { return "P0" }},
	"persistence_mode":   {header: "persistence_mode", value: func(gpuState, int) string { return "Enabled" }},
	"compute_cap":        {header: "compute_cap", value: func(s gpuState, _ int) string { return s.g.ComputeCap }},
	"compute_mode":       {header: "compute_mode", value: func(gpuState, int) string { return "Default" }},
	"mig.mode.current": {header: "mig.mode.current", value: func(s gpuState, _ int) string {
		if s.g.MIG == "" {
			return "[N/A]"
		}
		return s.g.MIG
	}},
	"vbios_version": {header: "vbios_version", value: func(gpuState, int) string { return "[N/A]" }},
}

var fieldAliases = map[string]string{"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id", "gpu_serial": "serial", "temperature.gpu.tlimit": "temperature.gpu"}

type options struct {
	query, apps, format string
	list, help, version bool
	ids                 string
}

func parse(args []string) (*options, bool) {
	o := &options{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		takes := func() bool {
			if hasVal {
				return true
			}
			if i+1 < len(args) {
				i++
				val = args[i]
				return true
			}
			return false
		}
		switch name {
		case "-h", "--help":
			o.help = true
		case "--version":
			o.version = true
		case "-L", "--list-gpus":
			o.list = true
		case "--query-gpu":
			if !takes() {
				return nil, false
			}
			o.query = val
		case "--query-compute-apps":
			if !takes() {
				return nil, false
			}
			o.apps = val
		case "--format":
			if !takes() {
				return nil, false
			}
			o.format = val
		case "-i", "--id":
			if !takes() {
				return nil, false
			}
			o.ids = val
		default:
			if strings.HasPrefix(a, "-i") && len(a) > 2 {
				o.ids = a[2:]
				continue
			}
			return nil, false
		}
	}
	if (o.query != "" || o.apps != "") && o.format == "" {
		return nil, false
	}
	return o, true
}

// Main runs nvidia-smi.
func Main(ctx context.Context, p *sim.Proc) int {
	o, ok := parse(p.Args)
	if !ok {
		fmt.Fprint(p.Stdout, invalidArgs)
		return exitInvalidArg
	}
	if o.help {
		fmt.Fprintln(p.Stdout, "NVIDIA System Management Interface -- v580.95.05\n\nNVSMI provides monitoring information for Tesla and select Quadro devices.\n\n    nvidia-smi [OPTION1 [ARG1]] [OPTION2 [ARG2]] ...\n\n    -h,   --help                Print usage information and exit.\n    -L,   --list-gpus           Display a list of GPUs connected to the system.\n    -i,   --id=                 Target a specific GPU.\n    --query-gpu=                Information about GPU.\n    --query-compute-apps=       List of currently active compute processes.\n    --format=                   Comma separated list of format options: csv, noheader, nounits")
		return 0
	}
	h, err := hw.Load(p.Env)
	if errors.Is(err, hw.ErrNoDriver) {
		fmt.Fprint(p.Stdout, noDriverMsg)
		return exitNoDriver
	}
	if err != nil {
		fmt.Fprintln(p.Stderr, err)
		return exitNoDriver
	}
	if o.version {
		fmt.Fprintf(p.Stdout, "NVIDIA-SMI version  : %s\nNVML version        : %s\nDRIVER version      : %s\nCUDA Version        : %s\n", h.DriverVersion, nvmlVersion(h.DriverVersion), h.DriverVersion, h.CUDAVersion)
		// The one line NVIDIA's nvidia-smi never prints: it tells
		// rayform's probe (and a person) that these GPUs are simulated.
		fmt.Fprintf(p.Stdout, "%-20s: %s\n", SimulatedKey, Simulator)
		return 0
	}
	if len(h.GPUs) == 0 {
		fmt.Fprintln(p.Stdout, "No devices were found")
		return exitNoDevices
	}
	ledger := memledger.Open(p.Env)
	var gpus []gpuState
	for i, g := range h.GPUs {
		if o.ids != "" && !selected(o.ids, i, g) {
			continue
		}
		gpus = append(gpus, gpuState{idx: i, g: g, h: h, usedMiB: ledger.GPUMiB(i)})
	}
	if o.ids != "" && len(gpus) == 0 {
		fmt.Fprintf(p.Stdout, "No devices were found\n")
		return exitNoDevices
	}
	switch {
	case o.list:
		for _, s := range gpus {
			fmt.Fprintf(p.Stdout, "GPU %d: %s (UUID: %s)\n", s.idx, s.g.Name, s.g.UUID)
		}
		return 0
	case o.query != "":
		return query(p, o, gpus, len(h.GPUs))
	case o.apps != "":
		return apps(p, o, gpus, ledger)
	}
	table(p, h, gpus, ledger)
	return 0
}

func selected(ids string, i int, g hw.GPU) bool {
	for _, id := range strings.Split(ids, ",") {
		id = strings.TrimSpace(id)
		if id == strconv.Itoa(i) || id == g.UUID || id == g.PCIBusID {
			return true
		}
	}
	return false
}

func formatFlags(f string) (header, units bool, ok bool) {
	header, units = true, true
	csv := false
	for _, part := range strings.Split(f, ",") {
		switch strings.TrimSpace(part) {
		case "csv":
			csv = true
		case "noheader":
			header = false
		case "nounits":
			units = false
		default:
			return false, false, false
		}
	}
	return header, units, csv
}

func query(p *sim.Proc, o *options, gpus []gpuState, count int) int {
	header, units, ok := formatFlags(o.format)
	if !ok {
		fmt.Fprint(p.Stdout, invalidArgs)
		return exitInvalidArg
	}
	var fs []field
	for _, name := range strings.Split(o.query, ",") {
		name = strings.TrimSpace(name)
		canon := name
		if a, ok := fieldAliases[name]; ok {
			canon = a
		}
		f, ok := gpuFields[canon]
		if !ok {
			fmt.Fprintf(p.Stdout, "Field \"%s\" is not a valid field to query.\n\n", name)
			return exitInvalidArg
		}
		if canon == "timestamp" {
			now := p.Now()
			f.value = func(gpuState, int) string { return now.Format("2006/01/02 15:04:05.000") }
		}
		fs = append(fs, f)
	}
	w := p.Stdout
	if header {
		hs := make([]string, len(fs))
		for i, f := range fs {
			hs[i] = f.header
		}
		fmt.Fprintln(w, strings.Join(hs, ", "))
	}
	for _, s := range gpus {
		vs := make([]string, len(fs))
		for i, f := range fs {
			v := f.value(s, count)
			if units && f.unit != "" && !strings.HasPrefix(v, "[") {
				v += f.unit
			}
			vs[i] = v
		}
		fmt.Fprintln(w, strings.Join(vs, ", "))
	}
	return 0
}

func apps(p *sim.Proc, o *options, gpus []gpuState, ledger *memledger.Ledger) int {
	header, units, ok := formatFlags(o.format)
	if !ok {
		fmt.Fprint(p.Stdout, invalidArgs)
		return exitInvalidArg
	}
	type appField struct{ header, unit string }
	known := map[string]appField{"pid": {"pid", ""}, "process_name": {"process_name", ""}, "used_memory": {"used_gpu_memory [MiB]", " MiB"}, "used_gpu_memory": {"used_gpu_memory [MiB]", " MiB"}, "gpu_uuid": {"gpu_uuid", ""}, "gpu_bus_id": {"gpu_bus_id", ""}, "gpu_name": {"gpu_name", ""}}
	names := strings.Split(o.apps, ",")
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
		if _, ok := known[names[i]]; !ok {
			fmt.Fprintf(p.Stdout, "Field \"%s\" is not a valid field to query.\n\n", names[i])
			return exitInvalidArg
		}
	}
	if header {
		hs := make([]string, len(names))
		for i, n := range names {
			hs[i] = known[n].header
		}
		fmt.Fprintln(p.Stdout, strings.Join(hs, ", "))
	}
	for _, e := range ledger.Entries() {
		var s *gpuState
		for i := range gpus {
			if gpus[i].idx == e.GPU {
				s = &gpus[i]
			}
		}
		if s == nil {
			continue
		}
		used := e.GPUMiB
		if s.unified() {
			used = e.SysMiB
		}
		vs := make([]string, len(names))
		for i, n := range names {
			switch n {
			case "pid":
				vs[i] = strconv.Itoa(e.PID)
			case "process_name":
				vs[i] = e.Command
			case "used_memory", "used_gpu_memory":
				vs[i] = strconv.FormatInt(used, 10)
				if units {
					vs[i] += " MiB"
				}
			case "gpu_uuid":
				vs[i] = s.g.UUID
			case "gpu_bus_id":
				vs[i] = s.g.PCIBusID
			case "gpu_name":
				vs[i] = s.g.Name
			}
		}
		fmt.Fprintln(p.Stdout, strings.Join(vs, ", "))
	}
	return 0
}

func table(p *sim.Proc, h *hw.Hardware, gpus []gpuState, ledger *memledger.Ledger) {
	w := p.Stdout
	fmt.Fprintln(w, p.Now().Format("Mon Jan  2 15:04:05 2006"))
	line := "+-----------------------------------------------------------------------------------------+"
	fmt.Fprintln(w, line)
	fmt.Fprintf(w, "| NVIDIA-SMI %-22s Driver Version: %-15s CUDA Version: %-9s|\n", h.DriverVersion, h.DriverVersion, h.CUDAVersion)
	fmt.Fprintln(w, "+-----------------------------------------+------------------------+----------------------+")
	fmt.Fprintln(w, "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |")
	fmt.Fprintln(w, "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |")
	fmt.Fprintln(w, "|=========================================+========================+======================|")
	for _, s := range gpus {
		mem := "Not Supported"
		if !s.unified() {
			mem = fmt.Sprintf("%dMiB / %dMiB", s.usedMiB, s.g.MemoryMiB)
		}
		fmt.Fprintf(w, "| %3d  %-20s           On  | %-16s   Off | %20s |\n", s.idx, trunc(s.g.Name, 20), s.g.PCIBusID, "N/A")
		fmt.Fprintf(w, "| N/A   %2dC    P0             11W /  N/A  | %22s |      0%%      Default |\n", s.g.TemperatureC, mem)
		fmt.Fprintln(w, "+-----------------------------------------+------------------------+----------------------+")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, line)
	fmt.Fprintln(w, "| Processes:                                                                              |")
	fmt.Fprintln(w, "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |")
	fmt.Fprintln(w, "|        ID   ID                                                               Usage      |")
	fmt.Fprintln(w, "|=========================================================================================|")
	entries := ledger.Entries()
	if len(entries) == 0 {
		fmt.Fprintln(w, "|  No running processes found                                                             |")
	}
	for _, e := range entries {
		used := e.GPUMiB
		if h.Unified(e.GPU) {
			used = e.SysMiB
		}
		fmt.Fprintf(w, "|  %3d   N/A  N/A   %10d      C   %-35s %6dMiB |\n", e.GPU, e.PID, trunc(e.Command, 35), used)
	}
	fmt.Fprintln(w, line)
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// nvmlVersion is the NVML version nvidia-smi --version prints: the
// driver's first two fields (580.159.04 → 580.159, as on a real H100).
func nvmlVersion(driver string) string {
	f := strings.SplitN(driver, ".", 3)
	return strings.Join(f[:min(2, len(f))], ".")
}
