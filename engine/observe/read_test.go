package observe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbeReadsFiles runs the real probe's read sections on this machine:
// a file's exact content (no trailing newline added or lost), a file found
// through a ref file as in a Hugging Face cache (refs/main names the
// snapshot), a missing file, a missing ref, a ref that is not one word, a
// file over the bound, a file of exactly the bound, and requests Validate
// rejects, which never reach the script.
func TestProbeReadsFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the probe on this machine")
	}
	dir := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	config := "{\n  \"num_attention_heads\": 32\n}" // no final newline
	plain := write("model/config.json", config)
	repo := filepath.Join(dir, "hub/models--org--name")
	write("hub/models--org--name/refs/main", "0123abcd\n")
	// As huggingface_hub lays it out: the snapshot's file is a relative
	// symlink to a blob.
	write("hub/models--org--name/blobs/5d1e0f", config+"\n")
	if err := os.MkdirAll(filepath.Join(repo, "snapshots/0123abcd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../blobs/5d1e0f", filepath.Join(repo, "snapshots/0123abcd/config.json")); err != nil {
		t.Fatal(err)
	}
	write("hub/models--bad--ref/refs/main", "../../etc\n")
	big := write("big.json", strings.Repeat("x", 101))
	exact := write("exact.json", strings.Repeat("y", 100))

	viaRef := ReadProbe{Path: repo + "/snapshots/{ref}/config.json", Ref: repo + "/refs/main"}
	noRef := ReadProbe{Path: dir + "/hub/models--no--ref/snapshots/{ref}/config.json", Ref: dir + "/hub/models--no--ref/refs/main"}
	badRef := ReadProbe{Path: dir + "/hub/models--bad--ref/snapshots/{ref}/config.json", Ref: dir + "/hub/models--bad--ref/refs/main"}
	missing := ReadProbe{Path: dir + "/model/absent.json"}
	invalid := []ReadProbe{
		{Path: "relative/config.json"},
		{Path: dir + "/../etc/passwd"},
		{Path: dir + "/a/{ref}/{ref}/x", Ref: dir + "/r"},
		{Path: dir + "/no-placeholder", Ref: dir + "/r"},
		{Path: plain, Max: MaxReadMax + 1},
	}
	spec := HostSpec{Reads: append([]ReadProbe{
		{Path: plain}, viaRef, noRef, badRef, missing,
		{Path: big, Max: 100}, {Path: exact, Max: 100},
	}, invalid...)}
	err := spec.Validate()
	if err == nil {
		t.Fatal("invalid reads validate")
	}
	for _, r := range invalid {
		if !strings.Contains(err.Error(), r.Path) {
			t.Errorf("Validate does not name %q: %v", r.Path, err)
		}
	}
	script := ProbeScript(spec)
	for _, r := range invalid[:2] {
		if strings.Contains(script, r.Path) {
			t.Errorf("invalid read %q reached the script", r.Path)
		}
	}
	f, err := Parse(runLocal(t, script, toolDir(t, "head", "timeout")))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ReadResult{
		plain:         {Exists: true, Content: config},
		viaRef.Key():  {Exists: true, Ref: "0123abcd", Content: config + "\n"},
		noRef.Key():   {},
		badRef.Key():  {Err: badRef.Ref + ": not one word"},
		missing.Key(): {},
		big:           {Exists: true, Truncated: true, Content: strings.Repeat("x", 100)},
		exact:         {Exists: true, Content: strings.Repeat("y", 100)},
	}
	for k, w := range want {
		got, ok := f.Reads[k]
		if !ok {
			t.Errorf("%s: no answer", k)
			continue
		}
		if got != w {
			t.Errorf("%s:\n got %+v\nwant %+v", k, got, w)
		}
	}
	if len(f.Reads) != len(want) {
		t.Errorf("%d answers, want %d: %+v", len(f.Reads), len(want), f.Reads)
	}
}

// TestProbeReadWithoutHead: a host without head(1) reports it on the read,
// not as a missing file.
func TestProbeReadWithoutHead(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the probe on this machine")
	}
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(runLocal(t, ProbeScript(HostSpec{Reads: []ReadProbe{{Path: p}}}), toolDir(t, "timeout")))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Reads[p]; got.Exists || got.Err != "head: not installed" {
		t.Errorf("got %+v, want the error head: not installed", got)
	}
}
