// Package hw loads the simulated hardware of a node: GPUs, system memory,
// RDMA adapters, and the timings that stand in for slow real work (weight
// loading, CUDA graph capture, timeouts). See the simnode package
// documentation for the file format.
package hw

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// DefaultPath is read when SIMNODE_HARDWARE is unset.
const DefaultPath = "/etc/simnode/hardware.json"

// EnvHardware names the environment variable holding the hardware file path.
const EnvHardware = "SIMNODE_HARDWARE"

// ErrNoDriver reports that no hardware file exists: the node has no NVIDIA
// driver, as far as every simulated tool is concerned.
var ErrNoDriver = errors.New("no NVIDIA driver (no simulated hardware file)")

// MiB is one mebibyte in bytes.
const MiB = 1 << 20

// GPU is one simulated device.
type GPU struct {
	// Name is the product name, e.g. "NVIDIA GB10" or "NVIDIA H200".
	Name string `json:"name"`
	// MemoryMiB is the device memory; 0 means unified memory (nvidia-smi
	// prints [N/A] and the node's system memory is the device memory).
	MemoryMiB int64 `json:"memory_mib"`
	// UUID defaults to a stable value derived from the index.
	UUID string `json:"uuid,omitempty"`
	// PCIBusID defaults to 00000000:0N:00.0.
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// TemperatureC defaults to 34.
	TemperatureC int `json:"temperature_c,omitempty"`
	// ComputeCap defaults to "12.1" for GB10 and "9.0" otherwise.
	ComputeCap string `json:"compute_cap,omitempty"`
	// MIG is nvidia-smi's mig.mode.current: "Enabled", "Disabled", or ""
	// for a GPU without MIG ([N/A], as on GB10).
	MIG string `json:"mig,omitempty"`
}

// RDMA is one RDMA adapter port and the netdev it is bound to.
type RDMA struct {
	HCA    string `json:"hca"`
	Port   int    `json:"port"`
	Netdev string `json:"netdev"`
}

// Hardware is the parsed hardware file.
type Hardware struct {
	GPUs []GPU `json:"gpus"`
	// MemoryMiB is system RAM (MemTotal).
	MemoryMiB int64 `json:"memory_mib"`
	// BaseUsedMiB is memory in use by everything that is not a simulated
	// process (OS, page cache, other daemons). Defaults to 5684 MiB, which
	// with --gpu-memory-utilization 0.90 and a 512 MiB CUDA graph pool puts a
	// 122572 MiB unified node at 113.78GB / 119.70GB, as in the seed.
	BaseUsedMiB *int64 `json:"base_used_mib,omitempty"`
	// UnifiedMemory marks a GB10-style node: GPU memory is system memory.
	UnifiedMemory bool   `json:"unified_memory"`
	DriverVersion string `json:"driver_version"`
	CUDAVersion   string `json:"cuda_version"`
	// CPUs is what Ray reports as CPU; defaults to 20.
	CPUs int    `json:"cpus,omitempty"`
	RDMA []RDMA `json:"rdma,omitempty"`
	// Timing overrides default durations; see Timing.
	Timing map[string]string `json:"timing,omitempty"`
	// Models adds or overrides entries of the model catalog.
	Models map[string]Model `json:"models,omitempty"`
	// GraphPoolMiB is the extra memory CUDA graph capture takes; default 512.
	GraphPoolMiB int64 `json:"graph_pool_mib,omitempty"`

	// Path is where the file was read from.
	Path string `json:"-"`
}

// Path returns the hardware file path selected by env.
func Path(env sim.Env) string {
	if p := env.Get(EnvHardware); p != "" {
		return p
	}
	return DefaultPath
}

// Load reads the hardware file named by env. A missing file is ErrNoDriver.
func Load(env sim.Env) (*Hardware, error) {
	p := Path(env)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoDriver
	}
	if err != nil {
		return nil, fmt.Errorf("read hardware file: %w", err)
	}
	h, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	h.Path = p
	return h, nil
}

// Parse decodes a hardware file and fills defaults.
func Parse(b []byte) (*Hardware, error) {
	var h Hardware
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("parse hardware file: %w", err)
	}
	if h.MemoryMiB <= 0 {
		h.MemoryMiB = 122572
	}
	if h.DriverVersion == "" {
		h.DriverVersion = "580.95.05"
	}
	if h.CUDAVersion == "" {
		h.CUDAVersion = "13.0"
	}
	if h.CPUs <= 0 {
		h.CPUs = 20
	}
	if h.GraphPoolMiB <= 0 {
		h.GraphPoolMiB = 512
	}
	for i := range h.GPUs {
		g := &h.GPUs[i]
		if g.Name == "" {
			g.Name = "NVIDIA GB10"
		}
		if g.UUID == "" {
			g.UUID = fmt.Sprintf("GPU-5e1c0d3a-%04x-4b7e-9a2f-%012x", i, 0x51a7e0000000+i)
		}
		if g.PCIBusID == "" {
			g.PCIBusID = fmt.Sprintf("0000000F:%02X:00.0", i+1)
		}
		if g.TemperatureC == 0 {
			g.TemperatureC = 34
		}
		if g.ComputeCap == "" {
			g.ComputeCap = "9.0"
			if h.UnifiedMemory || g.MemoryMiB == 0 {
				g.ComputeCap = "12.1"
			}
		}
	}
	return &h, nil
}

// BaseUsed returns the memory used outside simulated processes, in MiB.
func (h *Hardware) BaseUsed() int64 {
	if h.BaseUsedMiB != nil {
		return *h.BaseUsedMiB
	}
	return 5684
}

// Unified reports whether GPU i shares system memory.
func (h *Hardware) Unified(i int) bool {
	return h.UnifiedMemory || (i < len(h.GPUs) && h.GPUs[i].MemoryMiB == 0)
}

// DeviceTotalMiB is the memory torch reports as the device total for GPU i:
// system memory on unified nodes, device memory otherwise.
func (h *Hardware) DeviceTotalMiB(i int) int64 {
	if h.Unified(i) || i >= len(h.GPUs) {
		return h.MemoryMiB
	}
	return h.GPUs[i].MemoryMiB
}
