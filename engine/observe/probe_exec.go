package observe

import (
	"strconv"
	"strings"
)

// The exec section: what the host's kernel lets one command take in
// arguments and environment (execve(2)), and what the SSH session's own
// environment already takes of it, so that a command that could never
// start is refused before apply changes anything.

const secExec = "exec"

// rf_exec (hostHelpers) prints the stack limit (`ulimit -s`, KiB or
// "unlimited"), the page size, and the size of the environment every
// command of the session inherits: its bytes as execve counts them
// (NAME=VALUE and a NUL each) and its number of entries (a pointer each).
// Nothing of the environment itself leaves the host.

// Exec is what one command may take of the host's execve limits.
type Exec struct {
	// PageSize is the kernel's page size in bytes.
	PageSize int `json:"page_size,omitempty"`
	// StackKiB is the stack limit (RLIMIT_STACK) in KiB; -1 when
	// unlimited.
	StackKiB int64 `json:"stack_kib,omitempty"`
	// EnvBytes and EnvCount are the session's inherited environment: its
	// strings' bytes (each with its NUL) and their number.
	EnvBytes int    `json:"env_bytes,omitempty"`
	EnvCount int    `json:"env_count,omitempty"`
	Err      string `json:"err,omitempty"`
}

// Known reports whether the section gave the limits.
func (e Exec) Known() bool { return e.Err == "" && e.PageSize > 0 && e.StackKiB != 0 }

// The kernel's constants behind the limits (include/uapi/linux/limits.h,
// include/uapi/linux/resource.h, fs/exec.c).
const (
	// kernelArgMax is ARG_MAX: the least the strings may take, whatever
	// the stack limit.
	kernelArgMax = 128 * 1024
	// stkLim is _STK_LIM, of which at most 3/4 go to the strings.
	stkLim = 8 * 1024 * 1024
)

// MaxArgStrlen is MAX_ARG_STRLEN: one argument or environment string, its
// NUL included (32 pages).
func (e Exec) MaxArgStrlen() int { return 32 * e.PageSize }

// ArgMax is what execve lets all of a command's argument and environment
// strings (each with its NUL) and their pointers take together: a quarter
// of the stack limit, at most 3/4 of _STK_LIM, at least ARG_MAX
// (fs/exec.c, bprm_stack_limits).
func (e Exec) ArgMax() int {
	limit := int64(stkLim / 4 * 3)
	if e.StackKiB > 0 {
		limit = min(limit, e.StackKiB*1024/4)
	}
	return int(max(limit, kernelArgMax))
}

func parseExec(s *section) Exec {
	var e Exec
	if s.skipped != "" {
		return Exec{Err: s.skipped}
	}
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		k, v, _ := strings.Cut(line, "=")
		v = strings.TrimSpace(v)
		switch k {
		case "stack":
			if v == "unlimited" {
				e.StackKiB = -1
			} else if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				e.StackKiB = n
			}
		case "pagesize":
			e.PageSize, _ = strconv.Atoi(v)
		case "env_bytes":
			// The command substitution dropped the last newline: one NUL
			// more for the last entry.
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				e.EnvBytes = n + 1
			}
		case "env_count":
			e.EnvCount, _ = strconv.Atoi(v)
		}
	}
	if !e.Known() {
		e.Err = "the stack limit or page size was not reported"
		if msg := strings.TrimSpace(string(s.stderr)); msg != "" {
			e.Err += ": " + msg
		}
	}
	return e
}
