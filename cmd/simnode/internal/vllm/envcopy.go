package vllm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// workerSpecificEnv are never copied to Ray workers
// (RayDistributedExecutor.WORKER_SPECIFIC_ENV_VARS).
var workerSpecificEnv = map[string]bool{"VLLM_HOST_IP": true, "VLLM_HOST_PORT": true, "LOCAL_RANK": true, "CUDA_VISIBLE_DEVICES": true}

// registeredEnv are entries of vllm.envs.environment_variables that do not
// start with VLLM_ (those are covered by the prefix).
var registeredEnv = []string{"LOCAL_RANK", "CUDA_VISIBLE_DEVICES", "MAX_JOBS", "NVCC_THREADS", "CMAKE_BUILD_TYPE", "VERBOSE", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "S3_ENDPOINT_URL", "K_SCALE_CONSTANT", "V_SCALE_CONSTANT", "Q_SCALE_CONSTANT"}

// configRoot is VLLM_CONFIG_ROOT: $VLLM_CONFIG_ROOT, else
// $XDG_CONFIG_HOME/vllm, else ~/.config/vllm.
func configRoot(env sim.Env) string {
	if v := env.Get("VLLM_CONFIG_ROOT"); v != "" {
		return v
	}
	if v := env.Get("XDG_CONFIG_HOME"); v != "" {
		return filepath.Join(v, "vllm")
	}
	home := env.Get("HOME")
	if home == "" {
		home = "/root"
	}
	return filepath.Join(home, ".config", "vllm")
}

func csvSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			m[t] = true
		}
	}
	return m
}

// envToCopy is vllm/ray/ray_env.py get_env_vars_to_copy: vLLM's registered
// variables, every variable with a copied prefix (VLLM_, LMCACHE_, NCCL_,
// UCX_, HF_, HUGGING_FACE_ plus VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY),
// PYTHONHASHSEED and VLLM_RAY_EXTRA_ENV_VARS_TO_COPY, minus worker-specific
// ones and those listed in $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json.
// It logs what ray_env.py logs and returns the values to send.
func envToCopy(env sim.Env, l *plog) map[string]string {
	file := filepath.Join(configRoot(env), "ray_non_carry_over_env_vars.json")
	nonCarry := map[string]bool{}
	if b, err := os.ReadFile(file); err == nil {
		var names []string
		if json.Unmarshal(b, &names) != nil {
			l.Warn("ray_env.py:27", "Failed to parse %s. Using an empty set for non-carry-over env vars.", file)
		}
		for _, n := range names {
			nonCarry[n] = true
		}
	}
	prefixes := map[string]bool{"VLLM_": true, "LMCACHE_": true, "NCCL_": true, "UCX_": true, "HF_": true, "HUGGING_FACE_": true}
	for p := range csvSet(env.Get("VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY")) {
		prefixes[p] = true
	}
	result := map[string]bool{"PYTHONHASHSEED": true}
	for _, n := range registeredEnv {
		result[n] = true
	}
	for n := range env {
		for p := range prefixes {
			if strings.HasPrefix(n, p) {
				result[n] = true
			}
		}
	}
	for n := range csvSet(env.Get("VLLM_RAY_EXTRA_ENV_VARS_TO_COPY")) {
		result[n] = true
	}
	for n := range workerSpecificEnv {
		delete(result, n)
	}
	for n := range nonCarry {
		delete(result, n)
	}
	sortedKeys := func(m map[string]bool, onlySet bool) []string {
		var out []string
		for k := range m {
			if _, ok := env[k]; ok || !onlySet {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	l.Info("ray_env.py:78", "Env var prefixes to copy: %s", pylog.Repr(sortedKeys(prefixes, false)))
	copied := sortedKeys(result, true)
	l.Info("ray_env.py:79", "Copying the following environment variables to workers: %s", pylog.Repr(copied))
	if len(nonCarry) > 0 {
		l.Info("ray_env.py:85", "RAY_NON_CARRY_OVER_ENV_VARS from config: %s", pyset(sortedKeys(nonCarry, false)))
	}
	l.Info("ray_env.py:89", "To exclude env vars from copying, add them to %s", file)
	out := map[string]string{}
	for _, k := range copied {
		out[k] = env[k]
	}
	return out
}

func pyset(names []string) string {
	r := pylog.Repr(names)
	return "{" + r[1:len(r)-1] + "}"
}
