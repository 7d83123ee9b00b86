package resources

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/kind"
	"github.com/rayform/rayform/resources/model"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/node"
)

// Kinds returns the resource kinds rayform knows, in the order they are
// planned and the README documents them. Each is reached only through
// the kind.Kind interface: registering a kind is one line here.
func Kinds() []kind.Kind {
	return []kind.Kind{node.Kind{}, network.Kind{}, clusterKind{}, serveKind{}, model.Kind{}}
}

// Schemas returns the descriptors of the registered kinds (their schema
// and checks): whatever loads a configuration passes them in
// config.Options.Kinds.
func Schemas() []config.Kind {
	var out []config.Kind
	for _, k := range Kinds() {
		out = append(out, k.Schema())
	}
	return out
}

// KindOf returns the registered kind of block type typ, nil when none.
func KindOf(typ string) kind.Kind {
	for _, k := range Kinds() {
		if k.Schema().Type == typ {
			return k
		}
	}
	return nil
}

// KindAt returns the registered kind of the resource at addr, nil when
// none.
func KindAt(addr string) kind.Kind {
	return KindOf(plan.ParseAddress(addr).Type)
}

// kindArgs returns the arguments of block type typ.
func kindArgs(typ string) []config.Arg {
	if k := KindOf(typ); k != nil {
		return k.Schema().Args
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

// TypesWith returns the block types of the registered kinds whose traits
// satisfy has, in registration order (for messages: "a ray_cluster or
// vllm_serve").
func TypesWith(has func(kind.Traits) bool) []string {
	var out []string
	for _, k := range Kinds() {
		if has(k.Traits()) {
			out = append(out, k.Schema().Type)
		}
	}
	return out
}
