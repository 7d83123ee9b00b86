package observe

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestProbeListsTrees runs the real probe's tree sections on a Hugging Face
// cache layout (snapshot files are links into blobs/), a directory that
// does not exist (its free space is its parent's), and a path the spec
// refuses.
func TestProbeListsTrees(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the probe on this machine")
	}
	dir := t.TempDir()
	repo := filepath.Join(dir, "models--org--tiny")
	for _, d := range []string{"blobs", "refs", "snapshots/c0ffee"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, data string) {
		if err := os.WriteFile(filepath.Join(repo, rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, rel string) {
		if err := os.Symlink(target, filepath.Join(repo, rel)); err != nil {
			t.Fatal(err)
		}
	}
	write("blobs/aaa", "{\"a\": 1}\n")
	write("blobs/bbb.incomplete", "12345")
	write("refs/main", "c0ffee")
	link("../../blobs/aaa", "snapshots/c0ffee/config.json")
	link("../../blobs/bbb", "snapshots/c0ffee/model.safetensors")
	// A link out of the tree: listed by its size, never read for an id.
	outside := filepath.Join(dir, "outside")
	if err := os.WriteFile(outside, []byte("not the tree's"), 0o600); err != nil {
		t.Fatal(err)
	}
	link(outside, "snapshots/c0ffee/tokenizer.json")
	missing := filepath.Join(dir, "models--org--absent")

	spec := HostSpec{Trees: []string{repo, missing, "relative/bad"}}
	if err := spec.Validate(); err == nil {
		t.Error("a relative tree validates")
	}
	f, err := Parse(runLocal(t, ProbeScript(spec), toolDir(t, "find", "df", "timeout", "sha1sum", "wc", "cat", "sh")))
	if err != nil {
		t.Fatal(err)
	}
	got := f.Trees[repo]
	if !got.Exists || got.Err != "" || got.FreeBytes <= 0 || got.FreeErr != "" {
		t.Fatalf("%s: %+v, want an existing tree with free space", repo, got)
	}
	slices.SortFunc(got.Files, func(a, b TreeFile) int {
		if a.Path < b.Path {
			return -1
		}
		return 1
	})
	want := []TreeFile{
		{Path: "blobs/aaa", Size: 9},
		{Path: "blobs/bbb.incomplete", Size: 5},
		{Path: "refs/main", Size: 6},
		{Path: "snapshots/c0ffee/config.json", Size: 9},
		{Path: "snapshots/c0ffee/model.safetensors", Size: int64(len("../../blobs/bbb")), Dangling: true},
		{Path: "snapshots/c0ffee/tokenizer.json", Size: int64(len("not the tree's"))},
	}
	if d := diffJSON(got.Files, want); d != "" {
		t.Errorf("files:\n%s", d)
	}
	// git hash-object of each regular file, as the hub publishes it.
	wantIDs := map[string]string{}
	for _, p := range []string{"blobs/aaa", "blobs/bbb.incomplete", "refs/main"} {
		data, err := os.ReadFile(filepath.Join(repo, p))
		if err != nil {
			t.Fatal(err)
		}
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", len(data))
		h.Write(data)
		wantIDs[p] = hex.EncodeToString(h.Sum(nil))
	}
	wantLinks := map[string]string{
		"snapshots/c0ffee/config.json":       "../../blobs/aaa",
		"snapshots/c0ffee/model.safetensors": "../../blobs/bbb",
		"snapshots/c0ffee/tokenizer.json":    outside,
	}
	if !got.Hashed || got.IDsErr != "" {
		t.Errorf("hashed %v, %q", got.Hashed, got.IDsErr)
	}
	if d := diffJSON(got.IDs, wantIDs); d != "" {
		t.Errorf("ids:\n%s", d)
	}
	if d := diffJSON(got.Links, wantLinks); d != "" {
		t.Errorf("links:\n%s", d)
	}
	abs := f.Trees[missing]
	if abs.Exists || abs.Err != "" || len(abs.Files) != 0 || abs.FreeBytes <= 0 {
		t.Errorf("%s: %+v, want absent with its parent's free space", missing, abs)
	}
	if _, ok := f.Trees["relative/bad"]; ok {
		t.Error("an invalid path reached the script")
	}
}

// TestParseTree reads tree and free sections as hosts print them.
func TestParseTree(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tree, free string
		treeRC     int
		treeErr    string
		want       TreeFacts
	}{
		{
			name: "listing and free",
			tree: "f 10 a/b c.json\nl 7 gone\n",
			free: "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/sda1 100 40 60 40% /\n",
			want: TreeFacts{Exists: true, Files: []TreeFile{{Path: "a/b c.json", Size: 10}, {Path: "gone", Size: 7, Dangling: true}}, FreeBytes: 60 * 1024},
		},
		{
			name:    "absent",
			treeRC:  1,
			treeErr: "find: '/x': No such file or directory",
			free:    "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/sda1 100 40 60 40% /\n",
			want:    TreeFacts{FreeBytes: 60 * 1024},
		},
		{
			name:    "unreadable subdirectory keeps what was read",
			tree:    "f 3 ok\n",
			treeRC:  1,
			treeErr: "find: '/x/priv': Permission denied",
			free:    "garbage",
			want:    TreeFacts{Exists: true, Files: []TreeFile{{Path: "ok", Size: 3}}, Err: "find: '/x/priv': Permission denied", FreeBytes: -1, FreeErr: "df: no filesystem line"},
		},
		{
			name: "malformed line",
			tree: "f x y\n",
			free: "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/sda1 100 40 sixty 40% /\n",
			want: TreeFacts{Exists: true, Err: "find: unreadable line \"f x y\"", FreeBytes: -1, FreeErr: "df: available \"sixty\""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOut().sec(secTree+" path=/x", tc.tree, tc.treeErr, tc.treeRC).sec(secFree+" path=/x", tc.free, "", 0)
			f, err := Parse(o.done())
			if err != nil {
				t.Fatal(err)
			}
			if d := diffJSON(f.Trees["/x"], tc.want); d != "" {
				t.Error(d)
			}
		})
	}
}
