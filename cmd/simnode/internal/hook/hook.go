// Package hook plays nvidia-container-runtime-hook, the OCI prestart hook
// dockerd registers for `--gpus` when a binary of that name is on its PATH
// (moby daemon/nvidia_linux.go: args ["nvidia-container-runtime-hook",
// "prestart"], env = dockerd's environment). runc runs it with the
// container state on stdin; it reads the bundle's config.json and copies
// the node's hardware file ($SIMNODE_HARDWARE, else
// /etc/simnode/hardware.json) into <rootfs>/etc/simnode/hardware.json,
// keeping only the GPUs NVIDIA_VISIBLE_DEVICES selects. A container started
// without --gpus never runs the hook and so sees no driver.
package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

type state struct {
	Bundle string `json:"bundle"`
}

type spec struct {
	Root struct {
		Path string `json:"path"`
	} `json:"root"`
	Process struct {
		Env []string `json:"env"`
	} `json:"process"`
}

// Main runs the hook.
func Main(ctx context.Context, p *sim.Proc) int {
	if len(p.Args) == 0 {
		fmt.Fprintln(p.Stderr, "Usage of nvidia-container-runtime-hook:\n  -config string\n    \tconfiguration file\n  -debug\n    \tenable debug output\n\nCommands:\n  prestart\n    \trun the prestart hook\n  poststart\n    \tno-op\n  poststop\n    \tno-op")
		return 2
	}
	switch p.Args[len(p.Args)-1] {
	case "poststart", "poststop":
		return 0
	case "prestart":
	default:
		fmt.Fprintf(p.Stderr, "Bad hook: %s\n", p.Args[len(p.Args)-1])
		return 2
	}
	if err := prestart(p); err != nil {
		fmt.Fprintln(p.Stderr, err)
		return 1
	}
	return 0
}

func prestart(p *sim.Proc) error {
	b, err := io.ReadAll(p.Stdin)
	if err != nil {
		return fmt.Errorf("could not read container state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("could not decode container state: %w", err)
	}
	bundle := st.Bundle
	if bundle == "" {
		bundle, _ = os.Getwd()
	}
	cb, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return fmt.Errorf("could not load OCI spec: %w", err)
	}
	var sp spec
	if err := json.Unmarshal(cb, &sp); err != nil {
		return fmt.Errorf("could not decode OCI spec: %w", err)
	}
	visible, set := "", false
	for _, kv := range sp.Process.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == "NVIDIA_VISIBLE_DEVICES" {
			visible, set = v, true
		}
	}
	if !set || visible == "" || visible == "void" || visible == "none" {
		return nil
	}
	src := hw.Path(p.Env)
	raw, err := os.ReadFile(src)
	if errors.Is(err, os.ErrNotExist) {
		return errors.New("Auto-detected mode as 'legacy'\nnvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or directory")
	}
	if err != nil {
		return fmt.Errorf("nvidia-container-cli: initialization error: %w", err)
	}
	out, err := filterGPUs(raw, visible)
	if err != nil {
		return err
	}
	root := sp.Root.Path
	if !filepath.IsAbs(root) {
		root = filepath.Join(bundle, root)
	}
	dst := filepath.Join(root, "etc", "simnode", "hardware.json")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("nvidia-container-cli: mount error: %w", err)
	}
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		return fmt.Errorf("nvidia-container-cli: mount error: %w", err)
	}
	return nil
}

// filterGPUs keeps the GPUs named by NVIDIA_VISIBLE_DEVICES ("all", or
// indices / UUIDs separated by commas) and fails like nvidia-container-cli
// on an unknown device.
func filterGPUs(raw []byte, visible string) ([]byte, error) {
	if visible == "all" {
		return raw, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse hardware file: %w", err)
	}
	h, err := hw.Parse(raw)
	if err != nil {
		return nil, err
	}
	var keep []json.RawMessage
	var all []json.RawMessage
	_ = json.Unmarshal(doc["gpus"], &all)
	for _, id := range strings.Split(visible, ",") {
		id = strings.TrimSpace(id)
		found := false
		for i, g := range h.GPUs {
			if id == strconv.Itoa(i) || id == g.UUID {
				if i < len(all) {
					// Keep the device's identity: its UUID would otherwise
					// be re-derived from its new position.
					var g map[string]any
					if json.Unmarshal(all[i], &g) == nil {
						g["uuid"] = h.GPUs[i].UUID
						if b, err := json.Marshal(g); err == nil {
							keep = append(keep, b)
						}
					}
				}
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("nvidia-container-cli: device error: %s: unknown device", id)
		}
	}
	kb, _ := json.Marshal(keep)
	doc["gpus"] = kb
	return json.MarshalIndent(doc, "", "  ")
}
