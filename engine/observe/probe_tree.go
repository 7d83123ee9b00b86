// Trees: the probe's listing of the files under a directory, with their
// sizes, the identities of its small files and the targets of its links,
// and the free space of the filesystem that holds (or would hold) it
// (HostSpec.Trees), and their parsers.

package observe

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
)

// Section names of a tree: its files, and the free space where it is.
const (
	secTree = "tree"
	secIDs  = "ids"
	secFree = "free"
)

// TreeHashMax is the largest file whose identity the probe computes (the
// Hugging Face Hub keeps every larger file in LFS, identified by a sha256
// that only a full read could check): reading these files costs a plan
// little.
const TreeHashMax = 10 << 20

// TreeFacts is what the probe found under one directory of HostSpec.Trees.
type TreeFacts struct {
	// Exists is false when there is no such directory.
	Exists bool `json:"exists"`
	// Files are the files under it, symbolic links followed (a link is
	// listed with its target's size), in find(1)'s order. Directories are
	// not listed.
	Files []TreeFile `json:"files,omitempty"`
	// Err says why the listing failed or is incomplete (a subdirectory
	// that could not be read); Files then holds what was read.
	Err string `json:"err,omitempty"`
	// Hashed is true when IDs and Links were read: IDs are the git blob
	// ids (sha1 of "blob SIZE\0" and the content) of the regular files of
	// at most TreeHashMax bytes, by path, and Links the targets of the
	// symbolic links, by path; neither follows a link (nothing outside
	// the directory is read), and a name or target with a newline or a
	// tab is in neither. IDsErr says why they could not be read.
	Hashed bool              `json:"hashed,omitempty"`
	IDs    map[string]string `json:"ids,omitempty"`
	Links  map[string]string `json:"links,omitempty"`
	IDsErr string            `json:"ids_err,omitempty"`
	// FreeBytes is the space available to an unprivileged writer on the
	// filesystem holding the directory, or, when it does not exist, its
	// nearest existing parent (where it would be created); -1 when it
	// could not be read (FreeErr says why).
	FreeBytes int64  `json:"free_bytes"`
	FreeErr   string `json:"free_err,omitempty"`
}

// TreeFile is one file of a tree.
type TreeFile struct {
	// Path is relative to the tree's directory, with "/" separators.
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Dangling marks a symbolic link whose target does not exist (Size is
	// then the link's own).
	Dangling bool `json:"dangling,omitempty"`
}

// treeHelpers list a tree and read the free space where it is.
const treeHelpers = `# rf_tree DIR: type, size and path of every entry under DIR, links followed.
rf_tree() {
	rf_x find -L "$1" -mindepth 1 ! -type d -printf '%y %s %P\n'
}
# rf_ids DIR: under DIR, links not followed, "l TARGET<TAB>PATH" for each
# link and "b ID<TAB>PATH" for each regular file of at most 10 MiB, ID its
# git blob id (sha1 of "blob SIZE\0" and the content); a name or target
# with a newline or a tab is left out.
rf_ids() {
	command -v sha1sum >/dev/null 2>&1 || { printf 'rayform: sha1sum: not installed\n' >&2; return 127; }
	rf_nl='
'
	rf_x find "$1" -mindepth 1 \( -name "*$rf_nl*" -o -name '*	*' -o -lname "*$rf_nl*" -o -lname '*	*' \) -prune \
		-o -type l -printf 'l %l\t%P\n' \
		-o -type f -size -10485761c -exec sh -c 'for f; do
	n=$(wc -c <"$f") && id=$({ printf "blob %d\000" "$n"; cat -- "$f"; } | sha1sum) && printf "b %.40s\t%s\n" "$id" "${f#"$0"/}"
done' "$1" {} +
}
# rf_free DIR: df of DIR, or of its nearest existing parent.
rf_free() {
	rf_p=$1
	while [ ! -d "$rf_p" ]; do
		rf_p=${rf_p%/*}
		[ -n "$rf_p" ] || rf_p=/
	done
	rf_x df -Pk "$rf_p"
}
`

// writeTrees adds a tree and a free section per valid directory.
func writeTrees(b *strings.Builder, dirs []string) {
	ok := validOnly(dirs, validDir)
	if len(ok) == 0 {
		return
	}
	b.WriteString(treeHelpers)
	for _, d := range ok {
		b.WriteString("rf_sec " + shell.Quote(secTree+" path="+d) + " rf_tree " + shell.Quote(d) + "\n")
		b.WriteString("rf_sec " + shell.Quote(secIDs+" path="+d) + " rf_ids " + shell.Quote(d) + "\n")
		b.WriteString("rf_sec " + shell.Quote(secFree+" path="+d) + " rf_free " + shell.Quote(d) + "\n")
	}
}

// parseTree reads one tree section into t.
func parseTree(t *TreeFacts, s *section) {
	t.Exists = true
	if s.rc != 0 && s.complete && s.skipped == "" && len(s.stdout) <= 1 &&
		bytes.Contains(s.stderr, []byte("No such file")) {
		t.Exists = false
		return
	}
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		if line == "" {
			continue
		}
		typ, rest, ok1 := strings.Cut(line, " ")
		size, path, ok2 := strings.Cut(rest, " ")
		n, err := strconv.ParseInt(size, 10, 64)
		if !ok1 || !ok2 || err != nil || path == "" || len(typ) != 1 {
			t.Err = "find: unreadable line " + strconv.Quote(line)
			continue
		}
		switch typ {
		case "f":
			t.Files = append(t.Files, TreeFile{Path: path, Size: n})
		case "l", "N":
			t.Files = append(t.Files, TreeFile{Path: path, Size: n, Dangling: true})
		}
	}
	if msg := s.failure(); msg != "" && t.Err == "" {
		t.Err = msg
	}
}

// parseIDs reads one ids section into t.
func parseIDs(t *TreeFacts, s *section) {
	if msg := s.failure(); msg != "" {
		t.IDsErr = msg
		return
	}
	t.Hashed = true
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		if line == "" {
			continue
		}
		typ, rest, _ := strings.Cut(line, " ")
		val, path, ok := strings.Cut(rest, "\t")
		switch {
		case !ok || path == "":
			t.IDsErr = "ids: unreadable line " + strconv.Quote(line)
			t.Hashed = false
		case typ == "b" && len(val) == 40:
			if t.IDs == nil {
				t.IDs = map[string]string{}
			}
			t.IDs[path] = val
		case typ == "l":
			if t.Links == nil {
				t.Links = map[string]string{}
			}
			t.Links[path] = val
		default:
			t.IDsErr = "ids: unreadable line " + strconv.Quote(line)
			t.Hashed = false
		}
	}
}

// parseFree reads one free section (df -Pk) into t.
func parseFree(t *TreeFacts, s *section) {
	t.FreeBytes = -1
	if msg := s.failure(); msg != "" {
		t.FreeErr = msg
		return
	}
	lines := strings.Split(strings.TrimSpace(string(s.stdout)), "\n")
	if len(lines) < 2 {
		t.FreeErr = "df: no filesystem line"
		return
	}
	// The last line, so that a long device name df wrapped onto its own
	// line is skipped; POSIX -P forbids wrapping, but older tools did.
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 4 {
		t.FreeErr = "df: unreadable line " + strconv.Quote(lines[len(lines)-1])
		return
	}
	kb, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		t.FreeErr = "df: available " + strconv.Quote(f[3])
		return
	}
	t.FreeBytes = kb * 1024
}
