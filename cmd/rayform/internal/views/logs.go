package views

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/rayform/rayform/engine/termtext"
)

// Logs shows the logs of a resource's nodes, each line prefixed by its
// node (human only: the lines are the logs').
type Logs struct {
	*View
	mu sync.Mutex
}

// NewLogs is logs' view.
func NewLogs(v *View) *Logs { return &Logs{View: v} }

// Node returns the writers of node's output and errors, each line
// prefixed by the node's name padded to width, and flush, which writes
// their last lines without a newline.
func (v *Logs) Node(node string, width int) (stdout, stderr io.Writer, flush func()) {
	prefix := fmt.Sprintf("%-*s | ", width, node)
	out := &prefixWriter{mu: &v.mu, w: v.stdout, prefix: prefix}
	errw := &prefixWriter{mu: &v.mu, w: v.stderr, prefix: prefix}
	return out, errw, func() {
		out.flush()
		errw.flush()
	}
}

// prefixWriter writes complete lines to w, each prefixed, under a mutex
// shared by every node's writers, so lines of different nodes never mix.
// A line ends at \n or \r (a progress bar's redraw becomes lines of its
// own), and reaches w with its terminal control sequences removed
// (termtext.Plain): a log is data, and must not retitle, clear or write the
// clipboard of the operator's terminal.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
	// cr is set when the last line ended at a \r: a \n right after it
	// ends the same line.
	cr bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexAny(p.buf, "\r\n")
		if i < 0 {
			break
		}
		line, sep := p.buf[:i], p.buf[i]
		p.buf = p.buf[i+1:]
		if i == 0 && sep == '\n' && p.cr {
			p.cr = false
			continue
		}
		p.cr = sep == '\r'
		p.emit(line)
	}
	return len(b), nil
}

// emit writes one line, prefixed and made plain.
func (p *prefixWriter) emit(line []byte) {
	p.mu.Lock()
	fmt.Fprintf(p.w, "%s%s\n", p.prefix, termtext.Plain(line))
	p.mu.Unlock()
}

// flush writes a last line without a newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.emit(p.buf)
		p.buf = nil
	}
}
