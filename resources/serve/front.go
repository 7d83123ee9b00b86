package serve

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/servefiles"
	"github.com/rayform/rayform/resources/stepenv"
)

// The front of a serve: how a blue/green replacement (bluegreen.go) moves
// the public endpoint from one vLLM generation to the next without a
// moment in which the port is closed.
//
// vLLM 0.32's API server sets SO_REUSEPORT only when it runs several API
// server processes (--api-server-count), so a second vLLM cannot bind the
// serve's port beside the first, and Linux refuses any other listener on
// an address a listening socket holds without it. An iptables redirect
// would need root on the host and rules outside the container, which
// rayform leaves to the operator. So the serve's port is held by a small
// forwarder, the front: python3 (every cluster image has it; vLLM runs on
// it) with asyncio, run in the head container beside the serve as the
// serve itself is (docker exec -d, its pid, port and log files in
// servefiles.Dir under the serve's record name, so it has the serve's
// ownership and dies with the container). It listens where vLLM would
// (the serve's --host: the head's fabric address by default, closed by
// default holds), and forwards each new TCP connection to the loopback
// port its port file names, read per connection; rayform replaces that
// file atomically (write a temporary file, rename). A connection keeps
// the generation it was opened to, so the old one drains while new
// connections reach the new one. The generations listen on loopback only.
//
// Every serve starts behind its front where the head container has
// python3 (startServe): the front first, on the public address, then vLLM
// on a loopback port of its own, so that its first blue/green switch only
// repoints the front. A stop-then-start replacement, a delete and destroy
// stop the front with the serve (stopFrontStep); the replacement starts a
// new one. Without python3 (the lab's simnode-only images) vLLM binds the
// public port itself, as serves started before rayform had fronts did:
// such a serve gets its front at its first blue/green replacement, which
// takes the port over from the old vLLM (frontPy's OLDPID).

// frontPy is the front: python3 -c frontPy HOST PORT PORTFILE [OLDPID].
// It binds HOST:PORT, prints "rayform front: listening", and forwards each
// connection to 127.0.0.1:<the port PORTFILE names>; a connection it
// cannot forward is closed (the client sees the connection end, as when
// no server runs). Without OLDPID, a port it cannot bind within 10 s
// (the kernel frees a stopped serve's port at once; anything else holds
// it) ends it with "rayform front: cannot listen on HOST:PORT: ERROR".
//
// OLDPID is the vLLM that holds the port at a serve's first switch: the
// port cannot be bound beside it (no SO_REUSEPORT). The front first tries
// to share the old vLLM's own listening socket (pidfd_getfd(2), Linux
// 5.6+, allowed where the container may ptrace its own processes: same
// user, Yama's ptrace_scope 0, a seccomp profile that admits it): both
// then accept from one socket, and the old vLLM's SIGTERM (rayform's stop
// after the front listens) leaves the socket open in the front, so no
// connection is ever refused and the old one drains gracefully. Where
// that is refused it takes the port over: a SIGTERM would not free it at
// once (vLLM's API server closes its socket, but the engine core process
// it forked holds a copy until the engine has shut down, and connections
// queue unanswered on it meanwhile), so the front waits (up to 10 s) for a
// moment when no connection to the port is established, kills the old
// process and every process it forked (SIGKILL) and binds the port as
// soon as the kernel frees it: the port is closed while the old
// processes' memory is unmapped (about 0.4 s for 2.5 GB, measured).
const frontPy = `import asyncio, os, signal, sys, time
host, port, pf = sys.argv[1], int(sys.argv[2]), sys.argv[3]
old = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] else 0
def target():
    with open(pf) as f:
        return int(f.read().strip())
def established():
    n = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                for line in f.readlines()[1:]:
                    c = line.split()
                    if int(c[1].rsplit(":", 1)[1], 16) == port and c[3] == "01":
                        n += 1
        except OSError:
            pass
    return n
def tree(pid):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out
def listen_inode():
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                for line in f.readlines()[1:]:
                    c = line.split()
                    if int(c[1].rsplit(":", 1)[1], 16) == port and c[3] == "0A":
                        return c[9]
        except OSError:
            pass
    return None
def share():
    import ctypes, socket
    ino = listen_inode()
    if not ino:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in tree(old):
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) != "socket:[%s]" % ino:
                    continue
                pfd = os.pidfd_open(pid)
                nfd = libc.syscall(438, pfd, int(fd), 0)
                os.close(pfd)
            except (OSError, AttributeError, ValueError):
                continue
            if nfd >= 0:
                return socket.socket(fileno=nfd)
    return None
def take_over():
    end = time.monotonic() + 10
    while established() and time.monotonic() < end:
        time.sleep(0.005)
    for p in tree(old):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
async def pipe(r, w):
    try:
        while True:
            b = await r.read(65536)
            if not b:
                break
            w.write(b)
            await w.drain()
        if w.can_write_eof():
            w.write_eof()
    except Exception:
        pass
async def handle(cr, cw):
    try:
        ur, uw = await asyncio.open_connection("127.0.0.1", target())
    except Exception:
        cw.close()
        return
    await asyncio.gather(pipe(cr, uw), pipe(ur, cw))
    for w in (uw, cw):
        try:
            w.close()
        except Exception:
            pass
async def main():
    global old
    how = ""
    end = time.monotonic() + 10
    while True:
        try:
            srv = await asyncio.start_server(handle, host, port, reuse_address=True, backlog=1024)
            break
        except OSError as e:
            if old:
                shared = share()
                if shared is not None:
                    srv = await asyncio.start_server(handle, sock=shared)
                    how = " (sharing the old serve's socket)"
                    break
                take_over()
                how = " (taken over from the old serve)"
                old = 0
                end = time.monotonic() + 10
            elif time.monotonic() > end:
                print("rayform front: cannot listen on %s:%d: %s" % (host, port, e), flush=True)
                sys.exit(1)
            await asyncio.sleep(0.001)
    print("rayform front: listening on %s:%d%s" % (host, port, how), flush=True)
    async with srv:
        await srv.serve_forever()
asyncio.run(main())
`

// Paths of the front inside the head container.
func (s ServeSpec) frontPidPath() string {
	return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".front.pid"
}
func (s ServeSpec) frontPortPath() string {
	return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".front.port"
}
func (s ServeSpec) frontLogPath() string {
	return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".front.log"
}

// frontAlive is the shell test that the serve's front runs.
func (s ServeSpec) frontAlive() string {
	return fmt.Sprintf(`[ -f %[1]s ] && kill -0 "$(cat %[1]s)" 2>/dev/null`, shell.Quote(s.frontPidPath()))
}

// pointFrontScript makes the front send new connections to port: the
// port file replaced by a rename, so the front never reads half of it.
func (s ServeSpec) pointFrontScript(port int) string {
	f := shell.Quote(s.frontPortPath())
	tmp := shell.Quote(s.frontPortPath() + ".tmp")
	return fmt.Sprintf("mkdir -p %s && printf '%%d\\n' %d > %s && mv -f %s %s", servefiles.Dir, port, tmp, tmp, f)
}

// startFrontArgs is the docker exec that starts the front detached,
// listening on host:s.Port; with takeOver, taking the port over from the
// serve's running process (its pid file's) if that holds it (a serve
// started without a front).
func (s ServeSpec) startFrontArgs(host string, takeOver bool) []string {
	old := `old=""`
	if takeOver {
		old = "old=$(cat " + shell.Quote(s.pidPath()) + " 2>/dev/null)"
	}
	script := fmt.Sprintf("echo $$ > %s; %s; exec python3 -c %s %s %s %s \"$old\" > %s 2>&1",
		shell.Quote(s.frontPidPath()), old, shell.Quote(frontPy), shell.Quote(host), strconv.Itoa(s.Port), shell.Quote(s.frontPortPath()), shell.Quote(s.frontLogPath()))
	return []string{"docker", "exec", "-d", s.Container, "sh", "-c", script}
}

// stopPidScript stops the process a pid file names (SIGTERM, SIGCONT;
// SIGKILL after secs seconds) and removes the pid file and files.
func stopPidScript(pidPath string, secs int, files ...string) string {
	q := shell.Quote(pidPath)
	rm := []string{q}
	for _, f := range files {
		rm = append(rm, shell.Quote(f))
	}
	return fmt.Sprintf(`if [ -f %[1]s ]; then p="$(cat %[1]s)"; kill -TERM "$p" 2>/dev/null; kill -CONT "$p" 2>/dev/null; i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt %[2]d ]; do sleep 0.1; i=$((i+1)); done; kill -KILL "$p" 2>/dev/null; fi; rm -f %[3]s`,
		q, secs*10, strings.Join(rm, " "))
}

// stopFrontScript stops the serve's front and a next generation left by
// an interrupted blue/green replacement (nextStopScript), and removes
// their files.
func (s ServeSpec) stopFrontScript() string {
	return stopPidScript(s.frontPidPath(), 10, s.frontPortPath()) + "; " + nextStopScript(s) + "; true"
}

// frontListeningScript prints the front's line that says it listens, and
// how it got the port, or that it cannot, once it does (its log, which
// each start of the front begins anew).
func (s ServeSpec) frontListeningScript() string {
	return fmt.Sprintf("grep -m1 -e 'rayform front: listening' -e 'rayform front: cannot listen' %s 2>/dev/null; true", shell.Quote(s.frontLogPath()))
}

// frontContainer is the serve's head container when its front (python3,
// in that container) is what listens on the serve's port, else "": the
// port is then the serve's own, which its replacement frees (the stop and
// stopFrontStep) before it starts; plan's port check leaves it alone.
func frontContainer(hf *observe.HostFacts, spec ServeSpec) string {
	if hf == nil {
		return ""
	}
	for _, l := range hf.Listening.On(spec.Port) {
		if l.Container == spec.Container && strings.HasPrefix(l.Process, "python") {
			return spec.Container
		}
	}
	return ""
}

// loopbackPort is a free loopback port of the head container for a
// generation of the serve; python is false when the container has no
// python3, so no front (every vLLM image has it; the lab's simnode-only
// images do not).
func (r *serveRun) loopbackPort(ctx context.Context) (port int, python bool, err error) {
	res, err := r.exec(ctx, freePortScript, false)
	if stepenv.ExitCode(err) == 127 {
		return 0, false, nil
	}
	port, perr := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil || perr != nil || port <= 0 {
		return 0, false, fmt.Errorf("finding a free loopback port for vllm serve %s on %s: %v %v", r.spec.Name, r.node(), err, perr)
	}
	return port, true, nil
}

// startFront points the serve's front at the generation on
// 127.0.0.1:port, and starts the front where none runs, listening where
// the serve's --host says, and waits until it listens; with takeOver it
// takes the port over from the serve's running process (a serve started
// without a front). A front that cannot get the port fails with its
// reason, diagnosed (a port another process holds).
func (r *serveRun) startFront(ctx context.Context, port int, takeOver bool, progress func(string)) error {
	host := r.spec.ListenHost()
	if host == "" {
		return fmt.Errorf("%s: the head's fabric address is not known; run rayform apply again", r.spec.Resource)
	}
	script := r.spec.pointFrontScript(port) + "; " + r.spec.frontAlive() + " && echo alive || echo none"
	res, err := r.exec(ctx, script, true)
	if err != nil {
		return fmt.Errorf("pointing the front of vllm serve %s on %s at 127.0.0.1:%d: %w", r.spec.Name, r.node(), port, err)
	}
	if strings.TrimSpace(string(res.Stdout)) == "alive" {
		return nil
	}
	if _, err := r.e.Mutate(ctx, r.node(), r.spec.startFrontArgs(host, takeOver)...); err != nil {
		return fmt.Errorf("starting the front of vllm serve %s on %s: %w", r.spec.Name, r.node(), err)
	}
	line := ""
	err = r.e.PollUntil(ctx, frontTakeOver, func(ctx context.Context) (bool, error) {
		res, err := r.exec(ctx, r.spec.frontListeningScript(), false)
		line = strings.TrimSpace(string(res.Stdout))
		return line != "", err
	})
	if err != nil {
		return fmt.Errorf("the front of vllm serve %s on %s did not get its port within %s: %w", r.spec.Name, r.node(), frontTakeOver, err)
	}
	if !strings.Contains(line, "rayform front: listening") {
		err := fmt.Errorf("vllm serve %s cannot start on %s: %s", r.spec.Name, r.node(), strings.TrimPrefix(line, "rayform "))
		return r.diagnoseLog(ctx, err, launch{}, r.spec.frontLogPath(), "vllm serve front log")
	}
	progress(strings.TrimPrefix(line, "rayform "))
	return nil
}
