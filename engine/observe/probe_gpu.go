// The host's accelerators and memory: the parsers of nvidia-smi, ibdev2netdev and /proc/meminfo.

package observe

import (
	"fmt"
	"strconv"
	"strings"
)

// gpuQuery is the nvidia-smi query: one CSV line per GPU, no header, no
// units. gpuQueryBasic is its first seven fields, asked only when the
// driver's nvidia-smi refuses a field of gpuQuery (compute_cap and
// mig.mode.current are newer than the rest; an unknown field is exit 2).
const (
	gpuQuery      = gpuQueryBasic + ",compute_cap,mig.mode.current"
	gpuQueryBasic = "index,name,uuid,memory.total,memory.used,memory.free,driver_version"
)

// gpuHelpers is rf_gpu, the gpu section: nvidia-smi's query, then in parts
// the driver's CUDA version (nvidia-smi --version), the NVSwitches the
// driver lists and, where there are any, the fabric manager's state as
// systemd has it, and the file libcuda.so.1 resolves to (ldconfig's cache,
// as the loader finds it). Only the query decides the exit code; every
// other part is optional. nvidia-smi prints "Field ... is not a valid field
// to query." on stdout, so the first query's stdout is held until its exit
// code says it is CSV.
const gpuHelpers = `rf_gpu() {
	{ rf_o=$(rf_x nvidia-smi --query-gpu=` + gpuQuery + ` --format=csv,noheader,nounits 2>&4 4>&-); rf_rc=$?; } 4>&2
	if [ "$rf_rc" = 2 ]; then
		rf_x nvidia-smi --query-gpu=` + gpuQueryBasic + ` --format=csv,noheader,nounits
		rf_rc=$?
	elif [ "$rf_rc" = 0 ]; then
		printf '%s\n' "$rf_o"
	else
		printf '%s\n' "$rf_o" >&2
	fi
	unset rf_o
	[ "$rf_rc" = 0 ] || return "$rf_rc"
	printf '%s part version\n' "$M"
	rf_x nvidia-smi --version 2>/dev/null
	printf '%s part nvswitch\n' "$M"
	rf_n=0
	set +f
	for rf_p in /proc/driver/nvidia-nvswitch/devices/*; do
		[ -e "$rf_p" ] || continue
		printf '%s\n' "${rf_p##*/}"
		rf_n=1
	done
	set -f
	if [ "$rf_n" = 1 ]; then
		printf '%s part fabricmanager\n' "$M"
		rf_x systemctl show -p LoadState -p ActiveState nvidia-fabricmanager 2>/dev/null
	fi
	printf '%s part libcuda\n' "$M"
	rf_l=$(rf_x ldconfig -p 2>/dev/null) || rf_l=
	rf_i=$IFS
	IFS='
'
	for rf_p in $rf_l; do
		case $rf_p in *'libcuda.so.1 '*'=> '*)
			rf_p=${rf_p##*=> }
			printf '%s\n' "$(rf_x readlink -f "$rf_p" 2>/dev/null || printf '%s' "$rf_p")"
			break ;;
		esac
	done
	IFS=$rf_i
	unset rf_l
	return 0
}
`

func parseRDMA(s *section) RDMAFacts {
	if msg := s.failure(); msg != "" {
		return RDMAFacts{Err: msg}
	}
	var rf RDMAFacts
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != "port" || f[3] != "==>" {
			rf.Err = fmt.Sprintf("unparsable RDMA line %q", line)
			continue
		}
		port, err := strconv.Atoi(f[2])
		if err != nil {
			rf.Err = fmt.Sprintf("unparsable RDMA line %q", line)
			continue
		}
		d := RDMADevice{Device: f[0], Port: port, NetDev: f[4]}
		if d.NetDev == "-" {
			d.NetDev = ""
		}
		if len(f) > 5 {
			d.Up = f[5] == "(Up)"
		}
		rf.List = append(rf.List, d)
	}
	return rf
}

func parseMeminfo(s *section) Memory {
	if msg := s.failure(); msg != "" {
		return Memory{Err: msg}
	}
	var m Memory
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			n *= 1024
		}
		switch k {
		case "MemTotal":
			m.TotalBytes = n
		case "MemAvailable":
			m.AvailableBytes = n
		}
	}
	if m.TotalBytes == 0 {
		m.Err = "MemTotal not found in /proc/meminfo"
	}
	return m
}

// smiNumber parses an nvidia-smi numeric field; -1 when the GPU does not
// report it ([N/A], [Not Supported], ...).
func smiNumber(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1, false
	}
	return n, true
}

// parseGPUs reads the gpu section: the query's CSV lines (seven fields, or
// nine with compute_cap and mig.mode.current), then the parts rf_gpu
// prints (version, nvswitch, fabricmanager, libcuda).
func parseGPUs(s *section) (GPUFacts, bool) {
	if msg := s.failure(); msg != "" {
		return GPUFacts{Err: msg}, false
	}
	var gf GPUFacts
	unified := false
	gf.CUDA = smiCUDAVersion(s.part("version"))
	gf.Simulator = smiVersionField(s.part("version"), "Simulated by")
	for line := range strings.SplitSeq(string(s.part("nvswitch")), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			gf.NVSwitches = append(gf.NVSwitches, line)
		}
	}
	if s.hasPart("fabricmanager") {
		gf.FabricManager = fabricManagerState(s.part("fabricmanager"))
	}
	gf.LibCUDA = strings.TrimSpace(string(s.part("libcuda")))
	for line := range strings.SplitSeq(string(s.part("")), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 7 && len(f) != 9 {
			gf.Err = fmt.Sprintf("unparsable nvidia-smi line %q", line)
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			gf.Err = fmt.Sprintf("unparsable nvidia-smi line %q", line)
			continue
		}
		g := GPU{Index: idx, Name: f[1], UUID: f[2], Driver: f[6]}
		g.MemoryTotalMiB, _ = smiNumber(f[3])
		g.MemoryUsedMiB, _ = smiNumber(f[4])
		g.MemoryFreeMiB, _ = smiNumber(f[5])
		if len(f) == 9 {
			g.ComputeCap, g.MIGMode = smiText(f[7]), smiText(f[8])
		}
		if f[3] == "[N/A]" {
			unified = true
		}
		gf.List = append(gf.List, g)
	}
	if len(gf.List) == 0 && gf.Err == "" {
		gf.Err = "nvidia-smi listed no GPU"
	}
	return gf, unified
}

// smiText is an nvidia-smi text field, "" where the GPU does not report it
// ([N/A], [Not Supported], ...).
func smiText(s string) string {
	if strings.HasPrefix(s, "[") {
		return ""
	}
	return s
}

// smiCUDAVersion is the "CUDA Version" line of `nvidia-smi --version`
// (CUDA Version        : 13.0); "" when absent (an nvidia-smi older than
// the flag).
func smiCUDAVersion(b []byte) string { return smiVersionField(b, "CUDA Version") }

// smiVersionField is the value of the "KEY : VALUE" line of `nvidia-smi
// --version` whose key is key (case-insensitive); "" when there is none.
// "Simulated by" is printed only by a stand-in (the lab's simnode).
func smiVersionField(b []byte, key string) string {
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// fabricManagerState reads `systemctl show -p LoadState -p ActiveState`:
// the unit's ActiveState, "not-found" when it is not installed, "" when
// systemd did not answer.
func fabricManagerState(b []byte) string {
	var load, active string
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "LoadState":
			load = v
		case "ActiveState":
			active = v
		}
	}
	if load == "not-found" {
		return load
	}
	return active
}
