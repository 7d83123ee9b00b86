package observe

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fakeHead serves the head's loopback endpoints from fixtures: Ray's
// dashboard node table and vLLM's /health and /v1/models.
func fakeHead(t *testing.T) (port int) {
	t.Helper()
	nodes, models := fixture(t, "dashboard-nodes.json"), fixture(t, "vllm-models.json")
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v0/nodes", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("limit") == "" {
			http.Error(w, "want a limit", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(nodes))
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(models)) })
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ = strconv.Atoi(p)
	return port
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// toolDir returns a directory holding links to the named tools that exist
// on this machine, to run the probe with a PATH of exactly those tools.
func toolDir(t *testing.T, tools ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func has(dir, tool string) bool {
	_, err := os.Stat(filepath.Join(dir, tool))
	return err == nil
}

// localSpec is a head spec pointing at this machine's loopback.
func localSpec(t *testing.T) HostSpec {
	port := fakeHead(t)
	pid := strconv.Itoa(os.Getpid())
	return HostSpec{
		Project:    "rfo-" + pid,
		Images:     []string{"rfo-" + pid + "/absent:1"},
		Containers: []string{"rfo-" + pid + "-head"},
		EnvKeys:    testEnvKeys,
		HTTP:       headProbes("rfo-"+pid+"-head", port, port),
		Peers: []Peer{
			{Host: "open", Addr: netip.MustParseAddr("127.0.0.1"), Port: port},
			{Host: "closed", Addr: netip.MustParseAddr("127.0.0.1"), Port: closedPort(t)},
		},
	}
}

// TestProbeRunsHere runs the real probe on this machine with different sets
// of tools on PATH and checks the facts against what Go itself sees.
func TestProbeRunsHere(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the probe on this machine")
	}
	all := []string{"ip", "curl", "wget", "docker", "nvidia-smi", "ibdev2netdev", "timeout", "bash", "nc", "uname", "getconf", "env", "head"}
	tests := []struct {
		name  string
		tools []string
	}{
		{"all tools", all},
		{"wget instead of curl", []string{"ip", "wget", "docker", "timeout", "bash", "uname"}},
		{"no timeout, no http client", []string{"ip", "docker", "nc"}},
		{"nothing", nil},
	}
	spec := localSpec(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := toolDir(t, tt.tools...)
			out := runLocal(t, ProbeScript(spec), dir)
			f, err := Parse(out)
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, out)
			}
			if !f.Complete {
				t.Errorf("probe output incomplete:\n%s", out)
			}
			checkHostFacts(t, f, dir, spec)
		})
	}
}

func checkHostFacts(t *testing.T, f *HostFacts, dir string, spec HostSpec) {
	t.Helper()
	checkExecFacts(t, f.Exec, dir)
	if host, _ := os.Hostname(); f.Hostname != host {
		t.Errorf("hostname %q, want %q", f.Hostname, host)
	}

	// Network: exactly what the kernel tells Go.
	if !has(dir, "ip") {
		if f.Addresses.Err != "ip: not installed" || len(f.Links.List) != 0 {
			t.Errorf("without ip: addresses %+v, links %+v", f.Addresses, f.Links)
		}
	} else {
		ifs, err := net.Interfaces()
		if err != nil {
			t.Fatal(err)
		}
		var wantAddrs, wantLinks []string
		for _, ifc := range ifs {
			wantLinks = append(wantLinks, ifc.Name+" mtu "+strconv.Itoa(ifc.MTU))
			addrs, _ := ifc.Addrs()
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					ones, _ := ipn.Mask.Size()
					ip, _ := netip.AddrFromSlice(ipn.IP)
					wantAddrs = append(wantAddrs, ifc.Name+" "+netip.PrefixFrom(ip.Unmap(), ones).String())
				}
			}
		}
		var gotAddrs, gotLinks []string
		for _, a := range f.Addresses.List {
			gotAddrs = append(gotAddrs, a.Interface+" "+a.Prefix.String())
		}
		for _, l := range f.Links.List {
			gotLinks = append(gotLinks, l.Name+" mtu "+strconv.Itoa(l.MTU))
		}
		slices.Sort(wantAddrs)
		slices.Sort(gotAddrs)
		slices.Sort(wantLinks)
		slices.Sort(gotLinks)
		if !slices.Equal(gotAddrs, wantAddrs) || f.Addresses.Err != "" {
			t.Errorf("addresses\ngot:  %v (err %q)\nwant: %v", gotAddrs, f.Addresses.Err, wantAddrs)
		}
		if !slices.Equal(gotLinks, wantLinks) {
			t.Errorf("links\ngot:  %v\nwant: %v", gotLinks, wantLinks)
		}
		for _, r := range f.Routes.List {
			if r.Dst == "default" && (f.DefaultRoute.Dev != r.Dev || !f.DefaultRoute.Src.IsValid()) {
				t.Errorf("default route %+v, but the table's default is via %s", f.DefaultRoute, r.Dev)
			}
		}
		if len(f.RouteChecks) != 1 || f.RouteChecks[0].Dev != "lo" || f.RouteChecks[0].Src != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("route to 127.0.0.1: %+v", f.RouteChecks)
		}
	}

	// Memory: /proc/meminfo as Go reads it.
	mem, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	wantMem := parseMeminfo(&section{stdout: mem, complete: true})
	if f.Memory.TotalBytes != wantMem.TotalBytes || f.Memory.TotalBytes == 0 || f.Memory.Err != "" {
		t.Errorf("memory %+v, want total %d", f.Memory, wantMem.TotalBytes)
	}

	// GPUs: none here, and the reason says why.
	if !has(dir, "nvidia-smi") {
		if len(f.GPUs.List) != 0 || f.GPUs.Err != "nvidia-smi: not installed" {
			t.Errorf("GPUs without nvidia-smi: %+v", f.GPUs)
		}
	}

	// Docker: whatever the client says when asked directly.
	checkDocker(t, f, dir)

	// TCP: open and closed loopback ports.
	wantTCP := map[int]bool{spec.Peers[0].Port: true, spec.Peers[1].Port: false}
	canTCP := has(dir, "nc") || has(dir, "bash") && has(dir, "timeout")
	if len(f.TCPChecks) != 2 {
		t.Errorf("TCP checks: %+v", f.TCPChecks)
	}
	for _, c := range f.TCPChecks {
		switch {
		case !canTCP:
			if c.Open || c.Err == "" {
				t.Errorf("TCP check without a way to connect: %+v", c)
			}
		case c.Open != wantTCP[c.Port] || (c.Open == (c.Err != "")):
			t.Errorf("TCP check %+v, want open=%v", c, wantTCP[c.Port])
		}
	}

	// Head endpoints on loopback.
	if has(dir, "curl") || has(dir, "wget") {
		if h := healthOf(f); h.Status != 200 || h.Err != "" {
			t.Errorf("health %+v", h)
		}
		if m := modelsOf(f); m.Status != 200 || !strings.Contains(m.Body, `"max_model_len":32768`) {
			t.Errorf("models %+v", m)
		}
		if r := tableOf(f); r.Status != 200 || r.Err != "" || r.Via == "exec" {
			t.Errorf("node table %+v", r)
		}
	} else if healthOf(f).Err != "neither curl nor wget is installed" || tableOf(f).Status == 200 {
		t.Errorf("without an HTTP client: health %+v, node table %+v", healthOf(f), tableOf(f))
	}
}

func checkDocker(t *testing.T, f *HostFacts, dir string) {
	t.Helper()
	if !has(dir, "docker") {
		if f.Docker.Installed || f.Docker.Available || f.Docker.Err != "docker: not installed" {
			t.Errorf("docker without docker: %+v", f.Docker)
		}
		return
	}
	// The probe lists containers, so docker ps is its daemon check.
	cmd := exec.Command(filepath.Join(dir, "docker"), "ps", "-a", "--format", "{{.ID}}")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err != nil {
		want := lastLine(stderr.Bytes())
		if !f.Docker.Installed || f.Docker.Available || f.Docker.Err != want || want == "" {
			t.Errorf("docker %+v, want unavailable with %q", f.Docker, want)
		}
		for _, img := range f.Images {
			if img.Err != "not probed: docker unavailable" {
				t.Errorf("image %+v, want not probed", img)
			}
		}
		if f.Containers.Err != want {
			t.Errorf("containers %+v, want the error of docker ps %q", f.Containers, want)
		}
		return
	}
	if !f.Docker.Available || f.Docker.Err != "" {
		t.Errorf("docker %+v, want available", f.Docker)
	}
	if len(f.Images) != 1 || f.Images[0].Present || f.Images[0].Err != "" {
		t.Errorf("absent image: %+v", f.Images)
	}
	if len(f.Containers.List) != 0 || f.Containers.Err != "" {
		t.Errorf("containers of a project that has none: %+v", f.Containers)
	}
}

// TestProbeReadsStdinSafely runs the probe fed on stdin (`sh -s`), the way
// a transport may send it: no tool may swallow the rest of the script.
func TestProbeReadsStdinSafely(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the probe on this machine")
	}
	cmd := exec.Command("/bin/sh", "-s")
	cmd.Stdin = strings.NewReader(ProbeScript(HostSpec{Project: "rfo-stdin", HTTP: []HTTPProbe{{URL: "http://127.0.0.1:" + strconv.Itoa(closedPort(t)) + "/health"}}}))
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(out)
	if err != nil || !f.Complete {
		t.Fatalf("probe fed on stdin did not finish: %v\n%s", err, out)
	}
	if _, err := exec.LookPath("curl"); err == nil && !healthOf(f).Refused {
		t.Errorf("nothing listens on the serve port, want refused: %+v", healthOf(f))
	}
}

func TestParseNotProbeOutput(t *testing.T) {
	for _, in := range []string{"", "sh: 1: syntax error\n", marker + " probe x\n", marker + " probe 99\n"} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) succeeded, want ErrNotProbeOutput", in)
		}
	}
	// Login noise before the header is tolerated.
	f, err := Parse([]byte("Welcome to Ubuntu\n" + marker + " probe 1\n" + marker + " done\n"))
	if err != nil || !f.Complete {
		t.Errorf("Parse with a banner: %v %+v", err, f)
	}
}
