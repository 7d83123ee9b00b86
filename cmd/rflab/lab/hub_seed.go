package lab

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// HubFile is one file of a generated repository as the hub lists it.
type HubFile struct {
	Path string
	Size int64
	// SHA256 is the content's sha256 for LFS files (the shards), "" for
	// the others; BlobID is the git blob id (of the LFS pointer for LFS
	// files).
	SHA256, BlobID string
}

// Etag is the file's name under blobs/ in a Hugging Face cache: the ETag
// the hub serves for it (X-Linked-Etag for LFS files).
func (f HubFile) Etag() string {
	if f.SHA256 != "" {
		return f.SHA256
	}
	return f.BlobID
}

// Files lists the repository's files, sorted by path.
func (r *HubRepo) Files() ([]HubFile, error) {
	if r.ensure(); r.err != nil {
		return nil, r.err
	}
	out := make([]HubFile, len(r.files))
	for i, f := range r.files {
		out[i] = HubFile{Path: f.path, Size: f.size, SHA256: f.sha256, BlobID: f.blobID}
	}
	return out, nil
}

// Bytes is the size of all the repository's files.
func (r *HubRepo) Bytes() int64 {
	var n int64
	for _, s := range r.Shards {
		n += s
	}
	if fs, err := r.Files(); err == nil {
		n = 0
		for _, f := range fs {
			n += f.Size
		}
	}
	return n
}

// WriteHFCache writes a complete copy of the repository's "main" into the
// Hugging Face hub cache at cache (HF_HUB_CACHE) as huggingface_hub 0.36's
// snapshot_download lays it out (file_download.py: blobs/ETAG, then
// snapshots/COMMIT/PATH a relative link to it, and refs/main holding the
// commit without a newline), each blob written to ETAG.incomplete and
// renamed when whole. It returns the commit.
func (r *HubRepo) WriteHFCache(cache string) (string, error) {
	files, err := r.Files()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "models--"+strings.ReplaceAll(r.ID, "/", "--"))
	snap := filepath.Join(dir, "snapshots", r.commit)
	for _, d := range []string{filepath.Join(dir, "blobs"), filepath.Join(dir, "refs"), snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	for _, f := range files {
		blob := filepath.Join(dir, "blobs", f.Etag())
		if st, err := os.Stat(blob); err != nil || st.Size() != f.Size {
			if err := r.writeBlob(blob, r.byPath[f.Path]); err != nil {
				return "", fmt.Errorf("seed %s %s into %s: %w", r.ID, f.Path, cache, err)
			}
		}
		link := filepath.Join(snap, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return "", err
		}
		target, err := filepath.Rel(filepath.Dir(link), blob)
		if err != nil {
			return "", err
		}
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(r.commit), 0o644); err != nil {
		return "", err
	}
	return r.commit, nil
}

// writeBlob writes f to path by way of path.incomplete.
func (r *HubRepo) writeBlob(path string, f *hubFile) error {
	part := path + ".incomplete"
	w, err := os.Create(part)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(w, io.NewSectionReader(f, 0, f.size), make([]byte, 1<<20)); err != nil {
		w.Close()
		os.Remove(part)
		return err
	}
	if err := w.Close(); err != nil {
		os.Remove(part)
		return err
	}
	return os.Rename(part, path)
}
