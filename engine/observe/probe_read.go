// Reads: the probe's reading of small files' content (HostSpec.Reads),
// bounded in size and read-only, and their parser.

package observe

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
)

// secRead is the section of one ReadProbe.
const secRead = "read"

// RefPlaceholder is the path component of ReadProbe.Path that stands for
// the word read from ReadProbe.Ref.
const RefPlaceholder = "{ref}"

// DefaultReadMax bounds a read when ReadProbe.Max is zero; MaxReadMax is
// the largest bound a probe may ask for.
const (
	DefaultReadMax = 1 << 20
	MaxReadMax     = 16 << 20
)

// ReadProbe asks for the content of one small file; its answer is
// HostFacts.Reads[Key()].
type ReadProbe struct {
	// Path is the absolute file to read, of letters, digits and "._/-"
	// without "..". With Ref set, exactly one of its components is
	// RefPlaceholder, replaced by the word Ref holds.
	Path string
	// Ref, when set, is an absolute file whose first line is one word
	// (letters, digits, "._-"; not "." or "..") naming a component of Path:
	// a pointer file such as a git ref, which names a directory by its
	// content.
	Ref string
	// Max is the most bytes to read; zero means DefaultReadMax. A longer
	// file is reported Truncated, with its first Max bytes.
	Max int
}

// Key is the request's key in HostFacts.Reads: the path, with the
// ref file after a space when there is one.
func (r ReadProbe) Key() string {
	if r.Ref == "" {
		return r.Path
	}
	return r.Path + " " + r.Ref
}

func (r ReadProbe) limit() int {
	if r.Max <= 0 {
		return DefaultReadMax
	}
	return r.Max
}

func (r ReadProbe) validate() error {
	if r.Max < 0 || r.Max > MaxReadMax {
		return fmt.Errorf("read %s: max %d: want 0 to %d bytes", r.Path, r.Max, MaxReadMax)
	}
	if r.Ref == "" {
		if !validDir(r.Path) {
			return fmt.Errorf("read %q: want an absolute path of letters, digits, '.', '_', '/', '-' without \"..\"", r.Path)
		}
		return nil
	}
	if !validDir(r.Ref) {
		return fmt.Errorf("read %s: ref %q: want an absolute path of letters, digits, '.', '_', '/', '-' without \"..\"", r.Path, r.Ref)
	}
	pre, post, ok := r.split()
	if !ok || !validDir(pre+"x"+post) {
		return fmt.Errorf("read %q: want an absolute path of letters, digits, '.', '_', '/', '-' with one %s component", r.Path, RefPlaceholder)
	}
	return nil
}

// split cuts Path around its one RefPlaceholder component.
func (r ReadProbe) split() (pre, post string, ok bool) {
	parts := strings.Split(r.Path, "/")
	at := -1
	for i, p := range parts {
		if p == RefPlaceholder {
			if at >= 0 {
				return "", "", false
			}
			at = i
		}
	}
	if at < 1 {
		return "", "", false
	}
	pre = strings.Join(parts[:at], "/") + "/"
	if at+1 < len(parts) {
		post = "/" + strings.Join(parts[at+1:], "/")
	}
	return pre, post, true
}

// ReadResult is the answer to one ReadProbe.
type ReadResult struct {
	// Exists is false when the file (or the ref file) does not exist.
	Exists bool `json:"exists"`
	// Ref is the word read from the ref file, when the probe had one.
	Ref string `json:"ref,omitempty"`
	// Content is the file's content, or its first Max bytes when
	// Truncated.
	Content string `json:"content,omitempty"`
	// Truncated is true when the file is longer than the probe's Max.
	Truncated bool   `json:"truncated,omitempty"`
	Err       string `json:"err,omitempty"`
}

// readHelpers read one file, bounded, with head(1); rf_read resolves the
// ref file first (with the shell's read, no tool) and prints the word as
// part "ref", the content as part "content".
const readHelpers = `# rf_read PRE POST REF MAX: print the first MAX bytes of PRE POST, or with
# REF of PRE<the word in REF>POST.
rf_read() {
	rf_f=$1$2
	if [ -n "$3" ]; then
		if [ ! -f "$3" ]; then
			printf 'rayform: %s: No such file\n' "$3" >&2
			return 1
		fi
		rf_w=
		IFS= read -r rf_w <"$3"
		case $rf_w in
		'' | . | .. | *[!A-Za-z0-9._-]*)
			printf 'rayform: %s: not one word\n' "$3" >&2
			return 1
			;;
		esac
		printf '%s part ref\n%s\n' "$M" "$rf_w"
		rf_f=$1$rf_w$2
	fi
	if [ ! -f "$rf_f" ]; then
		printf 'rayform: %s: No such file\n' "$rf_f" >&2
		return 1
	fi
	printf '%s part content\n' "$M"
	rf_x head -c "$4" "$rf_f"
}
`

// writeReads adds a read section per valid request.
func writeReads(b *strings.Builder, reads []ReadProbe) {
	var ok []ReadProbe
	seen := map[string]bool{}
	for _, r := range reads {
		if r.validate() == nil && !seen[r.Key()] {
			seen[r.Key()] = true
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return
	}
	b.WriteString(readHelpers)
	for _, r := range ok {
		pre, post := r.Path, ""
		if r.Ref != "" {
			pre, post, _ = r.split()
		}
		// One byte past the bound tells a file of exactly Max bytes from a
		// longer one.
		b.WriteString("rf_sec " + shell.Quote(secRead+" key="+r.Path+" ref="+r.Ref+" max="+strconv.Itoa(r.limit())) +
			" rf_read " + shell.Quote(pre) + " " + shell.Quote(post) + " " + shell.Quote(r.Ref) + " " + strconv.Itoa(r.limit()+1) + "\n")
	}
}

// readKey is the HostFacts.Reads key of a read section.
func readKey(s *section) string {
	return ReadProbe{Path: s.attr("key"), Ref: s.attr("ref")}.Key()
}

// parseRead reads one read section: the ref's word, then the content.
func parseRead(s *section) ReadResult {
	var r ReadResult
	if s.hasPart("ref") {
		r.Ref = strings.TrimSpace(string(s.part("ref")))
	}
	if s.rc != 0 && s.complete && s.skipped == "" && bytes.Contains(s.stderr, []byte("No such file")) {
		return r
	}
	if msg := s.failure(); msg != "" {
		r.Err = msg
		return r
	}
	if !s.hasPart("content") {
		r.Err = "no content in the probe's answer"
		return r
	}
	r.Exists = true
	content := s.part("content")
	limit, err := strconv.Atoi(s.attr("max"))
	if err != nil || limit <= 0 {
		limit = DefaultReadMax
	}
	if len(content) > limit {
		r.Truncated = true
		content = content[:limit]
	}
	r.Content = string(content)
	return r
}
