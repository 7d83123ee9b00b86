// Trees: the probe's listing of the files under a directory, with their
// sizes, and the free space of the filesystem that holds (or would hold)
// it (HostSpec.Trees), and their parsers.

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
	secFree = "free"
)

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
