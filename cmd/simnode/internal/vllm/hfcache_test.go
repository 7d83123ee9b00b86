package vllm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/golden"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// writeCache lays out org/tiny in a Hugging Face cache under dir as
// huggingface_hub does (blobs, a snapshot of links, refs/main) and
// returns the cache and the snapshot; drop names a shard whose blob is
// left out (the link dangles).
func writeCache(t *testing.T, dir, drop string) (string, string) {
	t.Helper()
	cache := filepath.Join(dir, "hub")
	repo := filepath.Join(cache, "models--org--tiny")
	snap := filepath.Join(repo, "snapshots", testCommit)
	for _, d := range []string{filepath.Join(repo, "blobs"), filepath.Join(repo, "refs"), snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"config.json":                      `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}`,
		"model.safetensors.index.json":     `{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}`,
		"model-00001-of-00002.safetensors": strings.Repeat("x", 3000),
		"model-00002-of-00002.safetensors": strings.Repeat("y", 2000),
		"stray.safetensors":                "not in the index",
	}
	i := 0
	for name, content := range files {
		i++
		blob := filepath.Join(repo, "blobs", strings.Repeat("b", 39)+string(rune('0'+i)))
		if name != drop {
			if err := os.WriteFile(blob, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", filepath.Base(blob)), filepath.Join(snap, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(testCommit), 0o644); err != nil {
		t.Fatal(err)
	}
	return cache, snap
}

// serveUntil runs `vllm serve ARGS` until it exits or prints until; it
// returns the output and the exit code (-1 when it was stopped at until).
func serveUntil(t *testing.T, env sim.Env, until string, args ...string) (string, int) {
	t.Helper()
	var out lockedWriter
	out.w = new(strings.Builder)
	env["SIMNODE_HARDWARE"] = golden.Path("hardware", "h200x2.json")
	env["SIMNODE_STATE_DIR"] = t.TempDir()
	for _, k := range []string{"SIMNODE_ENGINE_INIT", "SIMNODE_WEIGHT_LOAD", "SIMNODE_PROFILE_RUN", "SIMNODE_GRAPH_CAPTURE"} {
		env[k] = "1ms"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := &sim.Proc{Args: append([]string{"serve"}, args...), Env: env, Stdout: &out, Stderr: &out, Now: time.Now, Pid: 7}
	code := make(chan int, 1)
	go func() { code <- Main(ctx, p) }()
	for {
		select {
		case c := <-code:
			return out.String(), c
		case <-time.After(20 * time.Millisecond):
			if until != "" && strings.Contains(out.String(), until) {
				cancel()
				<-code
				return out.String(), -1
			}
		}
	}
}

// TestOfflineServe: with HF_HUB_OFFLINE=1 a repository id resolves to its
// snapshot in the cache (refs/main), which the serve loads (its
// architecture from config.json, its shards as the index names them);
// without a snapshot it fails before anything starts with
// huggingface_hub's LocalEntryNotFoundError, as vLLM does.
func TestOfflineServe(t *testing.T) {
	t.Run("no snapshot", func(t *testing.T) {
		out, code := serveUntil(t, sim.Env{"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": t.TempDir()}, "", "org/tiny", "--port", "0")
		want := "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for the specified revision on the local disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, pass 'local_files_only=False' as input."
		if code != 1 || !strings.Contains(out, want) || strings.Contains(out, "Initializing a V1 LLM engine") {
			t.Errorf("exit %d, output:\n%s\nwant %q before the engine", code, out, want)
		}
	})
	t.Run("snapshot loads", func(t *testing.T) {
		cache, snap := writeCache(t, t.TempDir(), "")
		// HF_HOME/hub, as huggingface_hub derives it.
		out, code := serveUntil(t, sim.Env{"HF_HUB_OFFLINE": "1", "HF_HOME": filepath.Dir(cache)}, "Application startup complete", "org/tiny", "--port", "0", "--served-model-name", "tiny")
		for _, want := range []string{
			"HF_HUB_OFFLINE is True, replace model_id [org/tiny] to model_path [" + snap + "]",
			"Resolved architecture: Qwen2ForCausalLM",
			"Starting to load model " + snap + "...",
			"Loading safetensors checkpoint shards: 100% Completed | 2/2",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("exit %d, output lacks %q:\n%s", code, want, out)
			}
		}
	})
	t.Run("a shard missing on the node", func(t *testing.T) {
		cache, snap := writeCache(t, t.TempDir(), "model-00002-of-00002.safetensors")
		out, code := serveUntil(t, sim.Env{"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": cache}, "", "org/tiny", "--port", "0")
		want := "FileNotFoundError: No such file or directory: " + snap + "/model-00002-of-00002.safetensors"
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("exit %d, output lacks %q:\n%s", code, want, out)
		}
	})
}

// TestWeightsError: a worker's load_model on its own node's copy of the
// model path, as vLLM's loader and huggingface_hub fail on it.
func TestWeightsError(t *testing.T) {
	dir := t.TempDir()
	_, snap := writeCache(t, dir, "")
	_, dangling := writeCache(t, filepath.Join(dir, "other"), "model-00001-of-00002.safetensors")
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "hub", "models--org--absent", "snapshots", testCommit)
	tests := []struct {
		name, model, typ, msg string
	}{
		{"complete", snap, "", ""},
		{"not on this node", missing, "huggingface_hub.errors.HFValidationError", "Repo id must be in the form 'repo_name' or 'namespace/repo_name': '" + missing + "'. Use `repo_type` argument if needed."},
		{"no shards", empty, "RuntimeError", "Cannot find any model weights with `" + empty + "`"},
		{"dangling shard", dangling, "FileNotFoundError", "No such file or directory: " + dangling + "/model-00001-of-00002.safetensors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ, msg := weightsError(tt.model)
			if typ != tt.typ || msg != tt.msg {
				t.Errorf("weightsError = %s: %s\nwant %s: %s", typ, msg, tt.typ, tt.msg)
			}
		})
	}
	if got := weightFiles(snap); len(got) != 2 || strings.Contains(strings.Join(got, " "), "stray") {
		t.Errorf("weightFiles = %v, want the index's two shards", got)
	}
}
