package model

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/observe"
)

// TestDecide: which node is the source, who receives, who downloads, the
// lines plan prints, and the disk errors that stop apply.
func TestDecide(t *testing.T) {
	m := tinyManifest(t)
	lay := func(n string) Layout { return HFCacheLayout("/data/"+n, m.Repo) }
	ref := observe.TreeFile{Path: "refs/main", Size: 40}
	full := func(n string) NodeCopy {
		return NodeCopy{Node: n, Layout: lay(n), Tree: listing(m, lay(n), func(f File) (int64, bool) { return f.Size, true }, ref)}
	}
	empty := func(n string, free int64) NodeCopy {
		return NodeCopy{Node: n, Layout: lay(n), Tree: observe.TreeFacts{FreeBytes: free}}
	}
	half := func(n string) NodeCopy {
		return NodeCopy{Node: n, Layout: lay(n), Tree: listing(m, lay(n), func(f File) (int64, bool) { return f.Size, f.Path != "model-00001-of-00002.safetensors" }, ref)}
	}
	for _, tc := range []struct {
		name      string
		nodes     []NodeCopy
		source    string
		download  string
		receivers string
		lines     string
		errors    string
	}{
		{
			name:   "only the head has it",
			nodes:  []NodeCopy{full("spark1"), empty("spark2", 100e9), empty("spark3", 100e9)},
			source: "spark1", receivers: "spark2 spark3",
			lines: "spark1: complete|spark2: absent, 5.5 GB to stage from spark1 over the fabric (100.0 GB free)|spark3: absent, 5.5 GB to stage from spark1 over the fabric (100.0 GB free)",
		},
		{
			name:   "every node has it",
			nodes:  []NodeCopy{full("spark1"), full("spark2")},
			source: "spark1",
			lines:  "spark1: complete|spark2: complete",
		},
		{
			name:     "none has it: the one with the most downloads",
			nodes:    []NodeCopy{empty("spark1", 100e9), half("spark2")},
			download: "spark2", receivers: "spark1 spark2",
			lines: "spark1: absent, 5.5 GB to stage from spark2 over the fabric, once it has downloaded it (100.0 GB free)|spark2: partial, 1 file missing, 4.0 GB to stage, downloaded from the hub (100.0 GB free)",
		},
		{
			name:   "a worker without the space",
			nodes:  []NodeCopy{full("spark1"), empty("spark2", 1e9)},
			source: "spark1", receivers: "spark2",
			lines:  "spark1: complete|spark2: absent, 5.5 GB to stage from spark1 over the fabric (1.0 GB free)",
			errors: "spark2: 5.5 GB to stage into /data/spark2/models--org--tiny, but its filesystem has 1.0 GB free; free 4.5 GB there or set the model's cache_dir to a larger filesystem",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(m, tc.nodes)
			if d.Source != tc.source || d.Download != tc.download || strings.Join(d.Receivers, " ") != tc.receivers {
				t.Errorf("source %q download %q receivers %q, want %q %q %q", d.Source, d.Download, d.Receivers, tc.source, tc.download, tc.receivers)
			}
			if got := strings.Join(d.Lines(), "|"); got != tc.lines {
				t.Errorf("lines\n got %s\nwant %s", got, tc.lines)
			}
			if got := strings.Join(d.Errors, "|"); got != tc.errors {
				t.Errorf("errors\n got %s\nwant %s", got, tc.errors)
			}
		})
	}
}

// TestCopies reads each node's tree from its facts, an unobserved node as
// not observed, and Decide plans from them.
func TestCopies(t *testing.T) {
	mf := tinyManifest(t)
	md := &Model{Source: mf.Repo, CacheDir: "/data/hub"}
	l := Layout{Dir: md.Dir(), HFCache: true}
	facts := map[string]*observe.HostFacts{
		"spark1": {Trees: map[string]observe.TreeFacts{l.Dir: listing(mf, l, func(f File) (int64, bool) { return f.Size, true }, observe.TreeFile{Path: "refs/main", Size: 40})}},
		"spark2": {Trees: map[string]observe.TreeFacts{l.Dir: {FreeBytes: 50e9}}},
	}
	cs := md.Copies([]string{"spark1", "spark2", "spark3"}, func(n string) *observe.HostFacts { return facts[n] })
	d := Decide(mf, cs)
	want := "spark1: complete|spark2: absent, 5.5 GB to stage from spark1 over the fabric (50.0 GB free)|spark3: absent, 5.5 GB to stage from spark1 over the fabric; listing incomplete: not observed"
	if got := strings.Join(d.Lines(), "|"); got != want {
		t.Errorf("lines\n got %s\nwant %s", got, want)
	}
}
