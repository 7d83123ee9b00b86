package model

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

// observeTrees runs observe's real probe of each node's layout and
// returns the facts by node.
func observeTrees(t *testing.T, layouts map[string]Layout) map[string]*observe.HostFacts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]*observe.HostFacts{}
	for n, l := range layouts {
		res, err := local.New(local.Options{}).Run(ctx, transportCmd(observe.ProbeScript(observe.HostSpec{Trees: []string{l.Dir}})))
		if err != nil {
			t.Fatal(err)
		}
		f, err := observe.Parse(res.Stdout)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = f
	}
	return out
}

// recHooks records what apply reports.
type recHooks struct {
	mu    sync.Mutex
	lines []string
}

func (h *recHooks) add(s string) { h.mu.Lock(); h.lines = append(h.lines, s); h.mu.Unlock() }
func (h *recHooks) ResourceStart(addr string, a plan.Action) {
	h.add("start " + addr)
}
func (h *recHooks) StepStart(addr, step string)   { h.add("step " + step) }
func (h *recHooks) StepSkipped(addr, step string) { h.add("skipped " + step) }
func (h *recHooks) Progress(addr, msg string)     { h.add("progress " + msg) }
func (h *recHooks) ResourceComplete(addr string, a plan.Action, _ time.Duration) {
	h.add("complete " + addr)
}
func (h *recHooks) ResourceErrored(addr string, a plan.Action, _ time.Duration, err error) {
	h.add("errored " + addr)
}

// planFor plans m on nodes (head first) whose layouts are given, from the
// real probe's facts.
func planFor(t *testing.T, md *Model, mf Manifest, nodes []string, layouts map[string]Layout) Planned {
	t.Helper()
	facts := observeTrees(t, layouts)
	addrs := map[string]netip.Addr{}
	for _, n := range nodes {
		addrs[n] = netip.MustParseAddr("127.0.0.1")
	}
	return Plan(PlanInput{Model: md, Resolution: &Resolution{Manifest: mf}, Nodes: nodes,
		Facts: func(n string) *observe.HostFacts { return facts[n] }, Addrs: addrs,
		Layout: func(n string) Layout { return layouts[n] }})
}

// runSteps runs w's steps as apply's prepare phase does, each node on
// its own local connection.
func runSteps(t *testing.T, w *Work, nodes []string, conns map[string]transport.Conn) ([]string, error) {
	t.Helper()
	if conns == nil {
		conns = map[string]transport.Conn{}
		for _, n := range nodes {
			conns[n] = local.New(local.Options{})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var h recHooks
	err := apply.Prepare(ctx, []*apply.Resource{{Address: "model.tiny", Action: plan.Update, Steps: w.Steps(conns, StageOptions{Streams: 3, Interval: 10 * time.Millisecond})}}, &h, apply.Options{})
	return h.lines, err
}

// TestPlanAndStage: only the head has the model: plan shows it complete
// there and absent on the others, with what they receive and from where;
// the steps stage it node to node with progress per node; the plan after
// has nothing to do and every copy matches the source.
func TestPlanAndStage(t *testing.T) {
	root := t.TempDir()
	mf, src := source(t, filepath.Join(root, "spark1"))
	md := &Model{Name: "tiny", Source: mf.Repo, Rev: "main", CacheDir: "/unused"}
	nodes := []string{"spark1", "spark2", "spark3"}
	layouts := map[string]Layout{"spark1": src}
	for _, n := range nodes[1:] {
		layouts[n] = HFCacheLayout(filepath.Join(root, n), mf.Repo)
	}
	p := planFor(t, md, mf, nodes, layouts)
	if p.Change.Action != plan.Update || len(p.Findings) != 0 || p.Work == nil {
		t.Fatalf("plan: %s, findings %v, work %v", p.Change.Action, p.Findings, p.Work != nil)
	}
	size := GB(mf.Bytes())
	want := []string{"spark1: complete",
		"spark2: absent, " + size + " to stage from spark1 over the fabric (",
		"spark3: absent, " + size + " to stage from spark1 over the fabric ("}
	for i, r := range p.Change.Reasons {
		if !strings.HasPrefix(r, want[i]) {
			t.Errorf("line %d: %q, want it to start %q", i, r, want[i])
		}
	}
	lines, err := runSteps(t, p.Work, nodes, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(lines, "\n"))
	}
	if lines[0] != "step stage org/tiny ("+size+") from spark1 to spark2, spark3 over the fabric" {
		t.Errorf("first line %q", lines[0])
	}
	for _, n := range nodes[1:] {
		if !slices.Contains(lines, "progress "+n+": "+size+" of "+size+" (100%), done") {
			t.Errorf("no final progress of %s in\n%s", n, strings.Join(lines, "\n"))
		}
		sameContent(t, mf, src, layouts[n])
	}
	again := planFor(t, md, mf, nodes, layouts)
	if again.Change.Action != plan.NoOp || again.Work != nil || len(again.Findings) != 0 {
		t.Errorf("second plan: %s %v %v", again.Change.Action, again.Change.Reasons, again.Findings)
	}
}

// TestPlanErrors: a hub refusal, a node without the disk space and a
// node that could not be observed are errors of the plan, with no work:
// apply stops before anything runs.
func TestPlanErrors(t *testing.T) {
	mf := tinyManifest(t)
	md := &Model{Name: "tiny", Source: mf.Repo, Rev: "main", CacheDir: "/data/hub"}
	md.Addr = "model.tiny"
	dir := md.Dir()
	full := listing(mf, HFCacheLayout(md.CacheDir, mf.Repo), func(f File) (int64, bool) { return f.Size, true }, observe.TreeFile{Path: "refs/main", Size: 40})
	full.FreeBytes = 1e12
	facts := map[string]*observe.HostFacts{
		"h1": {Trees: map[string]observe.TreeFacts{dir: full}},
		"h2": {Trees: map[string]observe.TreeFacts{dir: {FreeBytes: 2e9}}},
	}
	addrs := map[string]netip.Addr{"h1": netip.MustParseAddr("10.0.0.1"), "h2": netip.MustParseAddr("10.0.0.2")}
	in := PlanInput{Model: md, Nodes: []string{"h1", "h2", "h3"}, Addrs: addrs,
		Facts: func(n string) *observe.HostFacts { return facts[n] }}

	in.Resolution = &Resolution{Err: errors.New("model org/tiny@main: the hub answered 401: it refused the token (Invalid credentials in Authorization header); set the model's token to a valid token with read access")}
	p := Plan(in)
	if p.Work != nil || p.Change.Action != plan.NoOp || len(p.Findings) != 1 || !strings.Contains(p.Findings[0].Detail, "refused the token") {
		t.Errorf("refusal: %s %+v", p.Change.Action, p.Findings)
	}

	in.Resolution = &Resolution{Manifest: mf}
	p = Plan(in)
	var got []string
	for _, f := range p.Findings {
		if f.Severity != plan.Error {
			t.Errorf("not an error: %+v", f)
		}
		got = append(got, f.Host+": "+f.Summary+": "+f.Detail)
	}
	wantDisk := "h2: not enough disk space on h2 for org/tiny: 5.5 GB to stage into /data/hub/models--org--tiny, but its filesystem has 2.0 GB free; free 3.5 GB there or set the model's cache_dir to a larger filesystem"
	wantUnobserved := "h3: h3 could not be observed: what it holds of org/tiny is unknown: "
	if !slices.Equal(got, []string{wantDisk, wantUnobserved}) {
		t.Errorf("findings\n%s\nwant\n%s\n%s", strings.Join(got, "\n"), wantDisk, wantUnobserved)
	}
	if p.Work != nil || p.Change.Action != plan.Update {
		t.Errorf("with errors: %s, work %v", p.Change.Action, p.Work != nil)
	}

	// Every node complete: nothing to do.
	facts["h2"] = facts["h1"]
	in.Nodes = []string{"h1", "h2"}
	if p := Plan(in); p.Change.Action != plan.NoOp || p.Work != nil || len(p.Findings) != 0 ||
		!slices.Equal(p.Change.Reasons, []string{"h1: complete", "h2: complete"}) {
		t.Errorf("complete: %s %v %v", p.Change.Action, p.Change.Reasons, p.Findings)
	}
	// Unresolved (no hub asked): no change shown.
	in.Resolution = nil
	if p := Plan(in); p.Change.Action != plan.NoOp || len(p.Change.Reasons) != 0 {
		t.Errorf("unresolved: %+v", p.Change)
	}
}

// TestPlanRefusesHubSizes: a hub that lists a file with a negative or an
// absurd size makes the model's plan an error (it never reaches the
// nodes' judgment as "N B to stage").
func TestPlanRefusesHubSizes(t *testing.T) {
	for _, size := range []string{"-232", "4611686018427387904"} {
		t.Run(size, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, `{"sha": "`+commit+`", "siblings": [{"rfilename": "config.json", "size": `+size+`, "blobId": "`+blob40+`"},`+
					`{"rfilename": "model.safetensors", "size": 10, "blobId": "`+blob40+`", "lfs": {"sha256": "`+sha64+`", "size": 10}}]}`)
			}))
			defer srv.Close()
			md := &Model{Name: "tiny", Source: "org/tiny", Rev: "main", CacheDir: "/data/hub", Endpoint: srv.URL}
			res := ResolveOrRecall(context.Background(), srv.Client(), md, []string{"h1"}, nil)
			p := Plan(PlanInput{Model: md, Resolution: &res, Nodes: []string{"h1"},
				Facts: func(string) *observe.HostFacts { return &observe.HostFacts{} }})
			if p.Work != nil || len(p.Findings) != 1 || p.Findings[0].Severity != plan.Error ||
				!strings.Contains(p.Findings[0].Detail, "config.json has size "+size) {
				t.Errorf("plan: %s %v, findings %+v", p.Change.Action, p.Change.Reasons, p.Findings)
			}
		})
	}
}

// TestPlanSaysWhenNotHashed: a node whose probe could not compute the
// files' identities (no sha1sum) is judged by sizes alone, and the plan
// says so in a warning naming the node and the cause.
func TestPlanSaysWhenNotHashed(t *testing.T) {
	mf := tinyManifest(t)
	md := &Model{Name: "tiny", Source: mf.Repo, Rev: "main", CacheDir: "/data/hub"}
	full := listing(mf, HFCacheLayout(md.CacheDir, mf.Repo), func(f File) (int64, bool) { return f.Size, true }, observe.TreeFile{Path: "refs/main", Size: 40})
	full.FreeBytes = 1e12
	full.IDsErr = "rayform: sha1sum: not installed (exit 127)"
	facts := map[string]*observe.HostFacts{"h1": {Trees: map[string]observe.TreeFacts{md.Dir(): full}}}
	p := Plan(PlanInput{Model: md, Resolution: &Resolution{Manifest: mf}, Nodes: []string{"h1"},
		Facts: func(n string) *observe.HostFacts { return facts[n] }})
	if len(p.Findings) != 1 || p.Findings[0].Severity != plan.Warning || p.Findings[0].Host != "h1" ||
		!strings.Contains(p.Findings[0].Summary, "h1: the files of org/tiny not stored with LFS could not be verified") ||
		!strings.Contains(p.Findings[0].Detail, "sha1sum: not installed") {
		t.Errorf("findings %+v", p.Findings)
	}
}

// TestPlanAndDownload: no node has the model: plan creates it, one node
// downloads from the hub (with the token, never in a command) and the
// others receive from it over the fabric; the plan after has nothing to
// do.
func TestPlanAndDownload(t *testing.T) {
	srv, _, gated := startHub(t)
	mf := manifestFrom(t, srv.URL, gated.ID, "main")
	root := t.TempDir()
	nodes := []string{"spark1", "spark2"}
	layouts := map[string]Layout{}
	conns := map[string]transport.Conn{}
	var recs []*recordingConn
	for _, n := range nodes {
		layouts[n] = HFCacheLayout(filepath.Join(root, n), mf.Repo)
		rc := &recordingConn{Conn: local.New(local.Options{})}
		recs = append(recs, rc)
		conns[n] = rc
	}
	md := &Model{Name: "gated", Source: mf.Repo, Rev: "main", CacheDir: "/unused", Endpoint: srv.URL, Token: hubToken}
	p := planFor(t, md, mf, nodes, layouts)
	if p.Change.Action != plan.Create || p.Work == nil || !slices.Equal(p.Work.Decision.Downloads, []string{"spark1"}) {
		t.Fatalf("plan: %s %v %+v", p.Change.Action, p.Change.Reasons, p.Findings)
	}
	lines, err := runSteps(t, p.Work, nodes, conns)
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(lines, "\n"))
	}
	var steps []string
	for _, l := range lines {
		if s, ok := strings.CutPrefix(l, "step "); ok {
			steps = append(steps, s)
		}
	}
	size := GB(mf.Bytes())
	want := []string{"download " + mf.Repo + "@" + mf.Commit[:12] + " (" + size + ") to spark1 from the hub " + srv.URL,
		"stage " + mf.Repo + " (" + size + ") from spark1 to spark2 over the fabric"}
	if !slices.Equal(steps, want) {
		t.Errorf("steps %q\nwant %q", steps, want)
	}
	for _, rc := range recs {
		for _, c := range rc.cmds {
			if strings.Contains(c.String(), hubToken) || strings.Contains(strings.Join(c.Argv, " "), hubToken) {
				t.Errorf("the token is in a command: %.200s", c.String())
			}
		}
	}
	for _, l := range lines {
		if strings.Contains(l, hubToken) {
			t.Errorf("the token is in the output: %s", l)
		}
	}
	if again := planFor(t, md, mf, nodes, layouts); again.Change.Action != plan.NoOp || again.Work != nil {
		t.Errorf("second plan: %s %v", again.Change.Action, again.Change.Reasons)
	}
}
