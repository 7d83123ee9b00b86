package serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFront runs the front (frontPy) with python3 on loopback: each new
// connection goes to the port its port file names when it opens, a
// connection keeps its generation after the file is replaced, and at a
// first switch the front takes the port over from the process holding it
// (and the child it forked with a copy of the socket), which it kills.
func TestFront(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	gen := func(name string) int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					r := bufio.NewReader(c)
					for {
						if _, err := r.ReadString('\n'); err != nil {
							return
						}
						fmt.Fprintln(c, name)
					}
				}()
			}
		}()
		return l.Addr().(*net.TCPAddr).Port
	}
	blue, green := gen("blue"), gen("green")
	dir := t.TempDir()
	pf := filepath.Join(dir, "port")
	point := func(port int) {
		tmp := pf + ".tmp"
		if err := os.WriteFile(tmp, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, pf); err != nil {
			t.Fatal(err)
		}
	}
	point(blue)

	// The old serve: it holds the public port, and a child it forked
	// holds a copy of the listening socket (as vLLM's engine core does).
	old := exec.Command("python3", "-c", `import os, socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
if os.fork() == 0:
    time.sleep(600)
time.sleep(600)`)
	out, err := old.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Process.Kill(); _ = old.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	public, _ := strconv.Atoi(strings.TrimSpace(line))

	ctx, cancel := context.WithCancel(context.Background())
	front := exec.CommandContext(ctx, "python3", "-c", frontPy, "127.0.0.1", strconv.Itoa(public), pf, strconv.Itoa(old.Process.Pid))
	fout, err := front.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	front.Stderr = os.Stderr
	if err := front.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = front.Wait() })
	listening := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(fout).ReadString('\n')
		listening <- l
		_, _ = io.Copy(io.Discard, fout)
	}()
	var how string
	select {
	case how = <-listening:
		if !strings.Contains(how, "rayform front: listening") {
			t.Fatalf("front printed %q", how)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the front did not get the port in 20 s")
	}
	t.Logf("%s", strings.TrimSpace(how))
	switch {
	case strings.Contains(how, "sharing the old serve's socket"):
		// Both accept from one socket until the old one stops (rayform's
		// stop): connections still reach the front after it is gone.
		if err := exec.Command("pkill", "-KILL", "-P", strconv.Itoa(old.Process.Pid)).Run(); err != nil {
			t.Fatal(err)
		}
		_ = old.Process.Kill()
		_ = old.Wait()
	case strings.Contains(how, "taken over from the old serve"):
		if err := old.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("the old process was not killed: %v", err)
		}
	default:
		t.Errorf("the front does not say how it got the port: %q", how)
	}
	// Sharing the old serve's socket (pidfd_getfd, where allowed), the
	// old one is stopped by rayform after the front listens: kill it and
	// its child here; taking the port over, the front killed them.

	ask := func(c net.Conn) string {
		t.Helper()
		if _, err := fmt.Fprintln(c, "who"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		s, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(s)
	}
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(public)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first := dial()
	if got := ask(first); got != "blue" {
		t.Errorf("before the switch: %q, want blue", got)
	}
	point(green)
	if got := ask(dial()); got != "green" {
		t.Errorf("a new connection after the switch: %q, want green", got)
	}
	if got := ask(first); got != "blue" {
		t.Errorf("the connection opened before the switch: %q, want blue (it drains on its generation)", got)
	}
}

// TestFrontCannotListen: a front started for a new serve (no old process)
// on a port another process holds says why and exits, for the start's
// diagnosis (AddrInUse), instead of waiting for the port for ever.
func TestFrontCannotListen(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "python3", "-c", frontPy, "127.0.0.1", strconv.Itoa(port), filepath.Join(t.TempDir(), "port"), "").CombinedOutput()
	want := fmt.Sprintf("rayform front: cannot listen on 127.0.0.1:%d: ", port)
	if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "Errno 98") {
		t.Errorf("front on a held port: %v\n%s\nwant an exit with %q and Errno 98", err, out, want)
	}
}
