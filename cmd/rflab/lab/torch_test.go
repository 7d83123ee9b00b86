//go:build linux

package lab

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTorchLayerKeepsModTimes: the torch layer's regular files keep their
// modification time, so that the compiled modules in __pycache__, which
// record their source's, stay valid in every container and the first
// `import torch` does not compile torch again.
func TestTorchLayerKeepsModTimes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "pkg", "mod.py")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2023, 4, 9, 12, 30, 15, 0, time.UTC)
	if err := os.Chtimes(src, when, when); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimPrefix(src, "/")
	set := &torchFileSet{files: map[string]os.FileInfo{rel: fi}, symlinks: map[string]string{}}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := set.write(tw); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	tr := tar.NewReader(&buf)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == rel {
			found = true
			if !h.ModTime.Equal(when) {
				t.Errorf("%s: modification time %v in the layer, %v on disk", h.Name, h.ModTime, when)
			}
		} else if h.Typeflag == tar.TypeDir && !h.ModTime.Equal(layerEpoch) {
			t.Errorf("directory %s: %v, want the layer epoch", h.Name, h.ModTime)
		}
	}
	if !found {
		t.Fatalf("%s is not in the layer", rel)
	}
}
