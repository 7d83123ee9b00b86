package ssh

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/transport/shell"
)

// The wire protocol of one command.
//
// sshd runs the exec string with the login shell, which execs /bin/sh with
// the fixed wrapper script below; the command line itself (transport.Cmd
// String: a Script or the quoted argv) is its $1 and a random terminator its
// $2. Neither carries a secret. The wrapper:
//
//  1. writes "<marker> <pid> <pgid>" as its first stderr line, so the client
//     knows what to kill if the command is cancelled (sshd has made the
//     session shell a process group leader with setsid, so the pgid covers
//     every process the command starts);
//  2. reads lines from stdin up to the terminator line and evals them: the
//     client sends `export NAME='value'` for each Env entry there, so
//     values travel over the encrypted channel's stdin and never appear in
//     argv or in a file;
//  3. starts the watchdog (watchScript) in a session of its own, so that
//     the command dies with its SSH connection;
//  4. execs /bin/sh -c "$1" with the rest of stdin as the command's stdin.
//
// The client sends the environment only after it has read the marker. A
// command cancelled before that never starts: the wrapper sees EOF instead
// of the terminator and exits. A command cancelled after that is killed by
// a second session running killScript on the process group (OpenSSH does
// not deliver signals to non-pty sessions reliably, and closing the channel
// does not end a process that is not writing).
//
// A client that dies (kill -9 of rayform, its machine lost) cancels
// nothing: sshd sends no SIGHUP to a session without a pty, and a command
// that is not writing (a download to a file, a flock wait) would run on,
// holding what it holds (a lock's fence: the next run would wait for it).
// The watchdog ends it: it polls, each second, whether the command's parent
// is still the sshd process that serves the connection (each connection
// has its own, which exits when the connection ends, and its session
// children are then re-parented); when not, it ends the command's process
// group as killScript does ($3: the grace in tenths of a second). It exits
// once the command has. Without setsid(1) (util-linux, as flock(1)) there
// is no watchdog.
const wrapperScript = `read -r _ _ _ p g _ < /proc/$$/stat 2>/dev/null || { p=; g=$$; }
echo "rayform-pid $$ $g" >&2
h=
while :; do
	IFS= read -r l || exit 255
	[ "$l" = "$2" ] && break
	h="$h$l
"
done
if [ "${p:-1}" -gt 1 ] && command -v setsid >/dev/null 2>&1; then
	setsid /bin/sh -c '` + watchScript + `' rayform-watch $$ "$p" "$g" "$3" </dev/null >/dev/null 2>&1 &
fi
eval "$h"
unset h l g p
exec /bin/sh -c "$1"`

// watchScript is the watchdog of the command $1 (a pid, and a group leader
// when $3 is the same pid) whose parent was $2, the sshd process of its
// connection: see wrapperScript. /proc/PID/stat's fields after the command
// name (in parentheses, which may hold spaces) are state, ppid, pgrp, and
// the 20th the start time, which tells the command from a later process
// given the same pid. It holds no quote: it is quoted in wrapperScript.
const watchScript = `c=$1 p=$2 t=$1 n=$4
[ "$3" = "$1" ] && t=-$1
s=$(cat /proc/$c/stat 2>/dev/null) || exit 0
set -- ${s##*\)}
st=${20}
while sleep 1; do
	s=$(cat /proc/$c/stat 2>/dev/null) || exit 0
	set -- ${s##*\)}
	[ "${20}" = "$st" ] || exit 0
	[ "$2" = "$p" ] && continue
	kill -TERM $t 2>/dev/null || exit 0
	i=0
	while kill -0 $t 2>/dev/null; do
		i=$((i+1))
		if [ $i -gt $n ]; then kill -KILL $t 2>/dev/null; exit 0; fi
		sleep 0.1
	done
	exit 0
done`

// markerPrefix starts the wrapper's first stderr line.
const markerPrefix = "rayform-pid "

// execString returns what is sent in the SSH exec request for line; grace
// is the time the watchdog gives an orphaned command between SIGTERM and
// SIGKILL.
func execString(line, terminator string, grace time.Duration) string {
	return "exec /bin/sh -c " + shell.Quote(wrapperScript) + " rayform " + shell.Quote(line) + " " + terminator + " " + strconv.Itoa(int(grace/(100*time.Millisecond)))
}

// envHeader renders the wrapper's stdin preamble for env (keys sorted).
func envHeader(keys []string, env map[string]string, terminator string) []byte {
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString("export " + k + "=" + shell.Quote(env[k]) + "\n")
	}
	b.WriteString(terminator + "\n")
	return b.Bytes()
}

func randomHex(n int) string {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on Linux
	}
	return hex.EncodeToString(buf)
}

// killScript ends the process group pgid (or only pid when the wrapper was
// not a group leader): SIGTERM, a grace period polled in 0.1s steps, then
// SIGKILL.
func killScript(pid, pgid int, grace time.Duration) string {
	target := strconv.Itoa(pid)
	if pgid == pid {
		target = "-" + strconv.Itoa(pgid)
	}
	steps := int(grace / (100 * time.Millisecond))
	return fmt.Sprintf(`t=%s
kill -TERM $t 2>/dev/null || exit 0
i=0
while kill -0 $t 2>/dev/null; do
	i=$((i+1))
	if [ $i -gt %d ]; then kill -KILL $t 2>/dev/null; exit 0; fi
	sleep 0.1
done`, target, steps)
}

// uploadScript writes stdin to a temp file next to p, sets its mode and
// renames it over p. The temp file is removed on any failure, including
// being killed with SIGTERM. A directory at p is refused (mv would move the
// file into it).
func uploadScript(p string, mode uint32) string {
	tmp := path.Join(path.Dir(p), ".rayform-upload-"+randomHex(8))
	return fmt.Sprintf(`p=%s
t=%s
trap 'rm -f "$t"' EXIT
trap 'exit 143' TERM INT HUP
if [ -d "$p" ]; then echo "$p is a directory" >&2; exit 1; fi
umask 077
set -C
cat > "$t" || exit 1
chmod %04o "$t" || exit 1
mv -f "$t" "$p" || exit 1`, shell.Quote(p), shell.Quote(tmp), mode&0o7777)
}

// markerWriter sits in front of the command's stderr: it passes everything
// through except the wrapper's marker line, which it parses. Lines written
// before the marker (a login shell's noise) pass through too.
type markerWriter struct {
	out   *lockedTee
	found chan struct{} // closed when the marker has been parsed

	mu        sync.Mutex
	done      bool
	buf       []byte
	pid, pgid int
}

func newMarkerWriter(out *lockedTee) *markerWriter {
	return &markerWriter{out: out, found: make(chan struct{})}
}

func (m *markerWriter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return m.out.Write(p)
	}
	m.buf = append(m.buf, p...)
	for {
		i := bytes.IndexByte(m.buf, '\n')
		if i < 0 {
			if len(m.buf) > 64<<10 { // not a marker: give up waiting for one
				_, _ = m.out.Write(m.buf)
				m.buf = nil
			}
			return len(p), nil
		}
		line := string(m.buf[:i])
		rest := m.buf[i+1:]
		if pid, pgid, ok := parseMarker(line); ok {
			m.pid, m.pgid, m.done = pid, pgid, true
			m.buf = nil
			close(m.found)
			if len(rest) > 0 {
				_, _ = m.out.Write(rest)
			}
			return len(p), nil
		}
		_, _ = m.out.Write(m.buf[:i+1])
		m.buf = rest
	}
}

// flush passes on a partial line left when the stream ended.
func (m *markerWriter) flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.buf) > 0 {
		_, _ = m.out.Write(m.buf)
		m.buf = nil
	}
}

// ids returns the pid and pgid from the marker, if it arrived.
func (m *markerWriter) ids() (pid, pgid int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pid, m.pgid, m.done
}

func parseMarker(line string) (pid, pgid int, ok bool) {
	rest, found := strings.CutPrefix(line, markerPrefix)
	if !found {
		return 0, 0, false
	}
	f := strings.Fields(rest)
	if len(f) != 2 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	pgid, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || pid <= 1 || pgid <= 1 {
		return 0, 0, false
	}
	return pid, pgid, true
}
