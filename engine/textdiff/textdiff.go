// Package textdiff computes line diffs of text and renders them as
// unified diffs, as `diff -u` does: what `rayform fmt -diff` prints.
package textdiff

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Unified returns a unified diff (3 lines of context, as `diff -u`)
// turning a into b, with the given file labels, or nil if they are equal.
func Unified(labelA, labelB string, a, b []byte) []byte {
	if bytes.Equal(a, b) {
		return nil
	}
	const context = 3
	ops := diffLines(splitLines(a), splitLines(b))

	var out bytes.Buffer
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", labelA, labelB)
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// ops[i] is the first change of a hunk; extend it over every later
		// change separated from the previous one by at most 2*context
		// unchanged lines.
		start := max(0, i-context)
		last := i
		for j := i + 1; j < len(ops) && j-last <= 2*context+1; j++ {
			if ops[j].kind != ' ' {
				last = j
			}
		}
		end := min(len(ops), last+context+1)
		hunk := ops[start:end]
		var oldCount, newCount int
		for _, op := range hunk {
			if op.kind != '+' {
				oldCount++
			}
			if op.kind != '-' {
				newCount++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n",
			hunkRange(hunk[0].oldIdx, oldCount), hunkRange(hunk[0].newIdx, newCount))
		for _, op := range hunk {
			out.WriteByte(op.kind)
			out.WriteString(op.line)
			if !strings.HasSuffix(op.line, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return out.Bytes()
}

// hunkRange renders one side of a hunk header: "start,count", with the
// count omitted when 1 and start naming the preceding line when count is 0.
func hunkRange(idx, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", idx)
	case 1:
		return fmt.Sprint(idx + 1)
	}
	return fmt.Sprintf("%d,%d", idx+1, count)
}

// diffOp is one line of an edit script: kind is ' ' (kept), '-'
// (removed) or '+' (added); oldIdx and newIdx count the lines of each side
// that precede it.
type diffOp struct {
	kind           byte
	line           string
	oldIdx, newIdx int
}

// diffLines returns a minimal edit script from a to b using a longest
// common subsequence over the lines between their common prefix and suffix.
func diffLines(a, b []string) []diffOp {
	var ops []diffOp
	i, j := 0, 0
	emit := func(kind byte, line string) {
		ops = append(ops, diffOp{kind, line, i, j})
		if kind != '+' {
			i++
		}
		if kind != '-' {
			j++
		}
	}
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	for _, l := range a[:pre] {
		emit(' ', l)
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	// lcs[x][y] is the LCS length of ma[x:] and mb[y:].
	lcs := make([][]int, len(ma)+1)
	for x := range lcs {
		lcs[x] = make([]int, len(mb)+1)
	}
	for x := len(ma) - 1; x >= 0; x-- {
		for y := len(mb) - 1; y >= 0; y-- {
			if ma[x] == mb[y] {
				lcs[x][y] = lcs[x+1][y+1] + 1
			} else {
				lcs[x][y] = max(lcs[x+1][y], lcs[x][y+1])
			}
		}
	}
	x, y := 0, 0
	for x < len(ma) || y < len(mb) {
		switch {
		case x < len(ma) && y < len(mb) && ma[x] == mb[y]:
			emit(' ', ma[x])
			x, y = x+1, y+1
		case y == len(mb) || (x < len(ma) && lcs[x+1][y] >= lcs[x][y+1]):
			emit('-', ma[x])
			x++
		default:
			emit('+', mb[y])
			y++
		}
	}
	for _, l := range a[len(a)-suf:] {
		emit(' ', l)
	}
	return ops
}

// splitLines splits s after each newline; a final line without one is
// kept as is.
func splitLines(s []byte) []string {
	if len(s) == 0 {
		return nil
	}
	lines := strings.SplitAfter(string(s), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Apply applies a unified diff (as Unified renders it) to a and returns
// the result; an error says where a context or removed line does not
// match. Tests use it to check that a diff turns the old text into the new.
func Apply(a, diff string) (string, error) {
	if diff == "" {
		return a, nil
	}
	old := splitLines([]byte(a))
	lines := strings.SplitAfter(diff, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		return "", fmt.Errorf("diff lacks --- / +++ header:\n%s", diff)
	}
	var out []string
	pos := 0 // next unconsumed line of old
	for i := 2; i < len(lines) && lines[i] != ""; {
		var oldStart, oldCount int
		hdr := lines[i]
		if !strings.HasPrefix(hdr, "@@ -") {
			return "", fmt.Errorf("expected hunk header, got %q", hdr)
		}
		oldRange := strings.Fields(hdr)[1][1:]
		startStr, countStr, hasCount := strings.Cut(oldRange, ",")
		oldStart, _ = strconv.Atoi(startStr)
		oldCount = 1
		if hasCount {
			oldCount, _ = strconv.Atoi(countStr)
		}
		first := oldStart - 1
		if oldCount == 0 {
			first = oldStart
		}
		if first < pos {
			return "", fmt.Errorf("hunk %q overlaps the previous one", hdr)
		}
		out = append(out, old[pos:first]...)
		pos = first
		i++
		for ; i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			body := l[1:]
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], `\ No newline at end of file`) {
				body = strings.TrimSuffix(body, "\n")
				i++
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(old) || old[pos] != body {
					return "", fmt.Errorf("line %d: diff expects %q", pos+1, body)
				}
				pos++
				if l[0] == ' ' {
					out = append(out, body)
				}
			case '+':
				out = append(out, body)
			default:
				return "", fmt.Errorf("bad diff line %q", l)
			}
		}
	}
	out = append(out, old[pos:]...)
	return strings.Join(out, ""), nil
}
