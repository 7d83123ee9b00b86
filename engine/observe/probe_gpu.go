// The host's accelerators and memory: the parsers of nvidia-smi, ibdev2netdev and /proc/meminfo.

package observe

import (
	"fmt"
	"strconv"
	"strings"
)

// gpuQuery is the nvidia-smi query: one CSV line per GPU, no header, no units.
const gpuQuery = "index,name,uuid,memory.total,memory.used,memory.free,driver_version"

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

func parseGPUs(s *section) (GPUFacts, bool) {
	if msg := s.failure(); msg != "" {
		return GPUFacts{Err: msg}, false
	}
	var gf GPUFacts
	unified := false
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 7 {
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
