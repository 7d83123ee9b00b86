//go:build linux

package model

import (
	"testing"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// TestLabCacheIsTheDefault: the lab's per-node cache is where a model
// block without cache_dir puts the model, so the lab's configuration needs
// no cache_dir (cmd/rflab/lab cannot use this package's constant: this
// package's tests import the lab).
func TestLabCacheIsTheDefault(t *testing.T) {
	if lab.ModelCacheDir != DefaultCacheDir {
		t.Errorf("lab.ModelCacheDir %q, model.DefaultCacheDir %q", lab.ModelCacheDir, DefaultCacheDir)
	}
}
