package lab

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
)

// A layer rebuilt under a new key with the same content keeps its blob when
// the old key is pruned. (Failed before: pruneOthers removed the old key's
// blob, which was the new key's too, and the next `lab up -torch` failed
// with "registry storage for ...: open .../blobs/sha256/...: no such file
// or directory" after an apt-get run changed the torch layer's key.)
func TestPruneOthersKeepsASharedBlob(t *testing.T) {
	c := imageCache{dir: t.TempDir()}
	fill := func(tw *tar.Writer) error {
		body := []byte("same content\n")
		if err := tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: int64(len(body))}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	old, err := c.layer("v9-torch-old", gzip.BestSpeed, fill)
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.layer("v9-torch-other", gzip.BestSpeed, func(tw *tar.Writer) error {
		return tw.WriteHeader(&tar.Header{Name: "g", Mode: 0o644})
	})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := c.layer("v9-torch-new", gzip.BestSpeed, fill)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Digest != old.Digest {
		t.Fatalf("same content, digests %s and %s", old.Digest, cur.Digest)
	}
	c.pruneOthers("v9-torch-", "new")
	if _, err := os.Stat(c.blobPath(cur.Digest)); err != nil {
		t.Errorf("the kept layer's blob: %v", err)
	}
	if _, err := os.Stat(c.blobPath(other.Digest)); err == nil {
		t.Errorf("the other layer's blob %s is still there", other.Digest)
	}
	for _, k := range []string{"v9-torch-old", "v9-torch-other"} {
		if _, err := os.Stat(filepath.Join(c.dir, "layers", k+".json")); err == nil {
			t.Errorf("%s is still in the cache", k)
		}
	}
}
