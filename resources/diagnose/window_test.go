package diagnose

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// genLog is an io.Reader of n generated lines: line i is line(i). It holds
// one line at a time, so the test itself stays small whatever n is.
type genLog struct {
	n, i int
	line func(i int) string
	buf  []byte
}

func (g *genLog) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		if g.i >= g.n {
			return 0, io.EOF
		}
		g.i++
		g.buf = []byte(g.line(g.i) + "\n")
	}
	k := copy(p, g.buf)
	g.buf = g.buf[k:]
	return k, nil
}

// TestWindowBounded streams logs far larger than the window (issue #30
// item 6: a 200 MB file took 941 MB, stdin grew without bound) and checks
// that what the window retains never passes MaxRetainedBytes at any point
// of the read, and that what a diagnosis needs survives: the head, the
// tail, and a fatal line in the middle with its true line number.
func TestWindowBounded(t *testing.T) {
	const n = 130_000 // about 16 MB, more than the window
	filler := func(i int) string {
		return fmt.Sprintf("INFO 06-30 13:53:%02d [loader.py:%d] Loading weights shard %d of a very long and healthy model load, nothing wrong here", i%60, i%997, i)
	}
	const oomAt = 65_000
	const oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.02 GiB is free."
	tests := []struct {
		name string
		line func(i int) string
	}{
		{"filler with one fatal line", func(i int) string {
			if i == oomAt {
				return oom
			}
			return filler(i)
		}},
		// Every line selected: the selected lines' own budget holds.
		{"every line selected", func(i int) string { return fmt.Sprintf("%s (line %d)", oom, i) }},
		// Lines far longer than the line cap, no newline for megabytes.
		{"huge lines", func(i int) string { return strings.Repeat("x", 3*maxLineBytes) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w window
			lines := n
			if tt.name == "huge lines" {
				lines = 200
			}
			if err := w.read(&genLog{n: lines, line: tt.line}); err != nil {
				t.Fatal(err)
			}
			if w.retained > MaxRetainedBytes {
				t.Fatalf("window retained %d bytes at its peak, bound %d", w.retained, MaxRetainedBytes)
			}
			if w.lines != lines {
				t.Fatalf("read %d lines, want %d", w.lines, lines)
			}
			kept := w.all()
			if kept[0].no != 1 || kept[len(kept)-1].no != lines {
				t.Fatalf("first/last kept line %d/%d, want 1/%d", kept[0].no, kept[len(kept)-1].no, lines)
			}
			if len(kept) >= lines {
				t.Fatalf("kept all %d lines: no window", len(kept))
			}
			for _, l := range kept {
				if len(l.text) > maxLineBytes {
					t.Fatalf("line %d kept %d bytes, cap %d", l.no, len(l.text), maxLineBytes)
				}
			}
			if tt.name != "filler with one fatal line" {
				return
			}
			found := false
			for _, l := range kept {
				if l.no == oomAt {
					found = string(l.text) == oom
				}
			}
			if !found {
				t.Fatalf("the fatal line %d was not kept", oomAt)
			}
		})
	}
}

// TestReadLogClassifies: a streamed log is classified from its window, with
// the evidence's line number as in the whole log.
func TestReadLogClassifies(t *testing.T) {
	const oomAt = 50_000
	l, err := ReadLog(&genLog{n: 100_000, line: func(i int) string {
		if i == oomAt {
			return "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.02 GiB is free."
		}
		return fmt.Sprintf("INFO 06-30 13:53:19 [loader.py:1] Loading weights shard %d, all is well with this model and this line is long enough", i)
	}}, "gpu1", "stdin")
	if err != nil {
		t.Fatal(err)
	}
	d := Classify(Input{Logs: []Log{l}})
	if d.Cause != CUDAOOM || len(d.Evidence) == 0 || d.Evidence[0].LineNo != oomAt || d.Evidence[0].Host != "gpu1" {
		t.Fatalf("cause %s, evidence %+v", d.Cause, d.Evidence)
	}
}
