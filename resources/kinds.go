package resources

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/model"
)

// Kinds returns the descriptors of the resource block types a
// configuration may declare, in the order the README documents them: the
// schema (arguments as data) and the checks of each kind. Whatever loads a
// configuration passes them in config.Options.Kinds.
func Kinds() []config.Kind {
	return []config.Kind{nodeKind(), networkKind(), clusterKind(), serveKind(), model.Kind()}
}

// kindArgs returns the arguments of block type kind.
func kindArgs(kind string) []config.Arg {
	for _, k := range Kinds() {
		if k.Type == kind {
			return k.Args
		}
	}
	return nil
}

// Patterns of names and sizes Docker accepts.
const (
	envNamePattern       = `^[A-Za-z_][A-Za-z0-9_]*$`
	containerNamePattern = `^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`
	shmSizePattern       = `^[0-9]+(\.[0-9]+)?([bkmgBKMG]|[kmgKMG][bB]|[kmgKMG]i[bB])?$`
)

func matches(pattern, s string) bool {
	return regexp.MustCompile(pattern).MatchString(s)
}

// checkEnv checks environment variable names and rejects the ones rayform
// pins.
func checkEnv(b *config.Block, attr string, env map[string]string) {
	pinned := PinnedEnv()
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !matches(envNamePattern, k) {
			b.Error(attr, "Invalid environment variable name", fmt.Sprintf("%q is not a valid environment variable name: use letters, digits and underscores, not starting with a digit.", k))
			continue
		}
		if from, ok := pinned[k]; ok {
			b.Error(attr, "Environment variable managed by rayform", fmt.Sprintf("%s sets %s, which rayform sets on every node from %s. Remove it from %s; change the network or cluster argument instead.", attr, k, from, attr))
		}
		// The value itself is never quoted: it may be a secret.
		if bad := envValueProblem(env[k]); bad != "" {
			b.Error(attr, "Environment variable value cannot be passed intact",
				fmt.Sprintf("The value of %s[%q] contains %s. Remove it from the value.", attr, k, bad))
		}
	}
}

// envValueProblem names the character that keeps an environment value
// from passing through an env file intact, or "".
func envValueProblem(v string) string {
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
