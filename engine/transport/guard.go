package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
)

// ErrFenced is wrapped by the error of a command that the host refused
// because a fence it was sent under has moved on: another run took the lock
// since.
var ErrFenced = errors.New("fenced off on the host")

// ExitFenced is the exit status of a fenced command that the host refused.
const ExitFenced = 113

// FencedName is the name ($0) of the shell running a fenced command: what
// tells a fenced script in a host's process list (engine/lock ends those
// of an earlier generation).
const FencedName = "rayform-fenced"

// fencedMark starts the message a refused command writes on stderr.
const fencedMark = "rayform: fenced off:"

// FenceDir is the directory holding the fence files on a host, relative to
// the SSH user's home (the lock directory).
const FenceDir = ".rayform/locks"

// maxFences is how many fences one command can be checked against: each
// holds a file descriptor of the POSIX shell (3 to 9).
const maxFences = 7

// Fence is a lock's generation on one host: the fence file
// ~/.rayform/locks/File on the host holds Gen while the run that advanced it
// to Gen holds the lock (see engine/lock.AdvanceFence).
type Fence struct {
	// Lock names the lock, for messages.
	Lock string
	// File is the fence file's name in FenceDir: one path segment.
	File string
	Gen  uint64
}

// Guard wraps conn so that every command marked Mutating and every Upload
// first calls check, and fails without reaching the host when check returns
// an error (apply uses it to prove it still holds the cluster locks before
// each change). Everything else passes through.
//
// With fences, the host checks them too, atomically with the change: the
// command runs under a shared flock of each fence file, and only if each
// still holds its generation; a lock's new holder advances the generation
// under an exclusive flock before it acts. A command of a run that lost the
// lock, delayed on the way (a partition that healed, a client stopped and
// resumed), thus fails on the host with ExitFenced and an error wrapping
// ErrFenced, instead of changing what the new holder now owns. The shared
// flock is held until the command itself ends (not what it starts: `docker
// run -d` and `docker exec -d` return once their process started), and no
// child of the command inherits it.
func Guard(conn Conn, check func() error, fences ...Fence) Conn {
	return guardConn{conn: conn, check: check, fences: fences}
}

type guardConn struct {
	conn   Conn
	check  func() error
	fences []Fence
}

var _ Conn = guardConn{}

func (g guardConn) Host() string { return g.conn.Host() }

func (g guardConn) Run(ctx context.Context, cmd Cmd) (Result, error) {
	if !cmd.Mutating {
		return g.conn.Run(ctx, cmd)
	}
	if err := g.check(); err != nil {
		return Result{}, fmt.Errorf("%s: not running %q: %w", g.conn.Host(), shorten(cmd.String()), err)
	}
	if len(g.fences) == 0 {
		return g.conn.Run(ctx, cmd)
	}
	script, err := FencedScript(g.fences, cmd.String())
	if err != nil {
		return Result{}, fmt.Errorf("%s: not running %q: %w", g.conn.Host(), shorten(cmd.String()), err)
	}
	fenced := cmd
	fenced.Argv, fenced.Script = nil, script
	res, err := g.conn.Run(ctx, fenced)
	// Errors name the command, not the script around it.
	var ee *ExitError
	if errors.As(err, &ee) {
		named := *ee
		named.Cmd = cmd.String()
		err = &named
	}
	if err != nil && res.ExitCode == ExitFenced && strings.Contains(string(res.Stderr), fencedMark) {
		return res, fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return res, err
}

func (g guardConn) Upload(ctx context.Context, p string, data []byte, mode uint32) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("%s: not uploading %s: %w", g.conn.Host(), p, err)
	}
	if len(g.fences) == 0 {
		return g.conn.Upload(ctx, p, data, mode)
	}
	// The fenced upload writes a temporary file next to the target and
	// renames it, as every transport's Upload does.
	_, err := g.Run(ctx, Cmd{
		Script:   "sh -c " + shell.Quote(uploadScript) + " rayform-upload " + shell.Join([]string{p, strconv.FormatUint(uint64(mode), 8)}),
		Stdin:    bytes.NewReader(data),
		Mutating: true,
	})
	if err != nil {
		return fmt.Errorf("%s: uploading %s: %w", g.conn.Host(), p, err)
	}
	return nil
}

// uploadScript writes its stdin to $1 atomically with mode $2 (octal).
const uploadScript = `t=$(mktemp "$(dirname "$1")/.rayform-upload.XXXXXX") || exit 1
cat > "$t" && chmod "$2" "$t" && mv -f "$t" "$1" || { rm -f "$t"; exit 1; }`

func (g guardConn) Stats() Stats { return g.conn.Stats() }

func (g guardConn) Close() error { return g.conn.Close() }

// FencedScript returns the shell script that runs line (a command as
// Cmd.String renders it) on the host only while every fence holds its
// generation, holding a shared flock of each fence file until line ends.
// line runs in a shell of its own without the lock's descriptors, so
// nothing it starts keeps the fences locked.
func FencedScript(fences []Fence, line string) (string, error) {
	if len(fences) > maxFences {
		return "", fmt.Errorf("a command can be fenced by at most %d locks on one host, not %d", maxFences, len(fences))
	}
	var b strings.Builder
	// The command's first line comes first, as a comment: what a log or
	// an error shows of the script (its start) is the command.
	first, _, _ := strings.Cut(line, "\n")
	b.WriteString("# " + first + "\n")
	b.WriteString("d=\"$HOME/\"" + shell.Quote(FenceDir) + "\n")
	closeFDs := ""
	for i, f := range fences {
		fd := strconv.Itoa(3 + i)
		file := "\"$d\"/" + shell.Quote(path.Base(f.File))
		gen := strconv.FormatUint(f.Gen, 10)
		fmt.Fprintf(&b, "g=\n[ -f %s ] && exec %s<%s && flock -s -w 60 %s && read -r g <&%s\n", file, fd, file, fd, fd)
		msg := fmt.Sprintf("%s the lock %q was taken by another rayform run since this one took it (this run holds fence generation %s, the host's is now ", fencedMark, f.Lock, gen)
		fmt.Fprintf(&b, "[ \"$g\" = %s ] || { echo %s\"${g:-unreadable}\"%s >&2; exit %d; }\n",
			gen, shell.Quote(msg), shell.Quote("): this run may no longer change the host"), ExitFenced)
		closeFDs += " " + fd + "<&-"
	}
	b.WriteString("sh -c " + shell.Quote(line) + " " + FencedName + closeFDs + "\n")
	return b.String(), nil
}
