package diagnose

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// The bounded window: a log is read as a stream and only part of it is
// kept, so that a log of any size (a file of gigabytes, an endless stdin)
// is classified in bounded memory. What a diagnosis needs is kept: the
// start of the log (the command line, the versions, the first error of a
// short log), its end (the last error, the last progress, the tail an
// unknown log shows), and in between every line a rule or the fatal-error
// finder would select, with the line before it and a few after it (a
// message that wraps, the frame that quotes it). A log shorter than the
// window is kept whole.
const (
	// maxLineBytes cuts a longer line (one line of \r-joined progress bars,
	// a dumped tensor); the rest of it up to its newline is skipped.
	maxLineBytes = 64 << 10
	// headBytes is the start of a log kept whole.
	headBytes = 4 << 20
	// tailBytes is the end of a log kept whole (a ring of lines).
	tailBytes = 4 << 20
	// markedBytes is the budget of the selected lines between head and tail;
	// the earliest are kept (the root cause comes before its consequences).
	markedBytes = 4 << 20
	// afterMarked is how many lines after a selected line are kept with it.
	afterMarked = 4
	// MaxRetainedBytes bounds the text one log keeps: head, tail, selected
	// lines, each line at most maxLineBytes (plus the line being read).
	MaxRetainedBytes = headBytes + tailBytes + markedBytes + 2*maxLineBytes
)

// rawLine is one kept line of a log with its 1-based line number.
type rawLine struct {
	no   int
	text []byte
}

// window keeps the bounded part of one log as it is read.
type window struct {
	head     []rawLine
	headSize int
	mid      []rawLine // selected lines between head and tail
	midSize  int
	tail     []rawLine // ring, oldest first
	tailSize int
	// keep marks, per tail line, that it goes to mid when it leaves the tail.
	keep  []bool
	after int // lines still to keep after the last selected one
	// retained is the high-water mark of the kept bytes (for tests).
	retained int
	lines    int
}

// size is the bytes the window holds now.
func (w *window) size() int { return w.headSize + w.midSize + w.tailSize }

// add takes the next line of the log.
func (w *window) add(text []byte, selected bool) {
	w.lines++
	l := rawLine{no: w.lines, text: text}
	if w.headSize+len(text) <= headBytes && len(w.tail) == 0 {
		w.head = append(w.head, l)
		w.headSize += len(text)
		w.retained = max(w.retained, w.size())
		return
	}
	keep := selected || w.after > 0
	if selected {
		w.after = afterMarked
		if n := len(w.keep); n > 0 {
			w.keep[n-1] = true // the line before: a frame quoting the message
		}
	} else if w.after > 0 {
		w.after--
	}
	w.tail = append(w.tail, l)
	w.keep = append(w.keep, keep)
	w.tailSize += len(text)
	for w.tailSize > tailBytes && len(w.tail) > 1 {
		old, k := w.tail[0], w.keep[0]
		w.tail, w.keep = w.tail[1:], w.keep[1:]
		w.tailSize -= len(old.text)
		if k && w.midSize+len(old.text) <= markedBytes {
			w.mid = append(w.mid, old)
			w.midSize += len(old.text)
		}
	}
	// The ring's backing array is re-made when it has drifted far, so that
	// dropped lines are not held by it.
	if cap(w.tail) > 4*len(w.tail)+1024 {
		w.tail = append([]rawLine(nil), w.tail...)
		w.keep = append([]bool(nil), w.keep...)
	}
	w.retained = max(w.retained, w.size())
}

// lines returns the kept lines in order.
func (w *window) all() []rawLine {
	out := make([]rawLine, 0, len(w.head)+len(w.mid)+len(w.tail))
	out = append(out, w.head...)
	out = append(out, w.mid...)
	return append(out, w.tail...)
}

// ReadLog reads a log from r as a stream and keeps a bounded window of it
// (at most MaxRetainedBytes of text, whatever r's size): the start, the
// end, and the lines a diagnosis can use in between, with their line
// numbers. Secrets are masked when the lines are shown, not here.
func ReadLog(r io.Reader, host, source string) (Log, error) {
	var w window
	if err := w.read(r); err != nil {
		return Log{}, err
	}
	return Log{Host: host, Source: source, kept: w.all(), windowed: true}, nil
}

// read fills w from r.
func (w *window) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, maxLineBytes)
	var cur []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(cur) < maxLineBytes {
			cur = append(cur, frag[:min(len(frag), maxLineBytes-len(cur))]...)
		}
		switch {
		case err == nil:
			w.addRaw(bytes.TrimSuffix(cur, []byte("\n")))
			cur = nil
		case errors.Is(err, bufio.ErrBufferFull):
			// A line longer than the buffer: its rest is read and dropped.
		case errors.Is(err, io.EOF):
			if len(cur) > 0 {
				w.addRaw(cur)
			}
			return nil
		default:
			return fmt.Errorf("read log: %w", err)
		}
	}
}

// addRaw adds one raw line, selecting it when a rule could use it (once
// the head is full: the head keeps every line anyway).
func (w *window) addRaw(raw []byte) {
	text := bytes.Clone(raw)
	w.add(text, (len(w.tail) > 0 || w.headSize+len(text) > headBytes) && selects(text))
}

// selects reports whether any segment of a raw line is one a rule or the
// fatal-error finder matches.
func selects(raw []byte) bool {
	for _, seg := range bytes.Split(raw, []byte("\r")) {
		t := clean(seg)
		if t == "" {
			continue
		}
		if salient(t, body(t)) {
			return true
		}
	}
	return false
}

// windowText keeps the window of an in-memory log.
func windowText(text []byte) []rawLine {
	var w window
	_ = w.read(bytes.NewReader(text)) // a bytes.Reader fails only with EOF
	return w.all()
}
