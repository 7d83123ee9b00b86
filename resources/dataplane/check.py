#!/usr/bin/env python3
"""rayform's data-plane check: one process per node, under the node's own
environment (inside its Ray container, or wherever torch runs).

Every rank does a c10d rendezvous (a TCPStore on the master's address and
port), then a Gloo all_reduce and, where CUDA is available and the backends
ask for it, an NCCL all_reduce of a sized buffer. It prints one result line
per rank on stdout:

    RAYFORM_CHECK {"rank": 0, "ok": true, ...}

with the time to rendezvous, the local address and interface each backend's
connections actually use (read from this process's own sockets in
/proc/self/net, and from NCCL's own INFO lines), the bus bandwidth
(nccl-tests: busbw = algbw * 2*(n-1)/n) and the link speed the host reports
for that interface (/sys/class/net/IF/speed, Mb/s). The backends' own log
lines (NCCL_DEBUG=INFO) go to stderr unchanged. On failure the result has
"ok": false, the phase and torch's own error text, and the exit status is 1
(2 for bad arguments, 124 when the hard deadline passes).

Standalone use (every value from an argument or the environment):

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=192.168.200.12 MASTER_PORT=29417 \\
        python3 check.py [--backends gloo,nccl] [--timeout 15] [--size-mb 8]

It writes no file, binds only the master port (rank 0, the TCPStore) and
the ephemeral ports the backends pick, allocates one buffer of --size-mb
(at most 1024 MiB), and exits by itself after --deadline seconds
(default 3 x --timeout; a watchdog thread, then SIGALRM's default action,
so that a call blocked in C++ cannot outlive it).

With --ready-go (how rayform runs it) every rank imports torch first,
prints "RAYFORM_CHECK_READY" and waits for a line "go" on stdin, so that the
rendezvous starts on every node at once however long each import took
(end of input instead of "go" cancels it, exit status 3).
"""

import argparse
import datetime
import fcntl
import json
import os
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import warnings

PREFIX = "RAYFORM_CHECK "
READY = "RAYFORM_CHECK_READY"
SCRIPT_VERSION = 1

# Result of this rank; printed once, on success, failure or deadline.
result = {"version": SCRIPT_VERSION, "ok": False}
_printed = threading.Lock()


def emit(code):
    """Print the result line (once) and exit with code."""
    if _printed.acquire(blocking=False):
        sys.stdout.write(PREFIX + json.dumps(result, sort_keys=True) + "\n")
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


def env_float(name, default):
    v = os.environ.get(name, "")
    return float(v) if v.strip() else default


def parse_args(argv):
    e = os.environ.get
    p = argparse.ArgumentParser(description="rayform data-plane check (one process per node)")
    p.add_argument("--rank", type=int, default=env_int("RANK", -1), help="this node's rank (env RANK)")
    p.add_argument("--world-size", type=int, default=env_int("WORLD_SIZE", -1), help="number of nodes (env WORLD_SIZE)")
    p.add_argument("--master-addr", default=e("MASTER_ADDR", ""), help="rank 0's address (env MASTER_ADDR)")
    p.add_argument("--master-port", type=int, default=env_int("MASTER_PORT", -1), help="the TCPStore port on rank 0 (env MASTER_PORT)")
    p.add_argument("--backends", default=e("RAYFORM_CHECK_BACKENDS", "auto"),
                   help="comma list of gloo, nccl; auto = gloo, plus nccl when CUDA is available (env RAYFORM_CHECK_BACKENDS)")
    p.add_argument("--timeout", type=float, default=env_float("RAYFORM_CHECK_TIMEOUT", 15.0),
                   help="seconds for the rendezvous and for each collective (env RAYFORM_CHECK_TIMEOUT)")
    p.add_argument("--deadline", type=float, default=env_float("RAYFORM_CHECK_DEADLINE", 0.0),
                   help="hard limit on the whole run in seconds, default 3 x timeout (env RAYFORM_CHECK_DEADLINE)")
    p.add_argument("--size-mb", type=float, default=env_float("RAYFORM_CHECK_SIZE_MB", 8.0),
                   help="all_reduce buffer in MiB, at most 1024 (env RAYFORM_CHECK_SIZE_MB)")
    p.add_argument("--iters", type=int, default=env_int("RAYFORM_CHECK_ITERS", 5),
                   help="timed all_reduce iterations after one warm-up (env RAYFORM_CHECK_ITERS)")
    p.add_argument("--iface", default=e("RAYFORM_CHECK_IFACE", ""),
                   help="interface whose link speed to report; default: the one Gloo's connections use (env RAYFORM_CHECK_IFACE)")
    p.add_argument("--node", default=e("RAYFORM_CHECK_NODE", ""), help="a name for this node in the result (env RAYFORM_CHECK_NODE)")
    p.add_argument("--device", type=int, default=env_int("LOCAL_RANK", 0), help="CUDA device for NCCL (env LOCAL_RANK)")
    p.add_argument("--ready-go", action="store_true", default=os.environ.get("RAYFORM_CHECK_READY_GO", "") == "1",
                   help="after importing torch print %s and wait for a line 'go' on stdin (env RAYFORM_CHECK_READY_GO=1)" % READY)
    p.add_argument("--import-timeout", type=float, default=env_float("RAYFORM_CHECK_IMPORT_TIMEOUT", 120.0),
                   help="seconds allowed for importing torch (and waiting for 'go'), on top of --deadline")
    a = p.parse_args(argv)
    bad = []
    if a.world_size < 1:
        bad.append("--world-size (or WORLD_SIZE) must be 1 or more")
    if not 0 <= a.rank < max(a.world_size, 1):
        bad.append("--rank (or RANK) must be in [0, world size)")
    if not a.master_addr:
        bad.append("--master-addr (or MASTER_ADDR) is required")
    if not 0 < a.master_port < 65536:
        bad.append("--master-port (or MASTER_PORT) must be a port number")
    if not 0 < a.size_mb <= 1024:
        bad.append("--size-mb must be in (0, 1024]")
    if a.timeout <= 0 or a.iters < 1:
        bad.append("--timeout and --iters must be positive")
    if bad:
        p.error("; ".join(bad))
    if a.deadline <= 0:
        a.deadline = 3 * a.timeout
    return a


# ---- where do this process's connections go --------------------------------

def _hex_addr(h):
    """Decode an address of /proc/net/tcp{,6} ("0100007F:1F90")."""
    ip, port = h.split(":")
    raw = bytes.fromhex(ip)
    if len(raw) == 4:
        addr = socket.inet_ntop(socket.AF_INET, struct.pack("<I", struct.unpack(">I", raw)[0]))
    else:
        words = struct.unpack(">4I", raw)
        addr = socket.inet_ntop(socket.AF_INET6, struct.pack("<4I", *words))
        if addr.startswith("::ffff:") and "." in addr:
            addr = addr[7:]
    return addr, int(port, 16)


def own_connections():
    """Established TCP connections of this process: (local, lport, remote, rport)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    conns = set()
    for path in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(path) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "01" or fields[9] not in inodes:
                continue
            local, lport = _hex_addr(fields[1])
            remote, rport = _hex_addr(fields[2])
            conns.add((local, lport, remote, rport))
    return conns


def interface_addrs():
    """Map of address -> interface name for this network namespace."""
    out = {}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                res = fcntl.ioctl(s.fileno(), 0x8915, req)  # SIOCGIFADDR
                out[socket.inet_ntoa(res[20:24])] = name
            except OSError:
                pass
    finally:
        s.close()
    try:
        with open("/proc/net/if_inet6") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 6:
                    raw = bytes.fromhex(fields[0])
                    out[socket.inet_ntop(socket.AF_INET6, raw)] = fields[5]
    except OSError:
        pass
    return out


def link_speed(iface):
    """The speed in Mb/s the kernel reports for iface, or None."""
    if not iface:
        return None
    try:
        with open("/sys/class/net/%s/speed" % iface) as f:
            v = int(f.read().strip())
        return v if v > 0 else None
    except (OSError, ValueError):
        return None


def describe(conns, ifaces):
    """What a backend's connections say: local address, interface, peers."""
    locals_ = sorted({c[0] for c in conns})
    peers = sorted({c[2] for c in conns})
    out = {"connections": len(conns), "peers": peers}
    if locals_:
        out["addr"] = locals_[0]
        out["iface"] = ifaces.get(locals_[0], "")
        if len(locals_) > 1:
            out["other_addrs"] = locals_[1:]
    return out


# ---- capturing the backends' own lines (NCCL prints to stdout) -------------

class Capture:
    """Redirect file descriptors 1 and 2 into a pipe while a backend runs;
    the lines are kept and copied to stderr afterwards."""

    def __init__(self):
        self.lines = []
        self._chunks = []

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))
        r, w = os.pipe()
        self._r = r
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(w)
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()
        return self

    def _drain(self):
        while True:
            b = os.read(self._r, 65536)
            if not b:
                return
            self._chunks.append(b)

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        os.close(self._saved[0])
        os.close(self._saved[1])
        self._t.join(timeout=2)
        os.close(self._r)
        text = b"".join(self._chunks).decode("utf-8", "replace")
        self.lines = [l for l in text.splitlines() if l.strip()]
        for l in self.lines:
            sys.stderr.write(l + "\n")
        sys.stderr.flush()
        return False


NCCL_BOOTSTRAP_RE = re.compile(r"NCCL INFO Bootstrap ?: ?Using (\S+?):(\S+?)<")
NCCL_NET_RE = re.compile(r"NCCL INFO NET/(\w+) ?: ?Using (.*)")
NCCL_VERSION_RE = re.compile(r"NCCL version (\S+)")


def nccl_from_log(lines):
    out = {}
    for l in lines:
        m = NCCL_BOOTSTRAP_RE.search(l)
        if m and "bootstrap_iface" not in out:
            out["bootstrap_iface"], out["bootstrap_addr"] = m.group(1), m.group(2)
        m = NCCL_NET_RE.search(l)
        if m and "net" not in out:
            out["net"], out["net_detail"] = m.group(1), m.group(2).strip()
        m = NCCL_VERSION_RE.search(l)
        if m and "nccl_version" not in out:
            out["nccl_version"] = m.group(1)
    return out


# ---- the check --------------------------------------------------------------

def measure(dist, torch, group, world, nbytes, iters, device, sync):
    """One checked warm-up all_reduce, then iters timed ones."""
    n = max(nbytes // 4, 1)
    t = torch.ones(n, dtype=torch.float32, device=device)
    dist.all_reduce(t, group=group)
    sync()
    got = float(t[0].item())
    if got != float(world):
        raise RuntimeError("all_reduce returned %s, want %d (the sum of one per rank)" % (got, world))
    t.fill_(1.0 / world)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    sync()
    elapsed = (time.perf_counter() - start) / iters
    algbw = n * 4 / elapsed / 1e9
    busbw = algbw * 2 * (world - 1) / world
    del t
    return {"bytes": n * 4, "iters": iters, "time_s": round(elapsed, 6),
            "algbw_gbps": round(algbw, 4), "busbw_gbps": round(busbw, 4)}


class Watchdog:
    """Ends the check at its deadline even while the main thread is blocked
    in C++ holding the GIL (a TCPStore waiting for its clients does): a
    forked child waits for the deadline, prints the result line with the
    phase the parent last reported and kills the parent. SIGALRM's default
    action, armed a few seconds later, is the last resort."""

    def __init__(self, seconds, t0):
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(seconds) + 5)
        r, w = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns about fork() in a process with threads
            # (torch's); the child only waits and writes one line.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os.close(w)
            self._child(r, seconds, t0)
        os.close(r)
        self.w = w

    def _child(self, r, seconds, t0):
        phase = result.get("phase")
        until = time.monotonic() + seconds
        while True:
            left = until - time.monotonic()
            if left <= 0:
                break
            if select.select([r], [], [], left)[0]:
                data = os.read(r, 4096)
                if not data:
                    os._exit(0)  # the parent finished
                phase = data.decode().strip().split("\n")[-1]
        result["phase"] = phase
        result["error"] = "deadline: the check did not finish within %gs (phase %s)" % (seconds, phase)
        result["elapsed_s"] = round(time.monotonic() - t0, 3)
        sys.stdout.write(PREFIX + json.dumps(result, sort_keys=True) + "\n")
        sys.stdout.flush()
        try:
            os.kill(os.getppid(), signal.SIGKILL)
        finally:
            os._exit(124)

    def phase(self, name):
        result["phase"] = name
        try:
            os.write(self.w, (name + "\n").encode())
        except OSError:
            pass

    def stop(self):
        signal.alarm(0)
        os.close(self.w)


def has_key(store, key):
    """Whether key is set (torch 1.13's Store has no check() in Python)."""
    try:
        store.wait([key], datetime.timedelta(milliseconds=10))
        return True
    except RuntimeError:
        return False


def main(argv):
    a = parse_args(argv)
    t0 = time.monotonic()
    result.update({
        "rank": a.rank, "world_size": a.world_size, "node": a.node or socket.gethostname(),
        "master": "%s:%d" % (a.master_addr, a.master_port), "phase": "import",
        "env": {k: os.environ[k] for k in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA",
                                           "NCCL_IB_DISABLE", "NCCL_NET", "VLLM_HOST_IP") if k in os.environ},
    })

    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(int(a.import_timeout + a.deadline) + 5)  # the import and the wait for "go"

    def wait_for_go():
        sys.stdout.write(READY + "\n")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if line.strip() != "go":
            result["error"] = "cancelled before the rendezvous: the runner stopped the check (another rank failed first)"
            emit(3)

    import torch
    import torch.distributed as dist
    result["torch"] = torch.__version__
    result["import_s"] = round(time.monotonic() - t0, 3)
    cuda = torch.cuda.is_available()
    wanted = [b.strip().lower() for b in a.backends.split(",") if b.strip()]
    if wanted == ["auto"]:
        wanted = ["gloo"] + (["nccl"] if cuda else [])
    for b in wanted:
        if b not in ("gloo", "nccl"):
            raise SystemExit("check.py: unknown backend %r (want gloo, nccl)" % b)
    if "nccl" in wanted and not cuda:
        raise RuntimeError("nccl was asked for but torch.cuda.is_available() is False on this node")
    if "gloo" not in wanted:
        wanted.insert(0, "gloo")  # the default group; NCCL's is made next to it
    timeout = datetime.timedelta(seconds=a.timeout)
    nbytes = int(a.size_mb * (1 << 20))
    ifaces = interface_addrs()
    store = None
    if a.rank == 0:
        # The master binds its port before reporting ready: a port in use
        # fails now ("Address already in use"), and the runner picks another.
        result["phase"] = "rendezvous"
        store = dist.TCPStore(a.master_addr, a.master_port, a.world_size, True, timeout, False)
    if a.ready_go:
        result["phase"] = "ready"
        wait_for_go()
    watchdog = Watchdog(a.deadline, t0)

    # c10d rendezvous: rank 0 serves the TCPStore, every rank connects and
    # the Gloo default group is built over it (a full mesh of connections).
    watchdog.phase("rendezvous")
    t1 = time.monotonic()
    if store is None:
        store = dist.TCPStore(a.master_addr, a.master_port, a.world_size, False, timeout, False)
    # Every rank checks in under its own key and waits for all of them, so
    # that the master names who is missing instead of failing later.
    keys = ["rayform_check/rank/%d" % r for r in range(a.world_size)]
    store.set(keys[a.rank], result["node"])
    try:
        store.wait(keys, timeout)
    except RuntimeError as e:
        missing = [str(r) for r, k in enumerate(keys) if not has_key(store, k)]
        raise RuntimeError("c10d rendezvous on %s:%d: timed out after %gs waiting for clients. %d/%d clients joined (missing ranks: %s): %s"
                           % (a.master_addr, a.master_port, a.timeout, a.world_size - len(missing), a.world_size,
                              ", ".join(missing), e)) from None
    result["store_s"] = round(time.monotonic() - t1, 3)
    before = own_connections()
    watchdog.phase("gloo")
    dist.init_process_group("gloo", store=store, rank=a.rank, world_size=a.world_size, timeout=timeout)
    result["rendezvous_s"] = round(time.monotonic() - t1, 3)
    after = own_connections()
    store_conns = {c for c in after if a.master_port in (c[1], c[3])}
    gloo = describe(after - before - store_conns, ifaces)
    if a.world_size > 1 and not gloo["connections"]:
        gloo["note"] = "no Gloo TCP connection of this process was found in /proc/self/net"
    gloo.update(measure(dist, torch, None, a.world_size, nbytes, a.iters, "cpu", lambda: None))
    gloo["ok"] = True
    result["backends"] = {"gloo": gloo}
    link_iface = a.iface or gloo.get("iface", "")
    result["link"] = {"iface": link_iface, "speed_mbps": link_speed(link_iface)}

    if "nccl" in wanted:
        watchdog.phase("nccl")
        torch.cuda.set_device(a.device)
        known = own_connections()
        with Capture() as cap:
            group = dist.new_group(backend="nccl", timeout=timeout)
            nccl = measure(dist, torch, group, a.world_size, nbytes, a.iters, "cuda", torch.cuda.synchronize)
        nccl.update(describe(own_connections() - known, ifaces))
        nccl.update(nccl_from_log(cap.lines))
        nccl["device"] = torch.cuda.get_device_name(a.device)
        nccl["ok"] = True
        result["backends"]["nccl"] = nccl

    watchdog.phase("done")
    dist.barrier()
    dist.destroy_process_group()
    del store
    watchdog.stop()
    result["ok"] = True
    result["elapsed_s"] = round(time.monotonic() - t0, 3)
    emit(0)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except SystemExit as e:
        if e.code not in (0, None):
            result["error"] = str(e.code) if not isinstance(e.code, int) else "bad arguments"
            emit(2)
        raise
    except BaseException as e:  # noqa: BLE001 - every failure becomes a result line
        traceback.print_exc()
        msg = str(e).strip() or type(e).__name__
        result["error"] = "%s: %s" % (type(e).__name__, msg)
        emit(1)
