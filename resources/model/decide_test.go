package model

import (
	"maps"
	"net/netip"
	"slices"
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
			var source string
			for _, r := range d.Receivers {
				if f := d.From[r]; f != "" && !slices.Contains(d.Downloads, f) {
					source = f
				}
			}
			if tc.source != "" && len(d.Receivers) == 0 {
				source = tc.source // no receiver: every node is a source
			}
			if source != tc.source || strings.Join(d.Downloads, " ") != tc.download || strings.Join(d.Receivers, " ") != tc.receivers {
				t.Errorf("source %q downloads %q receivers %q, want %q %q %q", source, d.Downloads, d.Receivers, tc.source, tc.download, tc.receivers)
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

// TestDecideNetworks: two clusters on two networks serve the model. A
// receiver gets it from a complete node whose fabric address is in its
// own network's subnet; a network without a complete copy downloads it
// from the hub once (the node holding the most), its other nodes
// receiving from that one; each line names the source.
func TestDecideNetworks(t *testing.T) {
	m := tinyManifest(t)
	lay := func(n string) Layout { return HFCacheLayout("/data/"+n, m.Repo) }
	ref := observe.TreeFile{Path: "refs/main", Size: 40}
	netA, netB := netip.MustParsePrefix("10.10.0.0/24"), netip.MustParsePrefix("10.20.0.0/24")
	at := func(n string) (string, netip.Prefix, netip.Addr) {
		switch n[0] {
		case 'a':
			return "a", netA, netip.MustParseAddr("10.10.0." + n[1:])
		case 's': // network b declared again under another name
			return "same", netB, netip.MustParseAddr("10.20.0.1" + n[1:])
		}
		return "b", netB, netip.MustParseAddr("10.20.0." + n[1:])
	}
	node := func(n string, tree observe.TreeFacts) NodeCopy {
		name, sub, addr := at(n)
		return NodeCopy{Node: n, Layout: lay(n), Tree: tree, Net: name, Subnet: sub, Addr: addr}
	}
	full := func(n string) NodeCopy {
		return node(n, listing(m, lay(n), func(f File) (int64, bool) { return f.Size, true }, ref))
	}
	empty := func(n string) NodeCopy { return node(n, observe.TreeFacts{FreeBytes: 100e9}) }
	half := func(n string) NodeCopy {
		return node(n, listing(m, lay(n), func(f File) (int64, bool) { return f.Size, f.Path != "model-00001-of-00002.safetensors" }, ref))
	}
	for _, tc := range []struct {
		name      string
		nodes     []NodeCopy
		downloads string
		from      string // receiver<-source, sorted by receiver
		lines     string
	}{
		{
			name:  "each network has a complete copy",
			nodes: []NodeCopy{full("a1"), empty("a2"), full("b1"), empty("b2")},
			from:  "a2<-a1 b2<-b1",
			lines: "a1: complete|a2: absent, 5.5 GB to stage from a1 over network a (100.0 GB free)|b1: complete|b2: absent, 5.5 GB to stage from b1 over network b (100.0 GB free)",
		},
		{
			name:      "only network a has it: network b downloads once",
			nodes:     []NodeCopy{full("a1"), empty("a2"), empty("b1"), half("b2"), empty("b3")},
			downloads: "b2", from: "a2<-a1 b1<-b2 b3<-b2",
			lines: "a1: complete|a2: absent, 5.5 GB to stage from a1 over network a (100.0 GB free)" +
				"|b1: absent, 5.5 GB to stage from b2 over network b, once it has downloaded it (100.0 GB free)" +
				"|b2: partial, 1 file missing, 4.0 GB to stage, downloaded from the hub (100.0 GB free)" +
				"|b3: absent, 5.5 GB to stage from b2 over network b, once it has downloaded it (100.0 GB free)",
		},
		{
			name:      "no network has it: one download per network",
			nodes:     []NodeCopy{empty("a1"), empty("a2"), empty("b1"), empty("b2")},
			downloads: "a1 b1", from: "a2<-a1 b2<-b1",
			lines: "a1: absent, 5.5 GB to stage, downloaded from the hub (100.0 GB free)|a2: absent, 5.5 GB to stage from a1 over network a, once it has downloaded it (100.0 GB free)" +
				"|b1: absent, 5.5 GB to stage, downloaded from the hub (100.0 GB free)|b2: absent, 5.5 GB to stage from b1 over network b, once it has downloaded it (100.0 GB free)",
		},
		{
			name:  "a network of the same subnet under another name",
			nodes: []NodeCopy{full("b1"), empty("s1")},
			from:  "s1<-b1",
			lines: "b1: complete|s1: absent, 5.5 GB to stage from b1 over the fabric (100.0 GB free)", // one subnet: one fabric
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(m, tc.nodes)
			var from []string
			for _, r := range slices.Sorted(maps.Keys(d.From)) {
				from = append(from, r+"<-"+d.From[r])
			}
			if got := strings.Join(from, " "); got != tc.from {
				t.Errorf("from %q, want %q", got, tc.from)
			}
			if got := strings.Join(d.Downloads, " "); got != tc.downloads {
				t.Errorf("downloads %q, want %q", got, tc.downloads)
			}
			if got := strings.Join(d.Lines(), "|"); got != tc.lines {
				t.Errorf("lines\n got %s\nwant %s", got, tc.lines)
			}
		})
	}
}
