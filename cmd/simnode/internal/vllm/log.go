package vllm

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
)

// plog writes lines with a process prefix such as "(APIServer pid=1) ", the
// way vLLM decorates the output of its processes. It is safe for concurrent
// use.
type plog struct {
	mu     *sync.Mutex
	out    io.Writer
	err    io.Writer
	prefix string
	now    func() time.Time
}

func (l *plog) with(prefix string) *plog {
	c := *l
	c.prefix = l.prefix + prefix
	return &c
}

func (l *plog) line(w io.Writer, s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, part := range strings.Split(s, "\n") {
		fmt.Fprintln(w, l.prefix+part)
	}
}

// Info logs at INFO with vLLM's format.
func (l *plog) Info(file, format string, args ...any) {
	l.line(l.out, pylog.VLLM(l.now(), "INFO", file, fmt.Sprintf(format, args...)))
}

// Warn logs at WARNING.
func (l *plog) Warn(file, format string, args ...any) {
	l.line(l.out, pylog.VLLM(l.now(), "WARNING", file, fmt.Sprintf(format, args...)))
}

// Error logs at ERROR, one prefixed line per message line.
func (l *plog) Error(file, format string, args ...any) {
	head := pylog.VLLM(l.now(), "ERROR", file, "")
	for _, part := range strings.Split(fmt.Sprintf(format, args...), "\n") {
		l.line(l.out, head+part)
	}
}

// Raw writes text as is (one prefixed line per line) to stdout.
func (l *plog) Raw(s string) { l.line(l.out, s) }

// RawErr writes text to stderr.
func (l *plog) RawErr(s string) { l.line(l.err, s) }

// Ray writes a Ray record-style line (Ray's Python logger in the driver).
func (l *plog) Ray(level, file, msg string) {
	l.line(l.err, pylog.RayRecord(l.now(), level, file, msg))
}

// lineWriter turns writes into calls of emit, one per complete line; a
// carriage return also ends a line (tqdm's updates).
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexAny(string(w.buf), "\n\r")
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.emit(line)
	}
}
