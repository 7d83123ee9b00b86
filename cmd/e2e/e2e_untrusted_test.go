//go:build linux

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// TestE2EKilledMidDownload (issue 30, item 5): rayform is killed with
// SIGKILL while a node downloads the model from the hub (a hub with the
// lab's repositories that never answers a node's file request). The
// download on the node, which writes nothing to its SSH session, ends with
// its run: its
// connection to the hub closes (before, it ran on, holding the fence, and
// the next apply waited 60 s for it and failed). The next apply converges.
// force-unlock ends an orphan that its watchdog cannot see, naming it.
// Then (item 4) `rayform logs` of the serve, whose log holds the 8-bit CSI
// as a raw byte and as a character, prints the text around them only.
func TestE2EKilledMidDownload(t *testing.T) {
	// Fast mode: the subject is what runs on the nodes, not Ray.
	l := startLab(t, "rfe2ekmd", append([]string{"-model-seed=false"}, fastRay...)...)
	var hang atomic.Bool
	hang.Store(true)
	asked := make(chan struct{}, 1)
	gone := make(chan struct{}, 1)
	// The lab's repositories (generated, the same as the lab hub's), served
	// from the client's namespace on another port.
	repos, err := lab.NewHub(nil, lab.LabHubRepos(64)...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := lab.ListenIn(l.name+"-client", "tcp", lab.ClientIP()+":0")
	if err != nil {
		t.Fatal(err)
	}
	hub := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		// A node's file request (rayform's own questions come from the
		// client's address) waits until the node goes away.
		if hang.Load() && host != lab.ClientIP() && strings.Contains(r.URL.Path, "/resolve/") {
			select {
			case asked <- struct{}{}:
			default:
			}
			<-r.Context().Done()
			select {
			case gone <- struct{}{}:
			default:
			}
			return
		}
		repos.ServeHTTP(w, r)
	}))
	hub.Listener.Close()
	hub.Listener = ln
	hub.Start()
	defer hub.Close()
	dir := l.modelConfig(2, fmt.Sprintf("model \"m\" {\n  source   = %q\n  endpoint = %q\n}", lab.HubRepoTiny, hub.URL), "")

	apply, out := l.start("-chdir="+dir, "apply", "-auto-approve")
	select {
	case <-asked:
	case <-time.After(5 * time.Minute):
		apply.Process.Kill()
		apply.Wait()
		t.Fatalf("no node asked the hub for a file\n%s", out)
	}
	if err := apply.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	apply.Wait()
	select {
	case <-gone:
	case <-time.After(30 * time.Second):
		t.Fatalf("the node's download still runs 30 s after rayform was killed\n%s", out)
	}
	// Nothing holds a fence of the lab's nodes any more.
	for _, n := range []string{"spark1", "spark2"} {
		held, err := l.ssh(n, `find /proc/[0-9]*/fd -lname "$HOME/.rayform/locks/*.fence" 2>/dev/null; true`)
		if err != nil || strings.TrimSpace(held) != "" {
			t.Errorf("a fence on %s is still held: %q %v", n, held, err)
		}
	}

	hang.Store(false)
	r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
	mustCode(t, "apply after the kill", r, exitOK)
	if strings.Contains(r.stdout+r.stderr, "more than 60 s") {
		t.Errorf("the apply after the kill waited for the fence:\n%s%s", r.stdout, r.stderr)
	}
	mustContain(t, "apply after the kill", r.stdout, "Apply complete!")
	t.Logf("the apply after the kill took %s", r.elapsed)
	mustCode(t, "plan after the kill", l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode"), exitOK)

	// An orphan no watchdog sees (as when sshd still believes its
	// connection open): a fenced command of the last run's generation in
	// a session of its own on spark2. force-unlock ends it, saying what
	// it ended where.
	name := lock.Name(filepath.Base(dir), "spark")
	gen, err := l.ssh("spark2", `cat "$HOME/.rayform/locks/`+lock.FenceFile(name)+`"`)
	g, perr := strconv.ParseUint(strings.TrimSpace(gen), 10, 64)
	if err != nil || perr != nil {
		t.Fatalf("the fence on spark2: %q %v %v", gen, err, perr)
	}
	script, err := transport.FencedScript([]transport.Fence{{Lock: name, File: lock.FenceFile(name), Gen: g}}, "exec sleep 300")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := l.ssh("spark2", "setsid sh -c "+shell.Quote(script)+" </dev/null >/dev/null 2>&1 &"); err != nil {
		t.Fatalf("starting the orphan: %v\n%s", err, out)
	}
	holders := func() string {
		out, _ := l.ssh("spark2", `find /proc/[0-9]*/fd -lname "$HOME/.rayform/locks/*.fence" 2>/dev/null; true`)
		return strings.TrimSpace(out)
	}
	waitFor(t, "the orphan to hold the fence", 30*time.Second, func() bool { return holders() != "" })
	unlock := l.rayform("", "-chdir="+dir, "force-unlock", "-force", "spark")
	mustCode(t, "force-unlock", unlock, exitOK)
	mustContain(t, "force-unlock", unlock.stdout+unlock.stderr, "ray_cluster.spark is not locked.",
		"Warning: ended on spark2 1 command(s) that an earlier rayform run (lock \""+name+"\", fence generation "+strconv.FormatUint(g, 10)+") left running there:",
		"exec sleep 300")
	if h := holders(); h != "" {
		t.Errorf("the fence on spark2 is still held after force-unlock: %s", h)
	}

	// Item 4: the serve's log holds the 8-bit CSI (as a raw byte outside
	// UTF-8, and as U+009B) and an OSC 52 clipboard write.
	if out, err := l.ssh("spark1", `docker exec rayform-spark sh -c "printf 'before\2332Jafter\302\2332Jend\033]52;c;ZXZpbA==\007tail\n' >> /tmp/rayform/serve/serve-s.log"`); err != nil {
		t.Fatalf("writing the log: %v\n%s", err, out)
	}
	logs := l.rayform("", "-chdir="+dir, "logs", "vllm_serve.s")
	mustCode(t, "logs", logs, exitOK)
	mustContain(t, "logs", logs.stdout, "beforeafterendtail")
	for _, c := range []string{"\x9b", "\u009b", "\x1b", "\x07"} {
		if strings.Contains(logs.stdout+logs.stderr, c) {
			t.Errorf("logs printed %q", c)
		}
	}
}
