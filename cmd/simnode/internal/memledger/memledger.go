// Package memledger is a node's simulated memory accounting: every simulated
// process that "allocates" memory (a vLLM worker loading weights, capturing
// CUDA graphs) records its usage in a file named by its pid; readers (the
// raylet's memory monitor, nvidia-smi, vLLM's free-memory check) sum the
// entries of live processes. The directory is $SIMNODE_STATE_DIR/mem
// (default /tmp/simnode/mem): one per container, or per node when the lab
// bind-mounts a shared directory.
package memledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
	"github.com/rayform/rayform/engine/state/jsonfile"
)

// Entry is one process's usage.
type Entry struct {
	PID int `json:"pid"`
	// Slot tells apart several simulated workers in one process.
	Slot int `json:"slot"`
	// SysMiB counts against system memory (all of it on unified-memory
	// nodes; host-side buffers otherwise).
	SysMiB int64 `json:"sys_mib"`
	// GPUMiB counts against device GPU's memory on discrete GPUs.
	GPUMiB int64 `json:"gpu_mib"`
	GPU    int   `json:"gpu"`
	// Command is shown in Ray's "Top 10 memory users" and nvidia-smi.
	Command string `json:"command"`
}

// Ledger is a directory of entries.
type Ledger struct{ dir string }

// Open returns the ledger selected by env.
func Open(env sim.Env) *Ledger {
	root := env.Get("SIMNODE_STATE_DIR")
	if root == "" {
		root = filepath.Join(os.TempDir(), "simnode")
	}
	return &Ledger{dir: filepath.Join(root, "mem")}
}

// At returns a ledger in dir (tests).
func At(dir string) *Ledger { return &Ledger{dir: dir} }

// Set records e (replacing the process's previous entry), atomically.
func (l *Ledger) Set(e Entry) error {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("memory ledger: %w", err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	name := filepath.Join(l.dir, fmt.Sprintf("%d_%d.json", e.PID, e.Slot))
	if err := jsonfile.Replace(name, b, 0o644); err != nil {
		return fmt.Errorf("memory ledger: %w", err)
	}
	return nil
}

// Remove drops every entry of pid.
func (l *Ledger) Remove(pid int) {
	matches, _ := filepath.Glob(filepath.Join(l.dir, strconv.Itoa(pid)+"_*.json"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

// alive reports whether pid is a running process: a zombie (killed, not
// yet reaped — common right after `ray stop --force` on a loaded machine)
// holds no memory, as a dead CUDA process frees its device memory.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	switch b[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

// Entries returns the entries of live processes, largest system usage
// first; entries of dead processes are deleted.
func (l *Ledger) Entries() []Entry {
	des, err := os.ReadDir(l.dir)
	if err != nil {
		return nil
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		pidStr, _, _ := strings.Cut(strings.TrimSuffix(name, ".json"), "_")
		pid, err := strconv.Atoi(pidStr)
		if err != nil {
			continue
		}
		if !alive(pid) {
			_ = os.Remove(filepath.Join(l.dir, name))
			continue
		}
		b, err := os.ReadFile(filepath.Join(l.dir, name))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			continue
		}
		var e Entry
		if json.Unmarshal(b, &e) == nil {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SysMiB != out[j].SysMiB {
			return out[i].SysMiB > out[j].SysMiB
		}
		if out[i].GPUMiB != out[j].GPUMiB {
			return out[i].GPUMiB > out[j].GPUMiB
		}
		return out[i].PID < out[j].PID
	})
	return out
}

// SysMiB sums system memory of live entries.
func (l *Ledger) SysMiB() int64 {
	var n int64
	for _, e := range l.Entries() {
		n += e.SysMiB
	}
	return n
}

// GPUMiB sums device memory of live entries on gpu.
func (l *Ledger) GPUMiB(gpu int) int64 {
	var n int64
	for _, e := range l.Entries() {
		if e.GPU == gpu {
			n += e.GPUMiB
		}
	}
	return n
}
