package kindstest

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/model"
	"github.com/rayform/rayform/resources/resourcestest"
	"github.com/rayform/rayform/resources/serve"
)

// statusTestConfig is the lab's shape: one 2-GPU head and a worker, two
// serves of one GPU each on ports 8000 and 8001.
const statusTestConfig = `
node "a" {
  host = "10.0.0.1"
  gpus = 2
}

node "b" {
  host = "10.0.0.2"
  gpus = 2
}

network "fabric" {
  cidr = "192.168.200.0/24"
}

ray_cluster "main" {
  image   = "img"
  head    = node.a
  workers = [node.b]
  network = network.fabric
}

vllm_serve "one" {
  cluster = ray_cluster.main
  model   = "m1"
  port    = 8000
}

vllm_serve "two" {
  cluster = ray_cluster.main
  model   = "m2"
  port    = 8001
}
`

// statusObserved is an observation of statusTestConfig's hosts in which
// both serves run and answer their own model on their own port, and Ray's
// table lists both nodes ALIVE; p is the plan to report.
func statusObserved(t *testing.T, p *plan.Plan) *observed {
	t.Helper()
	loaded, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(statusTestConfig)}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	cfg, diags := loaded.WithFacts(Facts{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	head := &observe.HostFacts{Host: "a", Complete: true}
	resourcestest.SetRayTable(head, 8265, cluster.RayNodeFacts{List: []cluster.RayNode{
		{NodeIP: "192.168.200.1", IsHead: true, State: "ALIVE", Resources: map[string]float64{"GPU": 2}},
		{NodeIP: "192.168.200.2", State: "ALIVE", Resources: map[string]float64{"GPU": 2}},
	}})
	for name, model := range map[string]string{"one": "m1", "two": "m2"} {
		sv := cfg.Serves[name]
		resourcestest.SetServeRecord(head, name, observe.ProcessRecord{Found: true, Alive: true, Resource: sv.Addr})
		resourcestest.SetServeAnswer(head, sv.Port, serve.VLLM{Observed: true, Health: observe.HTTPCheck{Status: 200},
			ModelsCheck: observe.HTTPCheck{Status: 200}, Models: []serve.Model{{ID: model}}})
	}
	facts := &observe.Facts{Hosts: map[string]*observe.HostFacts{"a": head, "b": {Host: "b", Complete: true}}, Errors: map[string]error{}}
	if p == nil {
		p = &plan.Plan{}
	}
	return &observed{cfg: cfg, facts: facts, result: &Result{Plan: p}}
}

// observed is one observation and its plan, as status reads them.
type observed struct {
	cfg    *Blocks
	facts  *observe.Facts
	result *Result
}

// buildStatus is Status of obs.
func buildStatus(project string, obs *observed) *run.StatusReport {
	return Status(project, obs.cfg, obs.facts, obs.result)
}

// statusJSON is status -json as the tests read it.
type statusJSON struct {
	Project  string                  `json:"project"`
	Healthy  bool                    `json:"healthy"`
	Problems []string                `json:"problems"`
	Nodes    []run.StatusNode        `json:"nodes"`
	Clusters []cluster.ClusterStatus `json:"clusters"`
	Serves   []serve.ServeStatus     `json:"serves"`
	Models   []model.NodesStatus     `json:"models"`
}

// statusDoc is rep as status -json prints it, read back.
func statusDoc(t *testing.T, rep *run.StatusReport) statusJSON {
	t.Helper()
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var doc statusJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("status -json: %v\n%s", err, b)
	}
	return doc
}

// TestStatusJSONShape: status -json lists, after project, healthy,
// problems and nodes, each kind's resources under its key (an empty list
// for a kind without any), in the kinds' order.
func TestStatusJSONShape(t *testing.T) {
	b, err := json.Marshal(buildStatus("lab", statusObserved(t, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"project", "healthy", "problems", "nodes", "clusters", "serves", "models"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	// The kinds' text shows each one's resources, clusters then serves.
	var text bytes.Buffer
	for _, k := range buildStatus("lab", statusObserved(t, nil)).Kinds {
		for _, it := range k.Items {
			it.Render(&text)
		}
	}
	out := text.String()
	for _, want := range []string{"Ray (ray_cluster.main, head a):", "192.168.200.1    ALIVE  head 2 GPU", "Serve vllm_serve.one on a:", "Serve vllm_serve.two on a:", "health    ok", "model     m2"} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "Ray (") > strings.Index(out, "Serve ") {
		t.Errorf("serves before clusters:\n%s", out)
	}
	// A kind without resources still has its list, empty.
	b, err = json.Marshal(&run.StatusReport{Problems: []string{}, Nodes: []run.StatusNode{}, Kinds: []run.StatusKind{{Key: "serves"}}})
	if err != nil || !strings.Contains(string(b), `"serves":[]`) {
		t.Errorf("empty kind: %s, %v", b, err)
	}
}

func TestStatusEachServeOwnHealth(t *testing.T) {
	obs := statusObserved(t, nil)
	rep := statusDoc(t, buildStatus("lab", obs))
	if !rep.Healthy || len(rep.Serves) != 2 {
		t.Fatalf("healthy %v, serves %+v, problems %v", rep.Healthy, rep.Serves, rep.Problems)
	}
	for i, want := range []string{"m1", "m2"} {
		if s := rep.Serves[i]; s.Health != "ok" || !slices.Equal(s.Models, []string{want}) {
			t.Errorf("%s: %s (%s), models %v; want ok serving %s", s.Address, s.Health, s.HealthDetail, s.Models, want)
		}
	}
	// Serve two's port closed: only serve two is starting, one stays ok.
	resourcestest.SetServeAnswer(obs.facts.Hosts["a"], 8001, serve.VLLM{Observed: true,
		Health: observe.HTTPCheck{Refused: true, Err: "connection refused"}, ModelsCheck: observe.HTTPCheck{Refused: true, Err: "connection refused"}})
	rep = statusDoc(t, buildStatus("lab", obs))
	if rep.Serves[0].Health != "ok" || rep.Serves[1].Health != "starting" || rep.Healthy {
		t.Fatalf("serves %+v, healthy %v", rep.Serves, rep.Healthy)
	}
	// A foreign process on serve one's port: not judged as vLLM.
	head := obs.facts.Hosts["a"]
	head.HTTP[serve.ServeURL(8000, "/health")] = observe.HTTPResult{HTTPCheck: observe.HTTPCheck{HeldBy: "nc (pid 42)", Err: "port held by nc (pid 42)"}}
	rep = statusDoc(t, buildStatus("lab", obs))
	if s := rep.Serves[0]; s.Health != serve.HealthPortHeld || !strings.Contains(s.HealthDetail, "nc (pid 42)") {
		t.Fatalf("serve one: %+v", s)
	}
}

// TestStatusDeadRayNodeIsAProblem is issue 22 item 7: a Ray node DEAD in
// the table was not among status's problems while the serves read ok.
func TestStatusDeadRayNodeIsAProblem(t *testing.T) {
	obs := statusObserved(t, nil)
	head := obs.facts.Hosts["a"]
	resourcestest.SetRayTable(head, 8265, cluster.RayNodeFacts{List: []cluster.RayNode{
		{NodeIP: "192.168.200.1", IsHead: true, State: "ALIVE", Resources: map[string]float64{"GPU": 2}},
		{NodeIP: "192.168.200.2", State: "DEAD", StateMessage: "health check failed\nmore"},
		// An earlier life of the head: DEAD beside ALIVE is history.
		{NodeIP: "192.168.200.1", State: "DEAD"},
	}})
	rep := buildStatus("lab", obs)
	want := "ray_cluster.main: Ray node 192.168.200.2 is DEAD: health check failed"
	if rep.Healthy || !slices.Contains(rep.Problems, want) {
		t.Fatalf("problems %v, want %q", rep.Problems, want)
	}
	if len(rep.Problems) != 1 {
		t.Errorf("problems %v: the head's earlier DEAD row is not a problem", rep.Problems)
	}
}

// TestStatusChangeHasAReason is issue 22 item 7: status printed "apply
// would create it: " with nothing after the colon.
func TestStatusChangeHasAReason(t *testing.T) {
	p := &plan.Plan{Changes: []plan.ResourceChange{{Address: "vllm_serve.two", Action: plan.Create, Hosts: []string{"a"}}}}
	rep := buildStatus("lab", statusObserved(t, p))
	want := "vllm_serve.two: apply would create it: it does not exist on a"
	if !slices.Contains(rep.Problems, want) {
		t.Fatalf("problems %v, want %q", rep.Problems, want)
	}
	for _, pr := range rep.Problems {
		if strings.HasSuffix(pr, ": ") {
			t.Errorf("problem without a reason: %q", pr)
		}
	}
}

// TestStatusDownServeOnce is issue 33 item 3: a serve whose process is
// gone was listed three times under problems (the plan's drift, the
// replacement that drift causes, and the serve's own health). It is
// listed once, by what is wrong with it.
func TestStatusDownServeOnce(t *testing.T) {
	const drift = "the serve process is not running (exited)"
	p := &plan.Plan{
		Drift:   []plan.Drift{{Address: "vllm_serve.two", Host: "a", Summary: drift}},
		Changes: []plan.ResourceChange{{Address: "vllm_serve.two", Action: plan.Replace, Hosts: []string{"a"}, Reasons: []string{drift}}},
	}
	obs := statusObserved(t, p)
	head := obs.facts.Hosts["a"]
	resourcestest.SetServeRecord(head, "two", observe.ProcessRecord{Found: true, Alive: false, Resource: "vllm_serve.two"})
	resourcestest.SetServeAnswer(head, 8001, serve.VLLM{Observed: true,
		Health: observe.HTTPCheck{Refused: true, Err: "connection refused"}, ModelsCheck: observe.HTTPCheck{Refused: true, Err: "connection refused"}})
	rep := statusDoc(t, buildStatus("lab", obs))
	if rep.Healthy || rep.Serves[1].Health != serve.HealthDown {
		t.Fatalf("serve two %+v, healthy %v", rep.Serves[1], rep.Healthy)
	}
	var two []string
	for _, pr := range rep.Problems {
		if strings.HasPrefix(pr, "vllm_serve.two") {
			two = append(two, pr)
		}
	}
	if want := "vllm_serve.two: " + drift + " (on a)"; len(two) != 1 || two[0] != want {
		t.Errorf("problems of vllm_serve.two %q, want only %q", two, want)
	}
	// A change without drift is still listed, with its reason.
	p.Drift = nil
	rep = statusDoc(t, buildStatus("lab", obs))
	if want := "vllm_serve.two: apply would replace it: " + drift; !slices.Contains(rep.Problems, want) {
		t.Errorf("problems %q, want %q", rep.Problems, want)
	}
}

// TestStatusExposure is issue 38 item 5: status lists, per node, every
// port listening beyond the node's loopback and fabric address, with its
// process and whether it demands a key: Ray's ports by the cluster's
// auth, a serve's port by its api_key, what runs outside the cluster's
// container as not rayform's; loopback and fabric listeners are left out.
func TestStatusExposure(t *testing.T) {
	obs := statusObserved(t, nil)
	head := obs.facts.Hosts["a"]
	head.Addresses.List = append(head.Addresses.List, observe.Address{Interface: "enp1s0f1np1", Prefix: netip.MustParsePrefix("192.168.200.1/24")})
	head.Listening.List = []observe.Listener{
		{Port: 6379, Addr: "0.0.0.0:6379", Process: "gcs_server", Container: "rayform-main"},
		{Port: 8265, Addr: "127.0.0.1:8265", Process: "python3", Container: "rayform-main"},
		{Port: 10001, Addr: "192.168.200.1:10001", Process: "python3", Container: "rayform-main"},
		{Port: 8000, Addr: "0.0.0.0:8000", Process: "vllm", Container: "rayform-main"},
		{Port: 22, Addr: "10.0.0.1:22", Process: "sshd"},
		{Port: 53, Addr: "127.0.0.53%lo:53", Process: "systemd-resolve"},
	}
	doc := statusDoc(t, buildStatus("lab", obs))
	if len(doc.Clusters) != 1 {
		t.Fatalf("clusters %+v", doc.Clusters)
	}
	got := map[string]string{}
	for _, e := range doc.Clusters[0].Exposure {
		got[e.Node+" "+e.Addr+" "+e.Process] = e.Auth
	}
	want := map[string]string{
		"a 0.0.0.0:6379 gcs_server": "ray token",
		"a 0.0.0.0:8000 vllm":       "none",
		"a 10.0.0.1:22 sshd":        "not rayform's",
	}
	if !maps.Equal(got, want) {
		t.Errorf("exposure %v, want %v", got, want)
	}
}

// TestStatusAuthMode: status says which authentication the head's Ray
// runs with, from its dashboard's /api/authentication_mode (public in Ray
// 2.52 and later), and a cluster meant to demand the token whose Ray does
// not (a 404: a Ray before 2.52; "disabled") is a problem.
func TestStatusAuthMode(t *testing.T) {
	tests := []struct {
		name        string
		answer      observe.HTTPResult
		mode        string
		wantProblem bool
	}{
		{"token", observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 200}, Body: `{"authentication_mode": "token"}`}, cluster.AuthModeToken, false},
		{"disabled", observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 200}, Body: `{"authentication_mode": "disabled"}`}, cluster.AuthModeDisabled, true},
		{"Ray before 2.52", observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 404, Err: "HTTP 404"}}, cluster.AuthModeUnsupported, true},
		{"unreadable", observe.HTTPResult{HTTPCheck: observe.HTTPCheck{Status: 200}, Body: `not json`}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := statusObserved(t, nil)
			obs.facts.Hosts["a"].HTTP[cluster.AuthModeURL(8265)] = tt.answer
			doc := statusDoc(t, buildStatus("lab", obs))
			if got := doc.Clusters[0].AuthMode; got != tt.mode {
				t.Errorf("auth_mode %q, want %q", got, tt.mode)
			}
			open := slices.ContainsFunc(doc.Problems, func(p string) bool { return strings.Contains(p, "ray_cluster.main is open") })
			if open != tt.wantProblem {
				t.Errorf("problems %v: an open cluster reported %v, want %v", doc.Problems, open, tt.wantProblem)
			}
		})
	}
}
