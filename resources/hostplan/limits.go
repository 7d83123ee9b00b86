package hostplan

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// What a host's kernel and rayform's transport take, and the checks that
// keep a value they cannot take from reaching apply: validate refuses it
// (with file:line), and apply re-checks the exact command lines before it
// changes anything (CheckCommandLimits).
//
// Linux's execve(2) limits every argument and environment string to
// MAX_ARG_STRLEN, 32 pages (131072 bytes with 4 KiB pages) including its
// terminating NUL, and all of them together to ARG_MAX (a quarter of the
// stack limit, 2 MiB by default); a NUL ends a C string, so a value with one
// arrives cut short (Go's os/exec refuses it: "invalid argument"). rayform's
// SSH transport hands each command line to the remote shell as one string
// (the wrapper's $1, quoted once more in the exec request), so a whole
// command line — every value that goes in argv, with rayform's own
// arguments — must fit in one MAX_ARG_STRLEN.
const (
	// MaxArgStrlen is Linux's MAX_ARG_STRLEN: one argument or environment
	// string, its terminating NUL included.
	MaxArgStrlen = 32 * 4096
	// transportRoom is what the SSH transport adds around a command line:
	// the wrapper script and the terminator (engine/transport/ssh).
	transportRoom = 1024
	// ownArgsRoom is kept, of one command line, for rayform's own
	// arguments (labels, pinned environment, the serve's start script and
	// record): the values of one block may use the rest.
	ownArgsRoom = 16 * 1024
	// blockArgBudget is what validate lets one block's argv-bound values
	// take of a command line (ArgCost).
	blockArgBudget = MaxArgStrlen - 1 - transportRoom - ownArgsRoom
)

// ArgCost is what value takes of the command line that starts its block.
// It arrives there twice: as an argument, quoted depth times (a
// ray_cluster's docker run: its argv quoted, then the line quoted by the
// transport; a serve's start script is one level more), and in the
// resource's record of its attributes, JSON, which a container carries as
// a base64 label (inScript false) and a serve writes from its start script
// (inScript true, quoted as deep).
func ArgCost(value string, depth int, inScript bool) int {
	quote := func(s string) int {
		for range depth {
			s = shell.Quote(s)
		}
		return len(s) + 1
	}
	j, _ := json.Marshal(value)
	if inScript {
		return quote(value) + quote(string(j))
	}
	return quote(value) + base64.RawURLEncoding.EncodedLen(len(j))
}

// ArgValue is one value a block sends in argv or in the environment of
// the command that starts it.
type ArgValue struct {
	Attr  string // the argument it is in, for the diagnostic
	What  string // how the diagnostic names it, e.g. `env["HF_TOKEN"]`
	Value string // as execve receives it (an env entry: NAME=VALUE)
	// Secret values travel in the environment (on the transport's stdin),
	// not in the command line.
	Secret bool
	// Env entries' NUL, newline and carriage return are CheckEnv's.
	Env bool
}

// CheckArgLimits refuses, at their arguments, values no host can take: a
// NUL byte, one string over MAX_ARG_STRLEN, and values together longer
// than a command line can carry. The value itself is never shown: it may
// be a secret.
func CheckArgLimits(b *config.Block, vals []ArgValue, depth int, inRecord bool) {
	total := 0
	for _, v := range vals {
		if b.Decl().IsUnknown(v.What) {
			continue
		}
		i := strings.IndexByte(v.Value, 0)
		if i >= 0 && !v.Env {
			b.Error(v.Attr, "Value with a NUL byte",
				fmt.Sprintf("%s contains a NUL byte (at byte %d). A NUL ends a string on the host's command line and in a process's environment, so the value cannot arrive intact: remove it.", v.What, i))
			continue
		}
		if i >= 0 {
			continue
		}
		if len(v.Value) >= MaxArgStrlen {
			b.Error(v.Attr, "Value too long for a command line",
				fmt.Sprintf("%s is %d bytes; Linux takes at most %d bytes (MAX_ARG_STRLEN, the NUL included) in one argument or environment string, so the host would refuse the command (\"Argument list too long\"). Pass a large value as a file instead (a volume, or a path in the image).", v.What, len(v.Value), MaxArgStrlen-1))
			continue
		}
		if !v.Secret {
			total += ArgCost(v.Value, depth, inRecord)
		}
	}
	if total > blockArgBudget {
		// Reported at the largest value's argument.
		attr, largest := "", -1
		for _, v := range vals {
			if !v.Secret && len(v.Value) > largest {
				attr, largest = v.Attr, len(v.Value)
			}
		}
		b.Error(attr, "Values too long for a command line",
			fmt.Sprintf("The arguments and environment values of this block take %d bytes on the command line that starts it, quoted; with rayform's own arguments that exceeds what Linux takes in the one string the SSH command line travels in (MAX_ARG_STRLEN, %d bytes), so the host would refuse it (\"Argument list too long\"). Keep them under %d bytes: pass large values as files (a volume, or a path in the image).", total, MaxArgStrlen, blockArgBudget))
	}
}

// EnvValues lists env's entries (attr "env") as argValues.
func EnvValues(b *config.Block, attr string, env map[string]string) []ArgValue {
	var out []ArgValue
	for _, k := range slices.Sorted(maps.Keys(env)) {
		what := fmt.Sprintf("%s[%q]", attr, k)
		out = append(out, ArgValue{Attr: attr, What: what, Value: k + "=" + env[k], Secret: b.Decl().IsSensitive(what), Env: true})
	}
	return out
}

// ListValues lists a list argument's items as argValues.
func ListValues(b *config.Block, attr string, items []string) []ArgValue {
	var out []ArgValue
	for i, v := range items {
		what := fmt.Sprintf("%s[%d]", attr, i)
		out = append(out, ArgValue{Attr: attr, What: what, Value: v, Secret: b.Decl().IsSensitive(what)})
	}
	return out
}

// CheckCommandLimits refuses, before apply changes anything, a command of
// w's that no host would run: an argument or environment string with a
// NUL byte or over MAX_ARG_STRLEN, a command line longer than the SSH
// transport can hand to the remote shell, or arguments and environment
// together over what execve takes (ARG_MAX). It checks the exact commands
// the steps will run (each container's docker run, the serve's docker
// exec) against the limits of the host each runs on (limits, from the
// host's facts; a host that did not report them is taken at Linux's
// defaults). Plan calls it, and apply's prepare again, before anything
// is stopped.
func CheckCommandLimits(w *kind.Work, project string, limits func(node string) observe.Exec) error {
	c, ok := w.Do.(Commander)
	if !ok {
		return nil
	}
	for _, nc := range c.Commands(project) {
		lim := observe.Exec{}
		if limits != nil {
			lim = limits(nc.Node)
		}
		if err := CommandFits(nc.Cmd, lim); err != nil {
			return fmt.Errorf("%s: the command %s cannot run: %w", w.Address, nc.Name, err)
		}
	}
	return nil
}

// Commander is implemented by a Work's Do that starts processes with
// values from the configuration: the commands the steps will run, for
// CheckCommandLimits.
type Commander interface {
	Commands(project string) []NamedCmd
}

// NamedCmd is a command, the node it runs on, and how an error names it
// ("docker run NAME on NODE").
type NamedCmd struct {
	Name string
	Node string
	Cmd  transport.Cmd
}

// Linux's defaults, for a host that did not report its limits: 4 KiB
// pages, an 8 MiB stack, and room for a login session's environment.
const (
	defaultPageSize = 4096
	defaultStackKiB = 8192
	// sessionEnvRoom is taken for the SSH session's own environment when
	// the host did not report its size.
	sessionEnvRoom = 4096
	// filenameRoom is the path execve is given for a tool found on PATH
	// (/usr/bin/docker), with its NUL.
	filenameRoom = 256
	// ptrSize is the size of one argv or envp pointer on a 64-bit host.
	ptrSize = 8
)

// CommandFits checks one command against the limits of the host it runs
// on (lim; zero fields take Linux's defaults). The transport execs it
// twice on the host, both with the session's environment and the
// command's Env exported: /bin/sh -c LINE (LINE the quoted argv), then
// the command's own argv; each must fit in ARG_MAX, strings (each with its
// NUL) and pointers together.
func CommandFits(c transport.Cmd, lim observe.Exec) error {
	if lim.PageSize <= 0 {
		lim.PageSize = defaultPageSize
	}
	if lim.StackKiB == 0 {
		lim.StackKiB = defaultStackKiB
	}
	envBytes, envCount := lim.EnvBytes, lim.EnvCount
	if envBytes == 0 {
		envBytes, envCount = sessionEnvRoom, 64
	}
	maxStr := lim.MaxArgStrlen()
	if err := c.Validate(); err != nil {
		return err
	}
	for _, a := range c.Argv {
		if len(a) >= maxStr {
			return fmt.Errorf("an argument is %d bytes, more than the host's MAX_ARG_STRLEN (%d, the NUL included)", len(a), maxStr)
		}
	}
	for _, k := range c.EnvKeys() {
		n := len(k) + 1 + len(c.Env[k])
		if n >= maxStr {
			return fmt.Errorf("the environment variable %s is %d bytes, more than the host's MAX_ARG_STRLEN (%d, the NUL included)", k, n, maxStr)
		}
		envBytes += n + 1
		envCount++
	}
	line := c.String()
	if n := len(shell.Quote(line)) + transportRoom; n >= maxStr {
		return fmt.Errorf("its command line is %d bytes as the SSH transport sends it, more than the host's MAX_ARG_STRLEN (%d, the NUL included) for the one string it travels in (\"Argument list too long\")", n, maxStr)
	}
	argBytes := 0
	for _, a := range c.Argv {
		argBytes += len(a) + 1
	}
	argc := len(c.Argv)
	if c.Script != "" {
		argBytes, argc = 0, 0
	}
	shBytes := len("/bin/sh") + 1 + len("/bin/sh") + 1 + len("-c") + 1 + len(line) + 1
	need := max(shBytes+3*ptrSize, filenameRoom+argBytes+argc*ptrSize) + envBytes + envCount*ptrSize
	if limit := lim.ArgMax(); need > limit {
		return fmt.Errorf("its arguments and environment take %d bytes where the host's kernel takes %d (ARG_MAX: a quarter of the %s stack limit), so the host would refuse it (\"Argument list too long\"); pass large values as files (a volume, or a path in the image)", need, limit, stackText(lim.StackKiB))
	}
	return nil
}

// stackText names a stack limit in KiB for a message.
func stackText(kib int64) string {
	if kib < 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%d KiB", kib)
}

// ExecLimits returns the execve limits each node reported (observe.Exec),
// the zero value (Linux's defaults) for a node that did not.
func ExecLimits(facts *observe.Facts) func(node string) observe.Exec {
	return func(node string) observe.Exec {
		if facts == nil {
			return observe.Exec{}
		}
		if h := facts.Hosts[node]; h != nil && h.Exec.Known() {
			return h.Exec
		}
		return observe.Exec{}
	}
}

// CheckCommands is kind.KindWithCommandCheck's answer for a kind whose
// work's Do is a Commander: CheckCommandLimits against the hosts' limits.
func CheckCommands(req kind.CommandCheckRequest) error {
	return CheckCommandLimits(req.Work, req.Project, ExecLimits(req.Facts))
}
