package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/rayform/rayform/engine/transport"
)

// TestObserveAssumedPeers: a peer address assumed from the state is checked
// in round 1 and, when the peer's own facts confirm it, costs no round 2; a
// wrong guess is dropped and the right address checked in round 2.
func TestObserveAssumedPeers(t *testing.T) {
	head := headOutput(t)
	routeTo := func(addr string) string {
		return fmt.Sprintf(`[{"dst":%q,"dev":"enp1s0f1np1","prefsrc":"192.168.200.13","flags":[],"uid":0,"cache":[]}]`, addr)
	}
	worker := func(guess string) []byte {
		return newOut().
			sec("meta", "hostname=spark2\narch=aarch64\n", "", 0).
			sec("ip.addr", fixture(t, "ip-addr-worker.json"), "", 0).
			sec("ip.route", fixture(t, "ip-route-worker.json"), "", 0).
			sec("route.batch addrs="+guess, routeTo(guess), "", 0).
			sec("tcp addr="+guess+" port=6379", "", "", 0).
			done()
	}
	peer := newOut().
		sec("route.batch addrs=192.168.200.12", routeTo("192.168.200.12"), "", 0).
		sec("tcp addr=192.168.200.12 port=6379", "", "", 0).
		done()
	tests := []struct {
		name       string
		guess      string
		wantRounds int
		wantChecks string
	}{
		{"right guess", "192.168.200.12", 1, "spark1 192.168.200.12 enp1s0f1np1; tcp spark1 192.168.200.12:6379"},
		{"wrong guess", "192.168.200.99", 2, "spark1 192.168.200.12 enp1s0f1np1; tcp spark1 192.168.200.12:6379"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var scripts []string
			conns := map[string]transport.Conn{
				"spark1": &cannedConn{host: "spark1", reply: func(transport.Cmd) (transport.Result, error) {
					return transport.Result{Stdout: head}, nil
				}},
				"spark2": &cannedConn{host: "spark2", reply: func(cmd transport.Cmd) (transport.Result, error) {
					scripts = append(scripts, cmd.Script)
					if strings.Contains(cmd.Script, "peer probe") {
						return transport.Result{Stdout: peer}, nil
					}
					return transport.Result{Stdout: worker(tt.guess)}, nil
				}},
			}
			hs := headSpec()
			hs.Fabric = Fabric{Interface: "enp1s0f1np1", CIDR: netip.MustParsePrefix("192.168.200.0/24")}
			ws := workerSpec()
			ws.Peers = []Peer{{Host: "spark1", Addr: netip.MustParseAddr(tt.guess), Port: 6379, Assumed: true}}
			facts, err := Observe(context.Background(), conns, Spec{Hosts: map[string]HostSpec{"spark1": hs, "spark2": ws}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := facts.RoundTrips["spark2"]; got != tt.wantRounds {
				t.Errorf("spark2: %d round trips, want %d", got, tt.wantRounds)
			}
			if !strings.Contains(scripts[0], "route get "+tt.guess) {
				t.Errorf("round 1 does not check the assumed address %s:\n%s", tt.guess, scripts[0])
			}
			var got []string
			for _, rc := range facts.Hosts["spark2"].RouteChecks {
				got = append(got, fmt.Sprintf("%s %v %s", rc.Peer, rc.Addr, rc.Dev))
			}
			for _, tc := range facts.Hosts["spark2"].TCPChecks {
				got = append(got, fmt.Sprintf("tcp %s %v:%d", tc.Peer, tc.Addr, tc.Port))
			}
			if strings.Join(got, "; ") != tt.wantChecks {
				t.Errorf("checks %q, want %q", strings.Join(got, "; "), tt.wantChecks)
			}
		})
	}
}

// psRow is what docker ps's formatting context offers the template (the
// subset psTemplate uses), as github.com/docker/cli's ContainerContext.
type psRow struct {
	id, names, state string
	labels           map[string]string
}

func (r psRow) ID() string                { return r.id }
func (r psRow) Names() string             { return r.names }
func (r psRow) Image() string             { return "img" }
func (r psRow) State() string             { return r.state }
func (r psRow) Status() string            { return "Up 1 minute" }
func (r psRow) Networks() string          { return "host" }
func (r psRow) Label(name string) string  { return r.labels[name] }
func (r psRow) Labels() string            { return "" }
func (r psRow) String(name string) string { return name }

// TestPSTemplate evaluates the probe's docker ps template with Go's
// text/template and docker's json function against containers in every
// relevant state: which are listed, and which are current.
func TestPSTemplate(t *testing.T) {
	tmpl := psTemplate("spark", []string{"rayform-main"}, map[string]string{"rayform-main": "abc123"})
	parsed, err := template.New("ps").Funcs(template.FuncMap{"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	}}).Parse(tmpl)
	if err != nil {
		t.Fatalf("template %s: %v", tmpl, err)
	}
	own := map[string]string{"rayform.project": "spark", "rayform.spec-hash": "abc123"}
	tests := []struct {
		name    string
		row     psRow
		listed  bool
		current bool
	}{
		{"ours, running, wanted hash", psRow{"1", "rayform-main", "running", own}, true, true},
		{"ours, exited", psRow{"2", "rayform-main", "exited", own}, true, false},
		{"ours, other hash", psRow{"3", "rayform-main", "running", map[string]string{"rayform.project": "spark", "rayform.spec-hash": "old"}}, true, false},
		{"ours, other name (a stray)", psRow{"4", "rayform-old", "running", own}, true, false},
		{"foreign with our name", psRow{"5", "rayform-main", "running", nil}, true, false},
		{"someone else's", psRow{"6", "jupyter", "running", map[string]string{"rayform.project": "other"}}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := parsed.Execute(&b, tt.row); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if !tt.listed {
				if out != "" {
					t.Errorf("listed %q, want nothing", out)
				}
				return
			}
			var line struct {
				ID      string
				Current bool
			}
			if err := json.Unmarshal([]byte(out), &line); err != nil || line.ID != tt.row.id {
				t.Fatalf("line %q: %v", out, err)
			}
			if line.Current != tt.current {
				t.Errorf("Current = %v, want %v (%s)", line.Current, tt.current, out)
			}
		})
	}
}

// TestProbeDockerCalls runs the probe's docker part through real sh with a
// docker that answers from canned lines and logs its arguments: a host
// whose containers are all current costs one docker call.
func TestProbeDockerCalls(t *testing.T) {
	current := `{"ID":"c1","Image":"img","Labels":"rayform.project=spark","Names":"rayform-main","State":"running","Status":"Up","Current":true}`
	stale := `{"ID":"c2","Image":"img","Labels":"rayform.project=spark","Names":"rayform-main","State":"exited","Status":"Exited (1)","Current":false}`
	tests := []struct {
		name      string
		ps        string // docker ps's stdout
		psFails   bool
		wantCalls []string
		wantDok   bool
	}{
		{"all current", current + "\n\n", false, []string{"ps"}, true},
		{"one stale", "\n" + stale + "\n", false, []string{"ps", "inspect c2", "image inspect", "image history"}, true},
		{"missing", "\n", false, []string{"ps", "image inspect", "image history"}, true},
		{"daemon down", "", true, []string{"ps"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := toolDir(t, "cat", "printf")
			log := filepath.Join(t.TempDir(), "calls")
			psOut := filepath.Join(t.TempDir(), "ps")
			if err := os.WriteFile(psOut, []byte(tt.ps), 0o644); err != nil {
				t.Fatal(err)
			}
			fail := ""
			if tt.psFails {
				fail = `echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2; exit 1`
			}
			fake := `#!/bin/sh
case "$1 $2" in
"ps -a") echo ps >>` + log + `; ` + fail + `
	cat ` + psOut + ` ;;
"inspect --type") shift 5; echo "inspect $*" >>` + log + `
	echo '{"Id":"c2","Name":"/rayform-main","State":{"Status":"exited","Running":false,"ExitCode":1},"Config":{"Labels":{"rayform.project":"spark"},"Env":[]}}' ;;
"image inspect") echo "image inspect" >>` + log + `
	echo '{"Id":"sha256:1","RepoTags":["img:latest"],"Architecture":"arm64","Config":{"Entrypoint":null,"Cmd":null,"Labels":null,"Env":["PATH"]}}' ;;
"image history") echo "image history" >>` + log + `; echo '"RUN pip install ray"' ;;
*) echo "unexpected docker $*" >>` + log + `; exit 2 ;;
esac
`
			if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			spec := HostSpec{Project: "spark", Images: []string{"img:latest"}, Containers: []string{"rayform-main"},
				SpecHashes: map[string]string{"rayform-main": "abc123"}, EnvKeys: testEnvKeys}
			out := runLocal(t, ProbeScript(spec), dir+":/usr/bin:/bin")
			f, err := Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			calls, _ := os.ReadFile(log)
			if got := strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(calls)), "\n", " |")); strings.Join(got, " ") != strings.Join(strings.Fields(strings.Join(tt.wantCalls, " |")), " ") {
				t.Errorf("docker calls:\n%s\nwant: %v", calls, tt.wantCalls)
			}
			if f.Docker.Available != tt.wantDok {
				t.Errorf("docker %+v, want available=%v", f.Docker, tt.wantDok)
			}
			if !tt.wantDok {
				if !strings.HasPrefix(f.Docker.Err, "Cannot connect") || f.Containers.Err != f.Docker.Err {
					t.Errorf("daemon down: docker %+v, containers %+v", f.Docker, f.Containers)
				}
				return
			}
			if f.Containers.Err != "" {
				t.Errorf("containers: %s", f.Containers.Err)
			}
			for _, c := range f.Containers.List {
				if c.Inspected == (c.ID == "c1") {
					t.Errorf("container %s inspected=%v", c.ID, c.Inspected)
				}
			}
		})
	}
}

func TestSplitIPBatch(t *testing.T) {
	ok := func(dst string) string { return fmt.Sprintf(`[{"dst":%q,"dev":"eth0"}]`, dst) }
	tests := []struct {
		name   string
		stdout string
		stderr string
		rc     int
		want   []string // per command: stdout, or "!" + error
	}{
		{"all answered", "[]\n[]\n" + ok("8.8.8.8") + "\n" + ok("10.0.0.2"), "", 0,
			[]string{"[]", "[]", ok("8.8.8.8"), ok("10.0.0.2")}},
		{"default unreachable, peer answered", "[]\n[]\n" + ok("10.0.0.2"),
			"RTNETLINK answers: Network is unreachable\nCommand failed -:3\n", 1,
			[]string{"[]", "[]", "!RTNETLINK answers: Network is unreachable", ok("10.0.0.2")}},
		{"two failures keep their own messages", "[]\n[]",
			"RTNETLINK answers: Network is unreachable\nCommand failed -:3\nError: any valid prefix is expected rather than \"x\".\nCommand failed -:4\n", 1,
			[]string{"[]", "[]", "!RTNETLINK answers: Network is unreachable", "!Error: any valid prefix is expected rather than \"x\"."}},
		{"ip missing", "", "rayform: ip: not installed", 127,
			[]string{"!ip: not installed", "!ip: not installed", "!ip: not installed", "!ip: not installed"}},
		{"cut short", "[]\n", "", 0,
			[]string{"[]", "!ip: no answer", "!ip: no answer", "!ip: no answer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &section{name: secIPBatch, stdout: []byte(tt.stdout), stderr: []byte(tt.stderr), rc: tt.rc, complete: true}
			parts := splitIPBatch(s, len(tt.want))
			for i, p := range parts {
				got := string(p.stdout)
				if msg := p.failure(); msg != "" {
					got = "!" + msg
				}
				if got != tt.want[i] {
					t.Errorf("command %d: %q, want %q", i+1, got, tt.want[i])
				}
			}
		})
	}
}

// TestProbeIPBatchHere runs the probe's ip batch on this machine and
// compares with separate ip calls.
func TestProbeIPBatchHere(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip")
	}
	spec := HostSpec{Peers: []Peer{{Host: "lo", Addr: netip.MustParseAddr("127.0.0.1")}, {Host: "bad", Addr: netip.MustParseAddr("::")}}}
	f, err := Parse(runLocal(t, ProbeScript(spec), os.Getenv("PATH")))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := exec.Command("ip", "-j", "route", "show").Output()
	var routes []ipRouteJSON
	_ = json.Unmarshal(want, &routes)
	if len(f.Routes.List) != len(routes) || f.Routes.Err != "" {
		t.Errorf("routes %+v, want %d routes as ip route show", f.Routes, len(routes))
	}
	if len(f.RouteChecks) != 2 || f.RouteChecks[0].Dev != "lo" || f.RouteChecks[0].Err != "" {
		t.Errorf("route checks %+v", f.RouteChecks)
	}
	if len(f.Links.List) == 0 || f.Addresses.Err != "" {
		t.Errorf("links %+v addresses %+v", f.Links, f.Addresses)
	}
	// The architecture read without uname (where the kernel offers it) is
	// uname's.
	if arch, err := exec.Command("uname", "-m").Output(); err == nil && f.Arch != strings.TrimSpace(string(arch)) {
		t.Errorf("arch %q, uname -m says %q", f.Arch, strings.TrimSpace(string(arch)))
	}
	if f.Memory.TotalBytes == 0 || f.Memory.Err != "" {
		t.Errorf("memory %+v", f.Memory)
	}
}
