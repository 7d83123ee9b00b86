// Package flock plays util-linux's flock(1), which the lab image's busybox
// lacks (Debian's busybox-static has no flock applet): rayform's serve
// start script takes an exclusive lock that vllm serve inherits and holds
// for its life, and the probe tests it from the host.
//
// Both forms of util-linux are played, with its options and exit codes:
//
//	flock [options] FD
//	flock [options] FILE|DIRECTORY COMMAND [ARG...]
//	flock [options] FILE|DIRECTORY -c COMMAND
//
// Options: -s/--shared, -x/-e/--exclusive (the default), -u/--unlock,
// -n/--nb/--nonblock, -w/--timeout SECS (-w 0 is -n), -E/--conflict-exit-code
// N, -o/--close, -F/--no-fork, --verbose, -h/--help, -V/--version. A
// conflict under -n or -w exits 1, or N under -E; a usage error 64
// (EX_USAGE); a lock file that cannot be opened 66 (EX_NOINPUT; 71 and 73
// for the errnos util-linux maps there); a failed flock(2) 65 (EX_DATAERR,
// "flock: 9: Bad file descriptor" for a descriptor that is not open); a
// command that cannot be executed 69 (EX_UNAVAILABLE). Otherwise the exit
// status is the command's (128+N when it is killed by signal N), or 0.
//
// As in util-linux the lock file is opened without close-on-exec, so the
// command inherits the locked descriptor (unless -o) and the lock lasts as
// long as any process holding it, and a FILE that does not exist is created.
package flock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// Exit codes of sysexits.h that flock(1) uses.
const (
	exUsage       = 64
	exDataErr     = 65
	exNoInput     = 66
	exUnavailable = 69
	exOSErr       = 71
	exCantCreat   = 73
)

// Version is what -V prints.
const Version = "flock from util-linux 2.39.3 (simnode)"

// pollInterval is how often a lock is retried under -w.
const pollInterval = 5 * time.Millisecond

// exit ends Main with a status; usage adds util-linux's hint.
type exit struct {
	code  int
	usage bool
}

type options struct {
	how      int // syscall.LOCK_SH, LOCK_EX or LOCK_UN
	nonblock bool
	timeout  time.Duration
	hasWait  bool
	conflict int
	close    bool
	noFork   bool
	verbose  bool
}

// Main runs flock(1).
func Main(ctx context.Context, p *sim.Proc) int {
	code, err := run(ctx, p)
	if err != nil {
		var e exit
		if errors.As(err, &e) {
			return e.code
		}
		return 1
	}
	return code
}

func (e exit) Error() string { return "exit " + strconv.Itoa(e.code) }

// warn prints "flock: MSG" on stderr.
func warn(p *sim.Proc, format string, args ...any) {
	fmt.Fprintf(p.Stderr, "flock: "+format+"\n", args...)
}

// usageErr prints msg and util-linux's "Try" hint and exits 64.
func usageErr(p *sim.Proc, format string, args ...any) error {
	warn(p, format, args...)
	fmt.Fprintln(p.Stderr, "Try 'flock --help' for more information.")
	return exit{code: exUsage, usage: true}
}

// strerror is glibc's message for an errno: Go's, capitalised.
func strerror(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return err.Error()
}

var longOpts = []struct {
	name   string
	short  byte
	hasArg bool
}{
	{"shared", 's', false},
	{"exclusive", 'x', false},
	{"unlock", 'u', false},
	{"nonblocking", 'n', false},
	{"nb", 'n', false},
	{"timeout", 'w', true},
	{"wait", 'w', true},
	{"conflict-exit-code", 'E', true},
	{"close", 'o', false},
	{"no-fork", 'F', false},
	{"verbose", 'v', false}, // long only in util-linux; 'v' is internal
	{"help", 'h', false},
	{"version", 'V', false},
}

// parse reads the options as getopt_long("+sexnoFuw:E:hV?") does: they end
// at the first non-option argument or at "--".
func parse(p *sim.Proc, args []string) (options, []string, error) {
	o := options{how: syscall.LOCK_EX, conflict: 1}
	apply := func(c byte, arg string) error {
		switch c {
		case 's':
			o.how = syscall.LOCK_SH
		case 'e', 'x':
			o.how = syscall.LOCK_EX
		case 'u':
			o.how = syscall.LOCK_UN
		case 'o':
			o.close = true
		case 'F':
			o.noFork = true
		case 'n':
			o.nonblock = true
		case 'v':
			o.verbose = true
		case 'w':
			secs, err := strconv.ParseFloat(arg, 64)
			if err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) {
				return usageErrNoHint(p, "invalid timeout value: '%s'", arg)
			}
			o.hasWait, o.timeout = true, time.Duration(secs*float64(time.Second))
		case 'E':
			n, err := strconv.ParseInt(arg, 10, 32)
			if err != nil {
				return usageErrNoHint(p, "invalid exit code: '%s'", arg)
			}
			if n < 0 || n > 255 {
				return usageErrNoHint(p, "exit code out of range (expected 0 to 255)")
			}
			o.conflict = int(n)
		case 'h':
			fmt.Fprint(p.Stdout, usageText)
			return exit{code: 0}
		case 'V':
			fmt.Fprintln(p.Stdout, Version)
			return exit{code: 0}
		}
		return nil
	}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasVal := strings.Cut(a[2:], "=")
			var match []int
			for j, lo := range longOpts {
				if lo.name == name {
					match = []int{j}
					break
				}
				if strings.HasPrefix(lo.name, name) {
					match = append(match, j)
				}
			}
			if len(match) == 0 {
				return o, nil, usageErr(p, "unrecognized option '%s'", a)
			}
			for _, j := range match[1:] {
				if longOpts[j].short != longOpts[match[0]].short {
					return o, nil, usageErr(p, "option '%s' is ambiguous", a)
				}
			}
			lo := longOpts[match[0]]
			switch {
			case lo.hasArg && !hasVal:
				if i+1 >= len(args) {
					return o, nil, usageErr(p, "option '--%s' requires an argument", lo.name)
				}
				i++
				val = args[i]
			case !lo.hasArg && hasVal:
				return o, nil, usageErr(p, "option '--%s' doesn't allow an argument", lo.name)
			}
			if err := apply(lo.short, val); err != nil {
				return o, nil, err
			}
			continue
		}
		for k := 1; k < len(a); k++ {
			c := a[k]
			switch c {
			case 's', 'e', 'x', 'n', 'o', 'F', 'u', 'h', 'V':
				if err := apply(c, ""); err != nil {
					return o, nil, err
				}
			case 'w', 'E':
				val := a[k+1:]
				if val == "" {
					if i+1 >= len(args) {
						return o, nil, usageErr(p, "option requires an argument -- '%c'", c)
					}
					i++
					val = args[i]
				}
				if err := apply(c, val); err != nil {
					return o, nil, err
				}
				k = len(a)
			default:
				return o, nil, usageErr(p, "invalid option -- '%c'", c)
			}
		}
	}
	return o, args[i:], nil
}

// usageErrNoHint is an EX_USAGE error without the "Try" hint (errx).
func usageErrNoHint(p *sim.Proc, format string, args ...any) error {
	warn(p, format, args...)
	return exit{code: exUsage}
}

func run(ctx context.Context, p *sim.Proc) (int, error) {
	if len(p.Args) < 1 {
		return 0, usageErr(p, "not enough arguments")
	}
	o, rest, err := parse(p, p.Args)
	if err != nil {
		return 0, err
	}
	if o.noFork && o.close {
		return 0, usageErrNoHint(p, "the --no-fork and --close options are incompatible")
	}
	var (
		fd       int
		filename string
		cmdArgv  []string
	)
	switch {
	case len(rest) > 1:
		if rest[1] == "-c" || rest[1] == "--command" {
			if len(rest) != 3 {
				return 0, usageErrNoHint(p, "%s requires exactly one command argument", rest[1])
			}
			sh := p.Env.Get("SHELL")
			if sh == "" {
				sh = "/bin/sh"
			}
			cmdArgv = []string{sh, "-c", rest[2]}
		} else {
			cmdArgv = rest[1:]
		}
		filename = rest[0]
		fd, err = openFile(p, filename)
		if err != nil {
			return 0, err
		}
		defer syscall.Close(fd)
	case len(rest) == 1:
		n, err := strconv.ParseInt(rest[0], 10, 32)
		if err != nil {
			return 0, usageErrNoHint(p, "bad file descriptor: '%s'", rest[0])
		}
		fd = int(n)
	default:
		return 0, usageErrNoHint(p, "requires file descriptor, file or directory")
	}

	start := time.Now()
	nonblock := o.nonblock || o.hasWait && o.timeout == 0
	var deadline time.Time
	if o.hasWait && o.timeout > 0 {
		deadline = start.Add(o.timeout)
	}
	for {
		flags := o.how
		if nonblock || !deadline.IsZero() {
			flags |= syscall.LOCK_NB
		}
		err := syscall.Flock(fd, flags)
		if err == nil {
			break
		}
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EACCES):
			if !deadline.IsZero() && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return 0, exit{code: o.conflict}
				case <-time.After(min(pollInterval, time.Until(deadline))):
				}
				continue
			}
			if o.verbose {
				if deadline.IsZero() {
					warn(p, "failed to get lock")
				} else {
					warn(p, "timeout while waiting to get lock")
				}
			}
			return 0, exit{code: o.conflict}
		}
		who := filename
		if who == "" {
			who = strconv.Itoa(fd)
		}
		warn(p, "%s: %s", who, strerror(err))
		if errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.ENOMEM) {
			return 0, exit{code: exOSErr}
		}
		return 0, exit{code: exDataErr}
	}
	if o.verbose {
		d := time.Since(start)
		fmt.Fprintf(p.Stdout, "flock: getting lock took %d.%06d seconds\n", int64(d/time.Second), int64(d%time.Second/time.Microsecond))
	}
	if cmdArgv == nil {
		return 0, nil
	}
	if o.verbose {
		fmt.Fprintf(p.Stdout, "flock: executing %s\n", cmdArgv[0])
	}
	return runCommand(p, fd, o, cmdArgv)
}

// openFile opens the lock file as util-linux does: read-only, created
// (0666 less the umask) when missing, a directory read-only, and, unlike
// Go's own opens, without close-on-exec so the command inherits it.
func openFile(p *sim.Proc, name string) (int, error) {
	fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_NOCTTY|syscall.O_CREAT, 0o666)
	if errors.Is(err, syscall.EISDIR) {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_NOCTTY, 0)
	}
	if err != nil {
		warn(p, "cannot open lock file %s: %s", name, strerror(err))
		switch {
		case errors.Is(err, syscall.ENOMEM), errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
			return -1, exit{code: exOSErr}
		case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOSPC):
			return -1, exit{code: exCantCreat}
		}
		return -1, exit{code: exNoInput}
	}
	return fd, nil
}

// runCommand runs the command holding the lock: forked and waited for
// (its status is flock's), or, under -F, in flock's place.
func runCommand(p *sim.Proc, fd int, o options, argv []string) (int, error) {
	env := p.Env.List()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		warn(p, "failed to execute %s: %s", argv[0], strerror(lookErrno(err)))
		return 0, exit{code: exUnavailable}
	}
	if o.noFork {
		err := syscall.Exec(path, argv, env)
		warn(p, "failed to execute %s: %s", argv[0], strerror(err))
		if errors.Is(err, syscall.ENOMEM) {
			return 0, exit{code: exOSErr}
		}
		return 0, exit{code: exUnavailable}
	}
	if o.close {
		syscall.CloseOnExec(fd)
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: p.Stdin, Stdout: p.Stdout, Stderr: p.Stderr}
	if err := cmd.Start(); err != nil {
		warn(p, "failed to execute %s: %s", argv[0], strerror(err))
		return 0, exit{code: exUnavailable}
	}
	err = cmd.Wait()
	st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && st.Signaled():
		return 128 + int(st.Signal()), nil
	case ok && st.Exited():
		return st.ExitStatus(), nil
	case err != nil:
		warn(p, "waitpid failed: %v", err)
		return 1, nil
	}
	return exOSErr, nil
}

// lookErrno is the errno behind exec.LookPath's error (ENOENT when the
// command is not on PATH, as execvp reports it).
func lookErrno(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.ENOENT
}

const usageText = `
Usage:
 flock [options] <file>|<directory> <command> [<argument>...]
 flock [options] <file>|<directory> -c <command>
 flock [options] <file descriptor number>

Manage file locks from shell scripts.

Options:
 -s, --shared             get a shared lock
 -x, --exclusive          get an exclusive lock (default)
 -u, --unlock             remove a lock
 -n, --nonblock           fail rather than wait
 -w, --timeout <secs>     wait for a limited amount of time
 -E, --conflict-exit-code <number>  exit code after conflict or timeout
 -o, --close              close file descriptor before running command
 -c, --command <command>  run a single command string through the shell
 -F, --no-fork            execute command without forking
     --verbose            increase verbosity

 -h, --help               display this help
 -V, --version            display version

For more details see flock(1).
`
