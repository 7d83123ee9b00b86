package observe

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestProbeStatsFiles runs the real probe's file sections: an existing
// file's mtime, a missing file, and the host's clock to compare them with.
func TestProbeStatsFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the probe on this machine")
	}
	dir, err := os.MkdirTemp("", "rfstat")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "serve-qwen.pid")
	if err := os.WriteFile(file, []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(1796130000, 0).UTC()
	if err := os.Chtimes(file, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent")
	spec := HostSpec{Files: []string{file, missing, "relative/bad"}}
	if err := spec.Validate(); err == nil {
		t.Error("a relative path validates")
	}
	f, err := Parse(runLocal(t, ProbeScript(spec), toolDir(t, "stat", "date", "timeout")))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Files[file]; !got.Exists || !got.ModTime.Equal(mtime) || got.Err != "" {
		t.Errorf("%s: %+v, want mtime %s", file, got, mtime)
	}
	if got, ok := f.Files[missing]; !ok || got.Exists || got.Err != "" {
		t.Errorf("%s: %+v (reported %v), want not existing", missing, got, ok)
	}
	if _, ok := f.Files["relative/bad"]; ok {
		t.Error("an invalid path reached the script")
	}
	if d := time.Since(f.Clock); f.Clock.IsZero() || d < -time.Minute || d > time.Minute {
		t.Errorf("host clock %s, want about now", f.Clock)
	}
}
