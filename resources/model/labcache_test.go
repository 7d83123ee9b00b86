//go:build linux

package model

import (
	"testing"

	"github.com/rayform/rayform/engine/lab"
)

// TestLabCacheIsTheDefault: the lab's per-node cache is where a model
// block without cache_dir puts the model, so the lab's configuration needs
// no cache_dir (the two constants cannot import each other: the lab's
// tests load this package's kind).
func TestLabCacheIsTheDefault(t *testing.T) {
	if lab.ModelCacheDir != DefaultCacheDir {
		t.Errorf("lab.ModelCacheDir %q, model.DefaultCacheDir %q", lab.ModelCacheDir, DefaultCacheDir)
	}
}
