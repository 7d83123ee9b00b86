package hostplan

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/network"
)

// envNamePattern is the names docker and the shell accept for an
// environment variable.
const envNamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`

// PinnedEnv lists the environment variables rayform sets in every Ray
// container (the network's pins, network.Pins, and
// RAY_memory_monitor_refresh_ms), with the argument that controls each:
// env, docker_args and extra_args must not set them.
func PinnedEnv() map[string]string {
	out := network.Pins()
	out["RAY_memory_monitor_refresh_ms"] = "the Ray cluster's memory_monitor"
	return out
}

// Matches reports whether s matches pattern.
func Matches(pattern, s string) bool {
	return regexp.MustCompile(pattern).MatchString(s)
}

// CheckEnv checks environment variable names and rejects the ones rayform
// pins.
func CheckEnv(b *config.Block, attr string, env map[string]string) {
	pinned := PinnedEnv()
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !Matches(envNamePattern, k) {
			b.Error(attr, "Invalid environment variable name", fmt.Sprintf("%q is not a valid environment variable name: use letters, digits and underscores, not starting with a digit.", k))
			continue
		}
		if from, ok := pinned[k]; ok {
			b.Error(attr, "Environment variable managed by rayform", fmt.Sprintf("%s sets %s, which rayform sets on every node from %s. Remove it from %s; change the network or cluster argument instead.", attr, k, from, attr))
		}
		// The value itself is never quoted: it may be a secret.
		if bad := EnvValueProblem(env[k]); bad != "" {
			b.Error(attr, "Environment variable value cannot be passed intact",
				fmt.Sprintf("The value of %s[%q] contains %s. Remove it from the value.", attr, k, bad))
		}
	}
}

// EnvValueProblem names the character that keeps an environment value
// from passing through an env file intact, or "".
func EnvValueProblem(v string) string {
	switch {
	case strings.Contains(v, "\n"):
		return "a newline: an environment file (docker's --env-file, systemd's EnvironmentFile) ends a value at the end of its line, so wherever the value is written to one the rest arrives as other variables (\"x\\nLD_PRELOAD=/x.so\" sets LD_PRELOAD)"
	case strings.Contains(v, "\r"):
		return "a carriage return: environment files and shells read it differently, so the value that arrives would not be the one planned"
	case strings.Contains(v, "\x00"):
		return "a NUL byte, which ends a string in a process's environment: the value would arrive cut short"
	}
	return ""
}
