package observe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

// peerOutput is a worker's answer to the second round: the head's fabric
// address routes over the fabric and its GCS port accepts connections.
func peerOutput(t testing.TB) []byte {
	return newOut().
		sec("route.get addr=192.168.200.12", fixture(t, "ip-route-get-peer-worker.json"), "", 0).
		sec("tcp addr=192.168.200.12 port=6379", "", "", 0).
		done()
}

// workerOutput is the seeds' worker answering round 1 with no static
// peer checks: its peers' addresses are learned.
func workerOutput(t testing.TB) []byte {
	return newOut().
		sec("meta", "hostname=spark2\narch=aarch64\n", "", 0).
		sec("ip.addr", fixture(t, "ip-addr-worker.json"), "", 0).
		sec("ip.route", fixture(t, "ip-route-worker.json"), "", 0).
		sec("ip.default", "", fixture(t, "ip-route-get-default-worker.stderr"), 2).
		sec("rdma", fixture(t, "ibdev2netdev.txt"), "", 0).
		sec("meminfo", fixture(t, "meminfo-gb10.txt"), "", 0).
		sec("gpu", fixture(t, "nvidia-smi-gb10.csv"), "", 0).
		sec("docker.version", fixture(t, "docker-version-ok.json"), "", 0).
		sec("docker.image ref="+gb10Image, fixture(t, "docker-image-inspect.json"), "", 0).
		sec("docker.history ref="+gb10Image, fixture(t, "docker-history.jsonl"), "", 0).
		sec("docker.containers "+envAttr, marker+" part inspect\n", "Error: No such container: rayform-ray-worker", 1).
		done()
}

// pairSpec is the seeds' head and worker plus a third host; the workers
// learn the head's fabric address from the head's own facts.
func pairSpec() Spec {
	fabric := Fabric{Interface: "enp1s0f1np1", CIDR: netip.MustParsePrefix("192.168.200.0/24")}
	head := headSpec()
	head.Fabric = fabric
	worker := workerSpec()
	worker.Peers = []Peer{{Host: "spark1", Port: 6379}, {Host: "spark3"}}
	third := workerSpec()
	third.Peers = []Peer{{Host: "spark1", Port: 6379}}
	return Spec{Hosts: map[string]HostSpec{"spark1": head, "spark2": worker, "spark3": third}, Timeout: 30 * time.Second}
}

// pairConns answers as the seeds' hosts; spark3 cannot be reached.
func pairConns(t *testing.T) (map[string]transport.Conn, map[string]*cannedConn, map[string]*guardConn) {
	head, worker, peer := headOutput(t), workerOutput(t), peerOutput(t)
	canned := map[string]*cannedConn{
		"spark1": {host: "spark1", reply: func(transport.Cmd) (transport.Result, error) {
			return transport.Result{Stdout: head}, nil
		}},
		"spark2": {host: "spark2", reply: func(cmd transport.Cmd) (transport.Result, error) {
			if strings.Contains(cmd.Script, "peer probe") {
				return transport.Result{Stdout: peer}, nil
			}
			return transport.Result{Stdout: worker}, nil
		}},
		"spark3": {host: "spark3", reply: func(transport.Cmd) (transport.Result, error) {
			return transport.Result{}, fmt.Errorf("spark3: dial tcp 10.1.230.182:22: %w", transport.ErrUnreachable)
		}},
	}
	conns := map[string]transport.Conn{}
	guards := map[string]*guardConn{}
	for h, c := range canned {
		g := &guardConn{t: t, inner: c}
		guards[h], conns[h] = g, g
	}
	return conns, canned, guards
}

func TestObserveRoundsAndFailures(t *testing.T) {
	conns, canned, guards := pairConns(t)
	facts, err := Observe(context.Background(), conns, pairSpec(), 2)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}

	// At most two round trips per host; one where nothing is learned.
	want := map[string]int{"spark1": 1, "spark2": 2, "spark3": 1}
	for h, n := range want {
		if facts.RoundTrips[h] != n || canned[h].Stats().RoundTrips != n {
			t.Errorf("%s: %d round trips (conn saw %d), want %d", h, facts.RoundTrips[h], canned[h].Stats().RoundTrips, n)
		}
	}

	// The unreachable host is reported, and did not stop the others.
	if !errors.Is(facts.Errors["spark3"], transport.ErrUnreachable) || facts.Hosts["spark3"].Err == "" {
		t.Errorf("spark3: error %v, facts %+v", facts.Errors["spark3"], facts.Hosts["spark3"])
	}
	if !errors.Is(facts.Err(), transport.ErrUnreachable) || len(facts.Errors) != 1 {
		t.Errorf("Facts.Err() = %v", facts.Err())
	}
	for _, h := range []string{"spark1", "spark2"} {
		if f := facts.Hosts[h]; f == nil || f.Err != "" || f.Host != h || !f.Complete {
			t.Errorf("%s not observed: %+v", h, f)
		}
	}

	// spark2 learned spark1's fabric address and checked it in round 2;
	// spark3's address could not be learned.
	w := facts.Hosts["spark2"]
	var got []string
	for _, rc := range w.RouteChecks {
		got = append(got, fmt.Sprintf("%s %v %s %v %q", rc.Peer, rc.Addr, rc.Dev, rc.Src, rc.Err))
	}
	for _, tc := range w.TCPChecks {
		got = append(got, fmt.Sprintf("tcp %s %v:%d open=%v", tc.Peer, tc.Addr, tc.Port, tc.Open))
	}
	wantChecks := []string{
		`spark3 invalid IP  invalid IP "fabric address of spark3 unknown: spark3 was not observed"`,
		`spark1 192.168.200.12 enp1s0f1np1 192.168.200.13 ""`,
		`tcp spark1 192.168.200.12:6379 open=true`,
	}
	if strings.Join(got, "\n") != strings.Join(wantChecks, "\n") {
		t.Errorf("spark2 checks\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantChecks, "\n"))
	}

	// The exact commands, all read-only (guardConn fails the test otherwise).
	var tr strings.Builder
	for _, h := range []string{"spark1", "spark2", "spark3"} {
		for i, cmd := range guards[h].commands() {
			fmt.Fprintf(&tr, "== %s round %d (mutating=%v, timeout=%s)\n%s", h, i+1, cmd.Mutating, cmd.Timeout, scriptBody(cmd.Script))
		}
	}
	golden(t, "observe-commands.txt", []byte(tr.String()))
}

// scriptBody is the part of a probe that runs commands: from the header
// line to the end (the helpers before it are in the probe goldens).
func scriptBody(s string) string {
	if i := strings.Index(s, "printf '%s probe"); i >= 0 {
		return s[i:]
	}
	return s
}

// TestObserveLocal observes this machine twice over exec connections: the
// second "host" learns the first's address on lo and routes to it.
func TestObserveLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the probe on this machine")
	}
	spec := Spec{Hosts: map[string]HostSpec{
		"a": {Fabric: Fabric{Interface: "lo"}},
		"b": {Peers: []Peer{{Host: "a"}}},
	}}
	conns := map[string]transport.Conn{
		"a": &guardConn{t: t, inner: local.New(local.Options{Host: "a"})},
		"b": &guardConn{t: t, inner: local.New(local.Options{Host: "b"})},
	}
	facts, err := Observe(context.Background(), conns, spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if facts.RoundTrips["a"] != 1 || facts.RoundTrips["b"] != 2 {
		t.Errorf("round trips %v, want a:1 b:2", facts.RoundTrips)
	}
	rc := facts.Hosts["b"].RouteChecks
	if len(rc) != 1 || rc[0].Peer != "a" || rc[0].Addr != netip.MustParseAddr("127.0.0.1") || rc[0].Dev != "lo" || rc[0].Err != "" {
		t.Errorf("b's route to a: %+v", rc)
	}
}

func TestObserveRefuses(t *testing.T) {
	conns, _, _ := pairConns(t)
	tests := []struct {
		name  string
		spec  Spec
		conns map[string]transport.Conn
	}{
		{"invalid image", Spec{Hosts: map[string]HostSpec{"spark1": {Images: []string{"bad ref"}}}}, conns},
		{"unknown peer without address", Spec{Hosts: map[string]HostSpec{"spark1": {Peers: []Peer{{Host: "nowhere"}}}}}, conns},
		{"no connection", Spec{Hosts: map[string]HostSpec{"gpu9": {}}}, conns},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Observe(context.Background(), tt.conns, tt.spec, 1); err == nil {
				t.Error("Observe accepted it")
			}
		})
	}
}

func TestObserveCancelled(t *testing.T) {
	conns, canned, _ := pairConns(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	facts, err := Observe(ctx, conns, pairSpec(), 1)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	for h := range pairSpec().Hosts {
		if facts.Hosts[h] == nil || facts.Hosts[h].Err == "" || canned[h].Stats().RoundTrips > 1 {
			t.Errorf("%s after cancel: %+v", h, facts.Hosts[h])
		}
	}
}

// benchOutput is a realistic 8-GPU head as the probe prints it: H200s,
// RDMA, the image and two containers rendered through the probe's own
// docker templates, the node table and vLLM.
func benchOutput(b testing.TB) []byte {
	o := string(h200Output(b))
	i := strings.Index(o, marker+" begin docker.image")
	j := strings.Index(o, marker+" begin http ")
	ref := "hellohal2064/vllm-qwen3.5-gb10:latest"
	docker := newOut().
		sec("docker.image ref="+ref, renderTemplate(b, imageFormat, "docker-image-inspect.json"), "", 0).
		sec("docker.history ref="+ref, fixture(b, "docker-history.jsonl"), "", 0).
		sec("docker.containers "+envAttr, fixture(b, "docker-ps-head.jsonl")+marker+" part inspect\n"+
			renderTemplate(b, containerTemplate(testEnvKeys), "docker-inspect-head.json"), "", 0).
		done()
	d := strings.TrimSuffix(strings.TrimPrefix(string(docker), marker+" probe 1\n"), marker+" done\n")
	return []byte(o[:i] + d + o[j:])
}

// renderTemplate runs a docker --format template over each object of a
// real inspect fixture, as the docker CLI does.
func renderTemplate(b testing.TB, format, name string) string {
	var objs []map[string]any
	if err := jsonUnmarshal([]byte(fixture(b, name)), &objs); err != nil {
		b.Fatal(err)
	}
	tmpl, err := template.New("f").Funcs(dockerFuncs()).Parse(format)
	if err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	for _, o := range objs {
		if err := tmpl.Execute(&out, o); err != nil {
			b.Fatal(err)
		}
		out.WriteByte('\n')
	}
	return out.String()
}

func BenchmarkParse(b *testing.B) {
	out := benchOutput(b)
	if f, err := Parse(out); err != nil || len(f.GPUs.List) != 8 || len(f.Containers.List) != 2 {
		b.Fatalf("bench output parses wrong: %v", err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkObserve64(b *testing.B) {
	out := benchOutput(b)
	spec := Spec{Hosts: map[string]HostSpec{}}
	conns := map[string]transport.Conn{}
	for i := range 64 {
		h := fmt.Sprintf("gpu%02d", i)
		hs := headSpec()
		hs.Peers = []Peer{{Host: "gpu00", Addr: netip.MustParseAddr("192.168.200.12"), Port: 6379}}
		spec.Hosts[h] = hs
		conns[h] = &cannedConn{host: h, reply: func(transport.Cmd) (transport.Result, error) {
			return transport.Result{Stdout: out}, nil
		}}
	}
	b.ReportAllocs()
	for b.Loop() {
		facts, err := Observe(context.Background(), conns, spec, 0)
		if err != nil || len(facts.Hosts) != 64 || len(facts.Errors) != 0 {
			b.Fatalf("Observe: %v", err)
		}
	}
}
