package model

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// File is one file of a model repository, as the hub lists it.
type File struct {
	// Path is the file's path in the repository ("config.json",
	// "model-00001-of-00004.safetensors").
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is the hex sha256 of the content, where the hub publishes it
	// (files stored with Git LFS: the weights); "" otherwise.
	SHA256 string `json:"sha256,omitempty"`
	// BlobID is the git blob id the hub lists for the file; a file
	// without SHA256 is stored in the cache's blobs/ under this name.
	BlobID string `json:"blob_id,omitempty"`
}

// Blob is the file's name under blobs/ in the Hugging Face cache: the
// ETag the hub serves for it, which is the sha256 of an LFS file and the
// git blob id of any other.
func (f File) Blob() string {
	if f.SHA256 != "" {
		return f.SHA256
	}
	return f.BlobID
}

// Manifest is the files of one revision of a repository that a serve
// needs.
type Manifest struct {
	// Repo is the repository id, ORG/NAME.
	Repo string `json:"repo"`
	// Revision is what the configuration asked for (a branch, a tag or a
	// commit); Commit the commit it resolved to.
	Revision string `json:"revision"`
	Commit   string `json:"commit"`
	Files    []File `json:"files"`
}

// Bytes is the size of all the manifest's files.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

var (
	commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// MaxFileBytes bounds the size of one file a hub (or a node's record)
// may list: 1 TiB, twenty times the 50 GB the Hugging Face Hub accepts in
// one file. A larger size, or a negative one, is a broken or hostile
// answer, never a plan to stage it.
const MaxFileBytes = 1 << 40

// Check refuses a file whose path could leave the model's directory, whose
// size is negative or beyond MaxFileBytes, or that lacks the hub's
// identity of its content: the sha256 (64 hex digits) of an LFS file, or
// the git blob id (40 hex digits) of any other, which staging verifies.
func (f File) Check() error {
	if err := checkPath(f.Path); err != nil {
		return err
	}
	switch {
	case f.Size < 0:
		return fmt.Errorf("%s has size %d", f.Path, f.Size)
	case f.Size > MaxFileBytes:
		return fmt.Errorf("%s has size %d, more than the %d bytes (1 TiB) a file may have", f.Path, f.Size, int64(MaxFileBytes))
	case f.SHA256 != "" && !sha256RE.MatchString(f.SHA256):
		return fmt.Errorf("%s: sha256 %q is not 64 hex digits", f.Path, f.SHA256)
	case f.SHA256 == "" && !commitRE.MatchString(f.BlobID):
		return fmt.Errorf("%s: blob id %q is not a git object id (40 hex digits)", f.Path, f.BlobID)
	}
	return nil
}

// IsCommit reports whether rev is a full commit hash (40 lowercase hex).
func IsCommit(rev string) bool { return commitRE.MatchString(rev) }

// hubRevision is the part of the hub's answer to GET
// /api/models/{repo}/revision/{rev}?blobs=true that the manifest reads.
type hubRevision struct {
	ID       string `json:"id"`
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
		Size      *int64 `json:"size"`
		BlobID    string `json:"blobId"`
		LFS       *struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
		} `json:"lfs"`
	} `json:"siblings"`
}

// ParseHubRevision reads the hub's answer to GET
// /api/models/{repo}/revision/{rev}?blobs=true (huggingface_hub's
// model_info(..., files_metadata=True)): the commit and every file of the
// repository with its size and, for LFS files, sha256.
func ParseHubRevision(repo, revision string, data []byte) (Manifest, error) {
	var h hubRevision
	if err := json.Unmarshal(data, &h); err != nil {
		return Manifest{}, fmt.Errorf("hub revision of %s@%s: %w", repo, revision, err)
	}
	if !IsCommit(h.SHA) {
		return Manifest{}, fmt.Errorf("hub revision of %s@%s: commit %q is not a commit hash", repo, revision, h.SHA)
	}
	m := Manifest{Repo: repo, Revision: revision, Commit: h.SHA}
	for _, s := range h.Siblings {
		if err := checkPath(s.RFilename); err != nil {
			return Manifest{}, fmt.Errorf("hub revision of %s@%s: %w", repo, revision, err)
		}
		f := File{Path: s.RFilename, BlobID: strings.ToLower(s.BlobID)}
		switch {
		case s.LFS != nil:
			f.Size, f.SHA256 = s.LFS.Size, strings.ToLower(s.LFS.SHA256)
		case s.Size != nil:
			f.Size = *s.Size
		default:
			return Manifest{}, fmt.Errorf("hub revision of %s@%s: %s has no size (ask with ?blobs=true)", repo, revision, s.RFilename)
		}
		if err := f.Check(); err != nil {
			return Manifest{}, fmt.Errorf("hub revision of %s@%s: %w", repo, revision, err)
		}
		m.Files = append(m.Files, f)
	}
	slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return m, nil
}

// checkPath refuses a repository path that could leave the model's
// directory or that the probe's listing could not represent.
func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\n\r\x00\\") || path.Clean(p) != p ||
		p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("file %q: not a plain relative path", p)
	}
	return nil
}

// IndexFile is the index of a sharded safetensors checkpoint.
const IndexFile = "model.safetensors.index.json"

// weightExts are the extensions of checkpoint files: a serve needs only
// one format's, and of a sharded safetensors checkpoint only the shards
// its index names.
var weightExts = []string{".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".ot"}

func isWeight(p string) bool { return slices.Contains(weightExts, path.Ext(p)) }

// Shards returns the shard files named by a model.safetensors.index.json,
// sorted, without repeats.
func Shards(index []byte) ([]string, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", IndexFile, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: no weight_map", IndexFile)
	}
	var out []string
	for _, f := range idx.WeightMap {
		out = append(out, f)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Select narrows a repository's files to those a serve loads, as vLLM
// does: every file that is not a checkpoint file (config, tokenizer,
// generation config, chat template, code), and of the checkpoint files the
// shards index names (the content of model.safetensors.index.json, nil
// when the repository has none), else every top-level .safetensors file,
// else every top-level .bin/.pt file. Other formats and copies in
// subdirectories (original/, the PyTorch or GGUF twins) are left out.
func Select(m Manifest, index []byte) (Manifest, error) {
	var want func(File) bool
	switch {
	case index != nil:
		shards, err := Shards(index)
		if err != nil {
			return Manifest{}, fmt.Errorf("%s@%s: %w", m.Repo, m.Revision, err)
		}
		for _, s := range shards {
			if !slices.ContainsFunc(m.Files, func(f File) bool { return f.Path == s }) {
				return Manifest{}, fmt.Errorf("%s@%s: %s names shard %s, which the repository does not have", m.Repo, m.Revision, IndexFile, s)
			}
		}
		want = func(f File) bool { _, ok := slices.BinarySearch(shards, f.Path); return ok }
	case slices.ContainsFunc(m.Files, func(f File) bool { return topLevel(f.Path, ".safetensors") }):
		want = func(f File) bool { return topLevel(f.Path, ".safetensors") }
	default:
		want = func(f File) bool { return topLevel(f.Path, ".bin") || topLevel(f.Path, ".pt") }
	}
	out := m
	out.Files = nil
	for _, f := range m.Files {
		if !isWeight(f.Path) || want(f) {
			out.Files = append(out.Files, f)
		}
	}
	if !slices.ContainsFunc(out.Files, func(f File) bool { return isWeight(f.Path) }) {
		return Manifest{}, fmt.Errorf("%s@%s: no weights (no .safetensors, .bin or .pt file at the top level)", m.Repo, m.Revision)
	}
	return out, nil
}

func topLevel(p, ext string) bool { return !strings.Contains(p, "/") && path.Ext(p) == ext }
