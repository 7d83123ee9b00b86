package model

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/observe"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

// hubAnswer is shaped like the hub's GET /api/models/{repo}/revision/{rev}
// ?blobs=true: LFS files carry lfs.sha256 and lfs.size, others size and
// blobId only.
const hubAnswer = `{
  "_id": "x", "id": "org/tiny", "sha": "` + commit + `",
  "siblings": [
    {"rfilename": ".gitattributes", "size": 1519, "blobId": "a6344aac8c09253b3b630fb776ae94478aa0275b"},
    {"rfilename": "config.json", "size": 700, "blobId": "b1c2d3e4f5a6b1c2d3e4f5a6b1c2d3e4f5a6b1c2"},
    {"rfilename": "model-00001-of-00002.safetensors", "size": 4000000000, "blobId": "c1c2d3e4f5a6b1c2d3e4f5a6b1c2d3e4f5a6b1c2",
     "lfs": {"sha256": "AAAA000000000000000000000000000000000000000000000000000000000001", "size": 4000000000, "pointerSize": 135}},
    {"rfilename": "model-00002-of-00002.safetensors", "size": 1500000000, "blobId": "d1c2d3e4f5a6b1c2d3e4f5a6b1c2d3e4f5a6b1c2",
     "lfs": {"sha256": "aaaa000000000000000000000000000000000000000000000000000000000002", "size": 1500000000, "pointerSize": 135}},
    {"rfilename": "model.safetensors.index.json", "size": 25000, "blobId": "e1c2d3e4f5a6b1c2d3e4f5a6b1c2d3e4f5a6b1c2"},
    {"rfilename": "original/consolidated.00.pth", "size": 5500000000, "blobId": "f1c2d3e4f5a6b1c2d3e4f5a6b1c2d3e4f5a6b1c2",
     "lfs": {"sha256": "aaaa000000000000000000000000000000000000000000000000000000000003", "size": 5500000000, "pointerSize": 135}},
    {"rfilename": "tokenizer.json", "size": 9000000, "blobId": "0102d3e4f5a6b1c2d3e4f5a6b1c2d3e4f5a6b1c2"}
  ]
}`

const index = `{"metadata": {"total_size": 5499000000}, "weight_map": {
  "a.weight": "model-00001-of-00002.safetensors",
  "b.weight": "model-00002-of-00002.safetensors",
  "c.weight": "model-00001-of-00002.safetensors"}}`

func tinyManifest(t *testing.T) Manifest {
	t.Helper()
	m, err := ParseHubRevision("org/tiny", "main", []byte(hubAnswer))
	if err != nil {
		t.Fatal(err)
	}
	m, err = Select(m, []byte(index))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func paths(fs []File) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return strings.Join(out, " ")
}

// TestManifestFromHub reads the hub's revision answer and keeps what a
// serve loads: every non-checkpoint file and the shards the index names,
// not the original/ PyTorch twin.
func TestManifestFromHub(t *testing.T) {
	m := tinyManifest(t)
	if m.Commit != commit || m.Revision != "main" || m.Repo != "org/tiny" {
		t.Errorf("manifest %+v", m)
	}
	want := ".gitattributes config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json tokenizer.json"
	if got := paths(m.Files); got != want {
		t.Errorf("files %q, want %q", got, want)
	}
	if got := m.Files[2]; got.SHA256 != "aaaa000000000000000000000000000000000000000000000000000000000001" || got.Blob() != got.SHA256 || got.Size != 4e9 {
		t.Errorf("shard 1: %+v, want its lowercased sha256 as blob", got)
	}
	if got := m.Files[1]; got.SHA256 != "" || got.Blob() != "b1c2d3e4f5a6b1c2d3e4f5a6b1c2d3e4f5a6b1c2" {
		t.Errorf("config.json: %+v, want its blob id as blob", got)
	}
}

// TestManifestErrors: each way a hub answer or an index can be unusable.
func TestManifestErrors(t *testing.T) {
	base, err := ParseHubRevision("org/tiny", "main", []byte(hubAnswer))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, answer, index, want string
	}{
		{name: "not json", answer: "<html>", want: "hub revision of org/tiny@main"},
		{name: "no commit", answer: `{"sha": "main", "siblings": []}`, want: `commit "main" is not a commit hash`},
		{name: "no size", answer: `{"sha": "` + commit + `", "siblings": [{"rfilename": "a", "blobId": "ab"}]}`, want: "a has no size (ask with ?blobs=true)"},
		{name: "escaping path", answer: `{"sha": "` + commit + `", "siblings": [{"rfilename": "../x", "size": 1, "blobId": "ab"}]}`, want: `file "../x": not a plain relative path`},
		{name: "negative size", answer: sibling(`"size": -232, "blobId": "` + blob40 + `"`), want: "config.json has size -232"},
		{name: "negative LFS size", answer: sibling(`"size": 5, "blobId": "` + blob40 + `", "lfs": {"sha256": "` + sha64 + `", "size": -1}`), want: "config.json has size -1"},
		{name: "absurd size", answer: sibling(`"size": 4611686018427387904, "blobId": "` + blob40 + `"`), want: "config.json has size 4611686018427387904, more than "},
		{name: "blob id not a git object id", answer: sibling(`"size": 5, "blobId": "ab"`), want: `config.json: blob id "ab" is not a git object id (40 hex digits)`},
		{name: "sha256 not a sha256", answer: sibling(`"size": 5, "blobId": "` + blob40 + `", "lfs": {"sha256": "abcd", "size": 5}`), want: `config.json: sha256 "abcd" is not 64 hex digits`},
		{name: "shard not in repo", index: `{"weight_map": {"a": "model-00009-of-00009.safetensors"}}`, want: "names shard model-00009-of-00009.safetensors, which the repository does not have"},
		{name: "empty index", index: `{"weight_map": {}}`, want: "no weight_map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.answer != "" {
				_, err = ParseHubRevision("org/tiny", "main", []byte(tc.answer))
			} else {
				_, err = Select(base, []byte(tc.index))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	noWeights := Manifest{Repo: "org/x", Revision: "main", Files: []File{{Path: "config.json", Size: 1, BlobID: "ab"}}}
	if _, err := Select(noWeights, nil); err == nil || !strings.Contains(err.Error(), "no weights") {
		t.Errorf("a repository without weights: %v", err)
	}
	single := Manifest{Files: []File{{Path: "model.safetensors", Size: 1}, {Path: "pytorch_model.bin", Size: 1}, {Path: "config.json", Size: 1}}}
	got, err := Select(single, nil)
	if err != nil || paths(got.Files) != "model.safetensors config.json" {
		t.Errorf("without an index: %q, %v; want the safetensors file and config.json", paths(got.Files), err)
	}
}

// listing builds the probe's answer for a cache directory: each present
// file of m with its size (or another), plus extra entries.
func listing(m Manifest, l Layout, size func(File) (int64, bool), extra ...observe.TreeFile) observe.TreeFacts {
	t := observe.TreeFacts{Exists: true, FreeBytes: 100e9}
	for _, f := range m.Files {
		if n, ok := size(f); ok {
			t.Files = append(t.Files, observe.TreeFile{Path: l.FilePath(m, f), Size: n})
			if l.HFCache {
				t.Files = append(t.Files, observe.TreeFile{Path: l.StorePath(m, f), Size: n})
			}
		}
	}
	t.Files = append(t.Files, extra...)
	return t
}

// TestJudge is the judgment of a node's copy, per layout and state.
func TestJudge(t *testing.T) {
	m := tinyManifest(t)
	hf := HFCacheLayout("/data/hf/hub", "org/tiny")
	plain := Layout{Dir: "/models/tiny"}
	all := func(f File) (int64, bool) { return f.Size, true }
	none := func(File) (int64, bool) { return 0, false }
	isShard2 := func(f File) bool { return f.Path == "model-00002-of-00002.safetensors" }
	ref := observe.TreeFile{Path: "refs/main", Size: 40}
	shard2 := m.Files[3]
	if !isShard2(shard2) {
		t.Fatal("fixture order changed")
	}
	for _, tc := range []struct {
		name   string
		layout Layout
		tree   observe.TreeFacts
		state  State
		text   string
		need   int64
		fits   bool
	}{
		{
			name: "complete in the cache", layout: hf, tree: listing(m, hf, all, ref),
			state: Complete, text: "complete", fits: true,
		},
		{
			name: "complete in a plain directory", layout: plain, tree: listing(m, plain, all),
			state: Complete, text: "complete", fits: true,
		},
		{
			name: "absent: no directory", layout: hf, tree: observe.TreeFacts{FreeBytes: 100e9},
			state: Absent, text: "absent, 5.5 GB to stage", need: m.Bytes(), fits: true,
		},
		{
			name: "absent: another revision only", layout: hf,
			tree:  observe.TreeFacts{Exists: true, FreeBytes: 100e9, Files: []observe.TreeFile{{Path: "snapshots/ffff/config.json", Size: 700}, {Path: "refs/main", Size: 40}}},
			state: Absent, text: "absent, 5.5 GB to stage", need: m.Bytes(), fits: true,
		},
		{
			name: "partial: a shard missing", layout: hf,
			tree:  listing(m, hf, func(f File) (int64, bool) { return f.Size, !isShard2(f) }, ref),
			state: Partial, text: "partial, 1 file missing, 1.5 GB to stage", need: 1.5e9, fits: true,
		},
		{
			name: "partial: a shard half transferred resumes", layout: hf,
			tree: listing(m, hf, func(f File) (int64, bool) { return f.Size, !isShard2(f) }, ref,
				observe.TreeFile{Path: "blobs/" + shard2.SHA256 + PartialSuffix, Size: 1e9}),
			state: Partial, text: "partial, 1 file missing, 500.0 MB to stage (1.0 GB already transferred)", need: 0.5e9, fits: true,
		},
		{
			name: "partial: only a partial file", layout: hf,
			tree:  listing(m, hf, none, observe.TreeFile{Path: "blobs/" + shard2.SHA256 + PartialSuffix, Size: 1e9}),
			state: Partial, need: m.Bytes() - 1e9, fits: true,
			text: "partial, 6 files missing, revision ref missing, 4.5 GB to stage (1.0 GB already transferred)",
		},
		{
			name: "partial: a truncated shard is re-fetched", layout: plain,
			tree: listing(m, plain, func(f File) (int64, bool) {
				if isShard2(f) {
					return 7, true
				}
				return f.Size, true
			}),
			state: Partial, text: "partial, 1 file missing (1 with the wrong size), 1.5 GB to stage", need: 1.5e9, fits: true,
		},
		{
			name: "partial: the snapshot link and the ref missing", layout: hf,
			tree: func() observe.TreeFacts {
				tr := listing(m, hf, all)
				// drop shard 2's snapshot link, keep its blob
				kept := tr.Files[:0]
				for _, f := range tr.Files {
					if f.Path != hf.FilePath(m, shard2) {
						kept = append(kept, f)
					}
				}
				tr.Files = kept
				return tr
			}(),
			state: Partial, text: "partial, 1 snapshot link(s) missing, revision ref missing", fits: true,
		},
		{
			name: "partial: a dangling snapshot link", layout: hf,
			tree: func() observe.TreeFacts {
				tr := listing(m, hf, func(f File) (int64, bool) { return f.Size, !isShard2(f) }, ref)
				tr.Files = append(tr.Files, observe.TreeFile{Path: hf.FilePath(m, shard2), Size: 80, Dangling: true})
				return tr
			}(),
			state: Partial, text: "partial, 1 file missing, 1.5 GB to stage", need: 1.5e9, fits: true,
		},
		{
			name: "absent on a full disk", layout: hf, tree: observe.TreeFacts{FreeBytes: 2e9},
			state: Absent, text: "absent, 5.5 GB to stage", need: m.Bytes(), fits: false,
		},
		{
			name: "free space unknown", layout: hf, tree: observe.TreeFacts{FreeBytes: -1},
			state: Absent, text: "absent, 5.5 GB to stage", need: m.Bytes(), fits: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := Judge(m, tc.layout, tc.tree)
			if j.State != tc.state || j.String() != tc.text || j.NeedBytes != tc.need || j.Fits() != tc.fits {
				b, _ := json.MarshalIndent(j, "", "  ")
				t.Errorf("got %s %q need %d fits %v, want %s %q need %d fits %v\n%s",
					j.State, j, j.NeedBytes, j.Fits(), tc.state, tc.text, tc.need, tc.fits, b)
			}
			if msg := j.DiskError(tc.layout.Dir); (msg == "") != tc.fits {
				t.Errorf("disk error %q with fits %v", msg, tc.fits)
			}
		})
	}
}

// TestDiskError names the sizes, the directory and both fixes.
func TestDiskError(t *testing.T) {
	j := Judgment{NeedBytes: 120e9, FreeBytes: 80e9}
	want := "120.0 GB to stage into /data/hf/hub/models--org--big, but its filesystem has 80.0 GB free; free 40.0 GB there or set the model's cache_dir to a larger filesystem"
	if got := j.DiskError("/data/hf/hub/models--org--big"); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestNames(t *testing.T) {
	for id, ok := range map[string]bool{"Qwen/Qwen3-0.6B": true, "org/x": true, "x": false, "a/b/c": false, "../x": false, "a--b/c": false, "org/.x": false} {
		if ValidRepo(id) != ok {
			t.Errorf("ValidRepo(%q) = %v", id, !ok)
		}
	}
	if got := CacheDirName("Qwen/Qwen3-0.6B"); got != "models--Qwen--Qwen3-0.6B" {
		t.Errorf("cache dir %q", got)
	}
	if !IsCommit(commit) || IsCommit("main") {
		t.Error("IsCommit")
	}
}

const (
	blob40 = "0123456789abcdef0123456789abcdef01234567"
	sha64  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// sibling is a hub answer with one file, config.json, of these fields.
func sibling(fields string) string {
	return `{"sha": "` + commit + `", "siblings": [{"rfilename": "config.json", ` + fields + `}]}`
}
