package vllm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// Where vLLM finds the weights (read in the vllm 0.17.1 wheel from PyPI).
// `vllm serve ORG/NAME` with HF_HUB_OFFLINE set replaces the repository id
// by its snapshot in the Hugging Face cache before anything else
// (EngineArgs.__post_init__, vllm/engine/arg_utils.py:636-644, calls
// get_model_path, vllm/transformers_utils/repo_utils.py:204, which calls
// huggingface_hub's snapshot_download(repo_id, revision=...,
// local_files_only=True)); every worker then loads the safetensors shards
// from that directory on its own node (DefaultModelLoader._prepare_weights,
// vllm/model_executor/model_loader/default_loader.py:96 is_local, :178-181
// the RuntimeError; a path that is not a directory goes to
// weight_utils.py's download_weights_from_hf, whose snapshot_download
// refuses it as a repo id). The stand-in
// does the same lookups on the container's filesystem, so a node without
// the files fails as vLLM does there, with its error text. Without
// HF_HUB_OFFLINE a repository that is not in the cache is not downloaded
// (the lab's nodes cannot reach huggingface.co): the weights are
// simulated, as before.

// hubCacheDir is huggingface_hub 0.36's HF_HUB_CACHE (constants.py):
// $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, where
// HF_HOME defaults to $XDG_CACHE_HOME/huggingface and XDG_CACHE_HOME to
// ~/.cache.
func hubCacheDir(env sim.Env) string {
	for _, k := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if v := env.Get(k); v != "" {
			return v
		}
	}
	home := env.Get("HF_HOME")
	if home == "" {
		xdg := env.Get("XDG_CACHE_HOME")
		if xdg == "" {
			h := env.Get("HOME")
			if h == "" {
				h = "/root"
			}
			xdg = filepath.Join(h, ".cache")
		}
		home = filepath.Join(xdg, "huggingface")
	}
	return filepath.Join(home, "hub")
}

// hubOffline is huggingface_hub 0.36's constants.HF_HUB_OFFLINE:
// _is_true(HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE), true for 1, ON, YES,
// TRUE in any case.
func hubOffline(env sim.Env) bool {
	v := env.Get("HF_HUB_OFFLINE")
	if v == "" {
		v = env.Get("TRANSFORMERS_OFFLINE")
	}
	switch strings.ToUpper(v) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// errNoSnapshot is huggingface_hub 0.36's LocalEntryNotFoundError from
// snapshot_download with local_files_only=True when the revision has no
// snapshot folder in the cache (_snapshot_download.py, lines 229-234).
const errNoSnapshot = "Cannot find an appropriate cached snapshot folder for the specified revision on the local disk and " +
	"outgoing traffic has been disabled. To enable repo look-ups and downloads online, pass 'local_files_only=False' as input."

var commitHashRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// snapshotDir is what snapshot_download(repo, revision=rev,
// local_files_only=True) returns from the cache: the snapshot folder of
// the revision's commit (rev itself when it is a commit hash, else the
// content of refs/REV), if that folder exists; "" otherwise. Like
// huggingface_hub it does not check the files inside.
func snapshotDir(cache, repo, rev string) string {
	if rev == "" {
		rev = "main"
	}
	dir := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	commit := ""
	if commitHashRE.MatchString(rev) {
		commit = rev
	} else if b, err := os.ReadFile(filepath.Join(dir, "refs", rev)); err == nil {
		commit = string(b)
	}
	if commit == "" {
		return ""
	}
	snap := filepath.Join(dir, "snapshots", commit)
	if _, err := os.Stat(snap); err != nil {
		return ""
	}
	return snap
}

// localModel is what the stand-in reads of a model directory: the
// architecture config.json names, and the safetensors shards the loader
// would load, with their total size.
type localModel struct {
	Architecture string
	Shards       []string
	Bytes        int64
}

// readLocalModel reads dir's config.json (for its architectures; none is
// not an error here) and its shards' sizes.
func readLocalModel(dir string) localModel {
	var lm localModel
	if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
		var c struct {
			Architectures []string `json:"architectures"`
		}
		if json.Unmarshal(b, &c) == nil && len(c.Architectures) > 0 {
			lm.Architecture = c.Architectures[0]
		}
	}
	lm.Shards = weightFiles(dir)
	for _, f := range lm.Shards {
		if st, err := os.Stat(f); err == nil {
			lm.Bytes += st.Size()
		}
	}
	return lm
}

// weightFiles is the loader's list of safetensors files in dir: what
// glob.glob(dir/*.safetensors) matches (dangling links too), less those
// the index (model.safetensors.index.json), when there is one, does not
// name (vLLM's filter_duplicate_safetensors_files), sorted.
func weightFiles(dir string) []string {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if b, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json")); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if json.Unmarshal(b, &idx) == nil {
			named := map[string]bool{}
			for _, f := range idx.WeightMap {
				named[filepath.Join(dir, f)] = true
			}
			matches = slices.DeleteFunc(matches, func(f string) bool { return !named[f] })
		}
	}
	slices.Sort(matches)
	return matches
}

// weightsError is the exception a worker's load_model raises for the
// model path on its own node, or "" when every shard opens: a directory
// that is not there is not local, so vLLM asks huggingface_hub for it as
// a repository id (validate_repo_id, huggingface_hub 0.36
// utils/_validators.py); a directory without shards is
// default_loader.py's RuntimeError; a shard that does not open (a link to
// a missing blob) is safetensors' FileNotFoundError from safe_open (the
// text safetensors 0.6.2 from PyPI prints, the path unquoted; older
// releases quoted it). The HFValidationError and huggingface_hub's
// LocalEntryNotFoundError texts are what huggingface_hub 0.36.0 printed
// for the same calls.
func weightsError(model string) (typ, msg string) {
	if st, err := os.Stat(model); err != nil || !st.IsDir() {
		return "huggingface_hub.errors.HFValidationError", fmt.Sprintf("Repo id must be in the form 'repo_name' or 'namespace/repo_name': '%s'. Use `repo_type` argument if needed.", model)
	}
	files := weightFiles(model)
	if len(files) == 0 {
		return "RuntimeError", fmt.Sprintf("Cannot find any model weights with `%s`", model)
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return "FileNotFoundError", "No such file or directory: " + f
		}
		fh.Close()
	}
	return "", ""
}
