package model

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport/local"
)

// closedPort is a URL on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// TestResolveUnavailable: a hub that gives no answer (nothing listens, a
// server gone, one that never answers within the client's timeout, a
// 503) is UnavailableError, naming the hub and the cause; a refusal
// (401, 404) is not.
func TestResolveUnavailable(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer busy.Close()
	srv, tiny, gated := startHub(t)
	for _, tc := range []struct {
		name, endpoint, repo, token string
		hc                          *http.Client
		unavailable                 bool
		want                        string
	}{
		{"nothing listens", closedPort(t), "org/m", "", nil, true, "connection refused"},
		{"server gone", closed.URL, "org/m", "", nil, true, "connection refused"},
		{"no answer in time", slow.URL, "org/m", "", HubClient(300 * time.Millisecond), true, "Client.Timeout exceeded"},
		{"503", busy.URL, "org/m", "", nil, true, "it answered 503 Service Unavailable"},
		{"refused token", srv.URL, gated.ID, "hf_wrongtoken", nil, false, "the hub answered 401: it refused the token"},
		{"no such revision", srv.URL, tiny.ID, "", nil, false, "the hub answered 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			hc := tc.hc
			if hc == nil {
				hc = HubClient(ResolveTimeout)
			}
			rev := "main"
			if tc.want == "the hub answered 404" {
				rev = "v9"
			}
			_, err := Resolve(ctx, hc, tc.endpoint, tc.token, tc.repo, rev)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if IsUnavailable(err) != tc.unavailable {
				t.Errorf("unavailable %v, want %v: %v", IsUnavailable(err), tc.unavailable, err)
			}
			if tc.unavailable && !strings.Contains(err.Error(), "the hub at "+tc.endpoint+" did not answer") {
				t.Errorf("error %q does not name the hub", err)
			}
		})
	}
}

// observeWithRecords runs observe's real probe of each node's layout,
// reading the record of md's revision there too.
func observeWithRecords(t *testing.T, md *Model, layouts map[string]Layout) map[string]*observe.HostFacts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]*observe.HostFacts{}
	for n, l := range layouts {
		spec := observe.HostSpec{Trees: []string{l.Dir}, Reads: []observe.ReadProbe{{Path: filepath.Join(l.Dir, RecordPath(md.Rev)), Max: recordMax}}}
		res, err := local.New(local.Options{}).Run(ctx, transportCmd(observe.ProbeScript(spec)))
		if err != nil {
			t.Fatal(err)
		}
		f, err := observe.Parse(res.Stdout)
		if err != nil {
			t.Fatal(err)
		}
		// The model's record, where the kind's probe reads it.
		f.Reads = map[string]observe.ReadResult{md.recordProbe().Key(): f.Reads[spec.Reads[0].Key()]}
		out[n] = f
	}
	return out
}

// TestPlanWithoutTheHub: staging records the manifest on every node
// (source and receivers) once verified; with the hub gone (a closed
// port), plan judges the nodes against that record: no change, a warning
// naming the hub, the cause, and where and when the list was recorded. A
// node that lost a file is staged from one that has it, without the hub;
// with no complete copy left nothing can be downloaded: an error naming
// the nodes. With no record at all, the hub's silence is an error with
// its cause and fix.
func TestPlanWithoutTheHub(t *testing.T) {
	root := t.TempDir()
	mf, src := source(t, filepath.Join(root, "spark1"))
	md := &Model{Name: "tiny", Source: mf.Repo, Rev: "main", CacheDir: "/unused", Endpoint: closedPort(t)}
	md.Addr = "model.tiny"
	nodes := []string{"spark1", "spark2", "spark3"}
	layouts := map[string]Layout{"spark1": src}
	for _, n := range nodes[1:] {
		layouts[n] = HFCacheLayout(filepath.Join(root, n), mf.Repo)
	}
	addrs := map[string]netip.Addr{}
	for _, n := range nodes {
		addrs[n] = netip.MustParseAddr("127.0.0.1")
	}
	planNow := func(r Resolution, facts map[string]*observe.HostFacts) Planned {
		return Plan(PlanInput{Model: md, Resolution: &r, Nodes: nodes, Addrs: addrs,
			Facts: func(n string) *observe.HostFacts { return facts[n] }, Layout: func(n string) Layout { return layouts[n] }})
	}
	recall := func(facts map[string]*observe.HostFacts) Resolution {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return ResolveOrRecall(ctx, nil, md, nodes, func(n string) *observe.HostFacts { return facts[n] })
	}

	// No record yet: the error stays, with its cause and fix.
	facts := observeWithRecords(t, md, layouts)
	r := recall(facts)
	if r.Recorded != nil || !IsUnavailable(r.Err) {
		t.Fatalf("without a record: %+v", r)
	}
	p := planNow(r, facts)
	if len(p.Findings) != 1 || p.Work != nil || !strings.Contains(p.Findings[0].Detail, "connection refused") ||
		!strings.Contains(p.Findings[0].Detail, "no node holds a list of org/tiny@main recorded by an earlier apply") ||
		p.Findings[0].Fix != "make the hub at "+md.Endpoint+" reachable from this machine (the model's endpoint), then plan again" {
		t.Errorf("without a record: %+v", p.Findings)
	}

	// Staged with the hub's list: every node records it.
	before := time.Now().UTC().Truncate(time.Second)
	p = planNow(Resolution{Manifest: mf}, observeWithRecords(t, md, layouts))
	if p.Work == nil {
		t.Fatalf("plan: %s %+v", p.Change.Action, p.Findings)
	}
	if lines, err := runSteps(t, p.Work, nodes, nil); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(lines, "\n"))
	}
	facts = observeWithRecords(t, md, layouts)
	for _, n := range nodes {
		rr := facts[n].Reads[md.recordProbe().Key()]
		rec, err := ParseRecord([]byte(rr.Content), mf.Repo, "main")
		if err != nil || rec.Commit != mf.Commit || len(rec.Files) != len(mf.Files) || rec.RecordedAt.Before(before) || rec.Endpoint != md.Endpoint {
			t.Errorf("%s's record: %v %+v", n, err, rr)
		}
	}

	// The hub gone: judged against the record, nothing to do, a warning.
	r = recall(facts)
	if r.Err != nil || r.Recorded == nil || r.Recorded.Node != "spark1" || r.Manifest.Commit != mf.Commit {
		t.Fatalf("recalled %+v", r)
	}
	p = planNow(r, facts)
	if p.Change.Action != plan.NoOp || p.Work != nil || len(p.Findings) != 1 || p.Findings[0].Severity != plan.Warning {
		t.Fatalf("plan without the hub: %s %v %+v", p.Change.Action, p.Change.Reasons, p.Findings)
	}
	w := p.Findings[0]
	for _, s := range []string{"the hub at " + md.Endpoint + " did not answer", "recorded on spark1"} {
		if !strings.Contains(w.Summary, s) {
			t.Errorf("warning summary %q lacks %q", w.Summary, s)
		}
	}
	for _, s := range []string{"connection refused", "recorded on spark1 at " + r.Recorded.RecordedAt.Format(time.RFC3339), "commit " + mf.Commit} {
		if !strings.Contains(w.Detail, s) {
			t.Errorf("warning detail %q lacks %q", w.Detail, s)
		}
	}

	// A worker lost a shard: staged from the head, without the hub.
	shard := filepath.Join(layouts["spark3"].Dir, layouts["spark3"].FilePath(mf, mf.Files[3]))
	if err := removeFile(shard); err != nil {
		t.Fatal(err)
	}
	facts = observeWithRecords(t, md, layouts)
	p = planNow(recall(facts), facts)
	if p.Change.Action != plan.Update || p.Work == nil || len(p.Findings) != 1 {
		t.Fatalf("a lost shard without the hub: %s %v %+v", p.Change.Action, p.Change.Reasons, p.Findings)
	}
	if lines, err := runSteps(t, p.Work, nodes, nil); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(lines, "\n"))
	}
	sameContent(t, mf, src, layouts["spark3"])

	// No complete copy left: nothing to receive from, nothing to download.
	for _, n := range nodes {
		if err := removeFile(filepath.Join(layouts[n].Dir, layouts[n].FilePath(mf, mf.Files[3]))); err != nil {
			t.Fatal(err)
		}
	}
	facts = observeWithRecords(t, md, layouts)
	p = planNow(recall(facts), facts)
	var errs []string
	for _, f := range p.Findings {
		if f.Severity == plan.Error {
			errs = append(errs, f.Summary+": "+f.Detail+" Fix: "+f.Fix)
		}
	}
	if p.Work != nil || len(errs) != 1 || !strings.Contains(errs[0], "spark1, spark2, spark3 cannot be staged") || !strings.Contains(errs[0], "connection refused") {
		t.Errorf("no complete copy without the hub: %s", strings.Join(errs, "\n"))
	}
}

// removeFile removes a snapshot's link and the blob it points to.
func removeFile(link string) error {
	target, err := filepath.EvalSymlinks(link)
	if err != nil {
		return err
	}
	if err := os.Remove(target); err != nil {
		return err
	}
	return os.Remove(link)
}
