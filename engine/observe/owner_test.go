package observe

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHelperListener is not a test: run by TestProbeSendsOnlyToOwner as a
// separate process (so that it can be put in a cgroup of its own), it
// serves /health on a loopback port (RF_OWNER_ADDR, default 127.0.0.1),
// prints the port, and logs each request it gets to the file
// RF_OWNER_LOG, with its Authorization header when it has one.
func TestHelperListener(t *testing.T) {
	logPath := os.Getenv("RF_OWNER_LOG")
	if logPath == "" {
		t.Skip("helper process")
	}
	addr := os.Getenv("RF_OWNER_ADDR")
	if addr == "" {
		addr = "127.0.0.1"
	}
	l, err := net.Listen("tcp", addr+":0")
	if err != nil {
		os.Exit(3)
	}
	fmt.Printf("%d\n", l.Addr().(*net.TCPAddr).Port)
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			if a := r.Header.Get("Authorization"); a != "" {
				fmt.Fprintln(f, r.Method, r.URL.Path, a)
			} else {
				fmt.Fprintln(f, r.Method, r.URL.Path)
			}
			f.Close()
		}
	}))
	os.Exit(0)
}

// startListener starts TestHelperListener; it returns the process, its
// port and its request log.
func startListener(t *testing.T) (*exec.Cmd, int, string) {
	return startListenerOn(t, "127.0.0.1")
}

// startListenerOn is startListener bound to addr only.
func startListenerOn(t *testing.T, addr string) (*exec.Cmd, int, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "requests")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperListener$")
	cmd.Env = append(os.Environ(), "RF_OWNER_LOG="+logPath, "RF_OWNER_ADDR="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("listener: %v", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("listener printed %q", line)
	}
	return cmd, port, logPath
}

// requests is what the listener was sent.
func requests(t *testing.T, logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestProbeSendsOnlyToOwner is issue 22 item 9: plan's health probe sent
// GET /health and /v1/models to whatever listened on the serve port (a
// foreign `nc -l` exited after one plan). The probe now sends a GET with
// an Owner only when the listening process is in the owner container's
// cgroup, read from the real ss(8) and /proc; a fake docker names the
// container and its ID.
func TestProbeSendsOnlyToOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the probe on this machine")
	}
	for _, tool := range []string{"ss", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("ss names other processes' sockets only to root; the listener is ours, but the cgroup case needs root")
	}
	id := fmt.Sprintf("%064x", os.Getpid()) // a container ID: 64 hex digits
	var probeAs func(t *testing.T, port int, bearer string, env map[string]string) HTTPResult
	probe := func(t *testing.T, port int) HTTPResult {
		return probeAs(t, port, "", nil)
	}
	probeAs = func(t *testing.T, port int, bearer string, env map[string]string) HTTPResult {
		dir := toolDir(t, "ss", "curl", "cat", "timeout")
		ps := fmt.Sprintf(`{"ID":"%s","Image":"img","Labels":"rayform.project=p","Names":"owner","Networks":"host","State":"running","Status":"Up","Current":false}`, id)
		docker := "#!/bin/sh\ncase $1 in ps) printf '%s\\n' '" + ps + "' ;; *) exit 1 ;; esac\n"
		if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(docker), 0o755); err != nil {
			t.Fatal(err)
		}
		url := fmt.Sprintf("http://127.0.0.1:%d/health", port)
		spec := HostSpec{Project: "p", Containers: []string{"owner"}, HTTP: []HTTPProbe{{URL: url, Owner: "owner", Bearer: bearer}}}
		if err := spec.Validate(); err != nil {
			t.Fatal(err)
		}
		f, err := Parse(runLocalEnv(t, ProbeScript(spec), dir, env))
		if err != nil {
			t.Fatal(err)
		}
		r, ok := f.HTTP[url]
		if !ok {
			t.Fatalf("no answer for %s: %+v", url, f.HTTP)
		}
		return r
	}

	t.Run("foreign listener", func(t *testing.T) {
		cmd, port, log := startListener(t)
		r := probe(t, port)
		if want := fmt.Sprintf("(pid %d)", cmd.Process.Pid); !strings.Contains(r.HeldBy, want) || r.Status != 0 {
			t.Errorf("answer %+v, want held by a process %s", r, want)
		}
		if got := requests(t, log); got != "" {
			t.Errorf("the foreign listener was sent:\n%s", got)
		}
	})

	t.Run("listener in the owner's cgroup", func(t *testing.T) {
		cg := "/sys/fs/cgroup/pids/rayform-test-" + id
		if err := os.Mkdir(cg, 0o755); err != nil {
			t.Skipf("cannot make a cgroup: %v", err)
		}
		t.Cleanup(func() { _ = os.Remove(cg) })
		cmd, port, log := startListener(t)
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Skipf("cannot move the listener into %s: %v", cg, err)
		}
		// The cgroup must be left before it can be removed.
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		r := probe(t, port)
		if r.Status != 200 || r.HeldBy != "" {
			t.Errorf("answer %+v, want 200 from the owner's listener", r)
		}
		if got := requests(t, log); got != "GET /health\n" {
			t.Errorf("the owner's listener was sent %q, want one GET /health", got)
		}
	})

	// Issue 38: a server bound to one address of the host (vLLM on the
	// fabric only) is asked there, and a probe with a Bearer sends the
	// deployment's token from its file: the Authorization header arrives,
	// and no command line held it.
	t.Run("owner bound to one address, with the deployment's token", func(t *testing.T) {
		cg := "/sys/fs/cgroup/pids/rayform-test-" + id
		if err := os.Mkdir(cg, 0o755); err != nil {
			t.Skipf("cannot make a cgroup: %v", err)
		}
		t.Cleanup(func() { _ = os.Remove(cg) })
		cmd, port, log := startListenerOn(t, "127.0.0.2")
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Skipf("cannot move the listener into %s: %v", cg, err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		home := t.TempDir()
		locks := filepath.Join(home, ".rayform", "locks")
		if err := os.MkdirAll(locks, 0o700); err != nil {
			t.Fatal(err)
		}
		token := strings.Repeat("ab", 32)
		if err := os.WriteFile(filepath.Join(locks, BearerFile("p.main")), []byte(bearerPrefix+token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := probeAs(t, port, "p.main", map[string]string{"HOME": home})
		if r.Status != 200 || r.HeldBy != "" {
			t.Errorf("answer %+v, want 200 from the owner's listener on 127.0.0.2", r)
		}
		if got, want := requests(t, log), "GET /health Bearer "+token+"\n"; got != want {
			t.Errorf("the owner's listener was sent %q, want %q", got, want)
		}
	})

	t.Run("nothing listens", func(t *testing.T) {
		r := probe(t, closedPort(t))
		if !r.Refused || r.HeldBy != "" {
			t.Errorf("answer %+v, want refused", r)
		}
	})
}
