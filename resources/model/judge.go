package model

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/rayform/rayform/engine/observe"
)

// Layout is where a model's files lie on a host.
type Layout struct {
	// Dir is the directory the probe lists: the repository's directory in
	// a Hugging Face cache (CACHE/models--ORG--NAME) or, for a plain
	// directory, the directory itself.
	Dir string
	// HFCache selects the Hugging Face cache layout: each file at
	// snapshots/COMMIT/PATH, a link to ../../blobs/BLOB (relative to its
	// own directory), the revision's commit in refs/REVISION when the
	// revision is not itself a commit. Otherwise each file is at PATH.
	HFCache bool
}

// HFCacheLayout is the layout of repo in the Hugging Face cache at cache
// (HF_HUB_CACHE: HF_HOME/hub).
func HFCacheLayout(cache, repo string) Layout {
	return Layout{Dir: path.Join(cache, CacheDirName(repo)), HFCache: true}
}

// PartialSuffix is the suffix of a file being written: huggingface_hub writes
// blobs/BLOB.incomplete and resumes from it, and staging does the same, so
// that a file is under its final name only once it is whole and verified.
const PartialSuffix = ".incomplete"

// FilePath is where f lies, relative to the layout's Dir.
func (l Layout) FilePath(m Manifest, f File) string {
	if l.HFCache {
		return path.Join("snapshots", m.Commit, f.Path)
	}
	return f.Path
}

// StorePath is where f's content is written, relative to Dir: its blob in
// the Hugging Face cache (FilePath then links to it), else FilePath.
// Staging writes StorePath+PartialSuffix and renames it.
func (l Layout) StorePath(m Manifest, f File) string {
	if l.HFCache {
		return path.Join("blobs", f.Blob())
	}
	return f.Path
}

// LinkTarget is the target of f's snapshot link in the Hugging Face cache
// (relative to the link's directory, as huggingface_hub and staging make
// it: ../../blobs/BLOB for a file at the top), or "" for a plain
// directory.
func (l Layout) LinkTarget(m Manifest, f File) string {
	if !l.HFCache {
		return ""
	}
	return strings.Repeat("../", strings.Count(l.FilePath(m, f), "/")) + l.StorePath(m, f)
}

// RefPath is the file naming the revision's commit, relative to Dir, or ""
// when none is needed (a plain directory, or a revision that is a commit).
func (l Layout) RefPath(m Manifest) string {
	if !l.HFCache || m.Revision == "" || m.Revision == m.Commit {
		return ""
	}
	return path.Join("refs", m.Revision)
}

// State is a host's copy of a model, as a whole.
type State int

// The states of a copy.
const (
	// Absent: none of the files is there.
	Absent State = iota
	// Partial: some are, or the files are there but a link or the
	// revision's ref is not.
	Partial
	// Complete: every file of the manifest is there with its size, in
	// the Hugging Face cache each snapshot file a link to its own blob,
	// and each file not stored with LFS (at most observe.TreeHashMax
	// bytes) with the git blob id the hub published (where the probe
	// could hash: see Judge).
	Complete
)

func (s State) String() string {
	switch s {
	case Complete:
		return "complete"
	case Partial:
		return "partial"
	}
	return "absent"
}

// Judgment is what a host has of a model, judged from the listing of its
// directory: sizes, link targets, and the git blob ids of the small files
// (the hub's identity of every file not stored with LFS). The sha256 of an
// LFS file (the weights) is verified when staging writes it, never at
// plan time, which would read every byte.
type Judgment struct {
	State State
	// Missing are the files whose content must be staged: absent, or
	// present with another size (a truncated or corrupted copy).
	Missing []File
	// WrongSize are the files of Missing present with another size.
	WrongSize []File
	// WrongContent are the files of Missing present with their size but
	// another git blob id than the hub's.
	WrongContent []File
	// Unlinked are the files whose content is in blobs/ but whose
	// snapshot link is missing (nothing to transfer).
	Unlinked []File
	// RefMissing is true when the revision's ref file is absent or wrong
	// in size.
	RefMissing bool
	// MissingBytes is the size of Missing; ResumeBytes what their partial
	// files already hold, which a resumed transfer keeps.
	MissingBytes int64
	ResumeBytes  int64
	// NeedBytes is the disk space staging still needs: MissingBytes less
	// ResumeBytes. FreeBytes is the space available where the model goes
	// (-1 when unknown).
	NeedBytes int64
	FreeBytes int64
	// Err is the probe's error for the directory, when its listing could
	// not be read whole; the judgment is then from what was read.
	Err string
}

// Fits reports whether the space available holds what staging needs; an
// unknown free space (-1) is reported as fitting, and FreeBytes says so.
func (j Judgment) Fits() bool { return j.FreeBytes < 0 || j.NeedBytes <= j.FreeBytes }

// Judge judges a host's copy of the files of m laid out as l, from the
// probe's listing of l.Dir.
func Judge(m Manifest, l Layout, t observe.TreeFacts) Judgment {
	j := Judgment{FreeBytes: t.FreeBytes, Err: t.Err}
	size := make(map[string]int64, len(t.Files))
	for _, f := range t.Files {
		if !f.Dangling {
			size[f.Path] = f.Size
		}
	}
	have := 0
	for _, f := range m.Files {
		content := contentOK(m, l, t, f)
		linked := !l.HFCache || !t.Hashed || t.Links[l.FilePath(m, f)] == l.LinkTarget(m, f)
		got, ok := size[l.FilePath(m, f)]
		if ok && got == f.Size && content && linked {
			have++
			continue
		}
		if l.HFCache {
			b, bok := size[l.StorePath(m, f)]
			if bok && b == f.Size && content {
				have++
				j.Unlinked = append(j.Unlinked, f)
				continue
			}
			ok = bok || ok && linked
			got = b
		}
		switch {
		case ok && got == f.Size:
			j.WrongContent = append(j.WrongContent, f)
		case ok:
			j.WrongSize = append(j.WrongSize, f)
		}
		j.Missing = append(j.Missing, f)
		j.MissingBytes += f.Size
		if p, ok := size[l.StorePath(m, f)+PartialSuffix]; ok && p <= f.Size {
			j.ResumeBytes += p
		}
	}
	if ref := l.RefPath(m); ref != "" {
		if got, ok := size[ref]; !ok || got != int64(len(m.Commit)) {
			j.RefMissing = true
		}
	}
	j.NeedBytes = j.MissingBytes - j.ResumeBytes
	switch {
	case len(j.Missing) == 0 && len(j.Unlinked) == 0 && !j.RefMissing:
		j.State = Complete
	case have == 0 && len(j.WrongSize) == 0 && len(j.WrongContent) == 0 && j.ResumeBytes == 0:
		j.State = Absent
	default:
		j.State = Partial
	}
	return j
}

// contentOK reports whether f's content, where the probe hashed it, is
// the hub's: a file not stored with LFS, of at most observe.TreeHashMax
// bytes, must have the git blob id the hub published (in the Hugging Face
// cache, its blob must be a regular file with it). An LFS file, a larger
// one, or a tree the probe could not hash is judged by its size alone.
func contentOK(m Manifest, l Layout, t observe.TreeFacts, f File) bool {
	if !t.Hashed || f.SHA256 != "" || f.Size > observe.TreeHashMax {
		return true
	}
	p := l.StorePath(m, f)
	id, ok := t.IDs[p]
	if !ok {
		// Not a regular file in the tree (a link, or absent: the size
		// check says which).
		return !l.HFCache && !slices.ContainsFunc(t.Files, func(tf observe.TreeFile) bool { return tf.Path == p })
	}
	return id == f.BlobID
}

// GB renders a byte count in decimal gigabytes, as the hub shows sizes.
func GB(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// String is the judgment as plan shows it for one node: "complete",
// "absent, 12.3 GB to stage", "partial, 2 of 5 files missing (4.1 GB to
// stage, 1.0 GB already transferred)".
func (j Judgment) String() string {
	switch j.State {
	case Complete:
		return "complete"
	case Absent:
		return "absent, " + GB(j.NeedBytes) + " to stage"
	}
	var parts []string
	if n := len(j.Missing); n > 0 {
		s := fmt.Sprintf("%d file", n)
		if n > 1 {
			s += "s"
		}
		s += " missing"
		var why []string
		if w := len(j.WrongSize); w > 0 {
			why = append(why, fmt.Sprintf("%d with the wrong size", w))
		}
		if w := len(j.WrongContent); w > 0 {
			why = append(why, fmt.Sprintf("%d with content other than the hub's", w))
		}
		if len(why) > 0 {
			s += " (" + strings.Join(why, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if len(j.Unlinked) > 0 {
		parts = append(parts, fmt.Sprintf("%d snapshot link(s) missing", len(j.Unlinked)))
	}
	if j.RefMissing {
		parts = append(parts, "revision ref missing")
	}
	s := "partial, " + strings.Join(parts, ", ")
	if j.NeedBytes > 0 || j.ResumeBytes > 0 {
		s += ", " + GB(j.NeedBytes) + " to stage"
		if j.ResumeBytes > 0 {
			s += " (" + GB(j.ResumeBytes) + " already transferred)"
		}
	}
	return s
}

// DiskError is the error when a host lacks the space staging needs, or ""
// when it has it.
func (j Judgment) DiskError(dir string) string {
	if j.Fits() {
		return ""
	}
	return fmt.Sprintf("%s to stage into %s, but its filesystem has %s free; free %s there or set the model's cache_dir to a larger filesystem",
		GB(j.NeedBytes), dir, GB(j.FreeBytes), GB(j.NeedBytes-j.FreeBytes))
}
