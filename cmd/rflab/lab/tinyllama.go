//go:build linux

package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The lab's tiny Llama (HubRepoLlama): a model the real vLLM loads and
// runs, written by labimage/make-tiny-llama.py (seeded random weights in
// two safetensors shards with their index, a config with head_dim 64, a
// byte-level BPE tokenizer trained with the `tokenizers` package). Up
// runs the script once per lab cache, with Debian's python3 and the numpy,
// safetensors and tokenizers wheels the vLLM layer's lock pins (from the
// cache's vllm-wheels, where building that layer put them), into
// cacheDir/models/tiny-llama-KEY; the lab hub serves that directory.

// HubRepoLlama is the lab hub's tiny Llama, served with -vllm real.
const HubRepoLlama = "rayform-lab/tiny-llama"

//go:embed labimage/make-tiny-llama.py
var tinyLlamaScript []byte

// tinyLlamaPackages are the packages the script imports.
var tinyLlamaPackages = []string{"numpy", "safetensors", "tokenizers"}

// tinyLlamaReqs are the vLLM lock's lines of tinyLlamaPackages.
func tinyLlamaReqs() (string, error) {
	var out []string
	for _, line := range strings.Split(string(vllmLock), "\n") {
		name, _, ok := strings.Cut(line, "==")
		for _, p := range tinyLlamaPackages {
			if ok && name == p {
				out = append(out, line)
			}
		}
	}
	if len(out) != len(tinyLlamaPackages) {
		return "", fmt.Errorf("tiny llama: labimage/vllm-lock.txt pins %d of %v", len(out), tinyLlamaPackages)
	}
	return strings.Join(out, "\n") + "\n", nil
}

// makeTinyLlama returns the tiny Llama's directory in cacheDir, writing
// it first unless an earlier lab did.
func makeTinyLlama(ctx context.Context, cacheDir string) (string, error) {
	reqs, err := tinyLlamaReqs()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(append([]byte{}, tinyLlamaScript...), reqs...))
	dir := filepath.Join(cacheDir, "models", "tiny-llama-"+hex.EncodeToString(sum[:])[:16])
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors.index.json")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("tiny llama: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "tmp-")
	if err != nil {
		return "", fmt.Errorf("tiny llama: %w", err)
	}
	defer os.RemoveAll(tmp)
	req := filepath.Join(tmp, "requirements.txt")
	script := filepath.Join(tmp, "make-tiny-llama.py")
	for p, b := range map[string][]byte{req: []byte(reqs), script: tinyLlamaScript} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", fmt.Errorf("tiny llama: %w", err)
		}
	}
	py := filepath.Join(tmp, "py")
	if _, err := run(ctx, "", torchPython, "-m", "pip", "install", "-q", "--disable-pip-version-check",
		"--no-index", "--find-links", filepath.Join(cacheDir, "vllm-wheels"), "--no-deps", "--require-hashes",
		"--target", py, "-r", req); err != nil {
		return "", fmt.Errorf("tiny llama: %w", err)
	}
	out := filepath.Join(tmp, "model")
	cmd := exec.CommandContext(ctx, torchPython, script, out)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+py, "PYTHONHASHSEED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tiny llama: %s: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	if err := os.Rename(out, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "model.safetensors.index.json")); serr == nil {
			return dir, nil // another lab wrote it meanwhile
		}
		return "", fmt.Errorf("tiny llama: %w", err)
	}
	return dir, nil
}
