package torchdist

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/netx"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
)

// NCCLVersion is the version NCCL errors name.
const NCCLVersion = "2.28.9"

// GlooCheck is Gloo's device creation for the CPU process group: with
// GLOO_SOCKET_IFNAME set, the named interface must exist in this namespace.
func GlooCheck(ifname string, ifaces []netx.Iface) error {
	if ifname == "" {
		return nil
	}
	for _, i := range ifaces {
		if i.Name == ifname && (len(i.IPv4) > 0 || len(i.IPv6) > 0) {
			return nil
		}
	}
	return &PyError{Type: "RuntimeError", Msg: fmt.Sprintf("[enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: %s", ifname)}
}

// NCCLConfig is what NCCL reads from the environment.
type NCCLConfig struct {
	SocketIfname string // NCCL_SOCKET_IFNAME
	Debug        string // NCCL_DEBUG
	IBDisable    bool   // NCCL_IB_DISABLE=1
}

func (c NCCLConfig) info() bool {
	return strings.EqualFold(c.Debug, "INFO") || strings.EqualFold(c.Debug, "TRACE")
}
func (c NCCLConfig) warn() bool { return c.info() || strings.EqualFold(c.Debug, "WARN") }

func ncclError(kind, last string) error {
	return &PyError{Type: "torch.distributed.DistBackendError", Msg: fmt.Sprintf("NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3135, %s, NCCL version %s\n%sLast error:\n%s", kind, NCCLVersion, kindLine(kind), last)}
}

// kindLine is torch's getNcclErrorDetailStr interpretation of the
// ncclResult, printed between the NCCL error and "Last error:".
func kindLine(kind string) string {
	switch {
	case strings.HasPrefix(kind, "remote process"):
		return "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
	case strings.HasPrefix(kind, "invalid usage"):
		return "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
	case strings.HasPrefix(kind, "unhandled system error"):
		return "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \n"
	}
	return ""
}

// NCCLInit is NCCL's communicator setup for rank in world: pick the
// bootstrap interface, publish a listening address in the store, and
// connect to the next rank's address over real TCP (the ring NCCL's
// bootstrap builds). Lines go to e.Log as NCCL prints them.
func NCCLInit(ctx context.Context, e *Env, cfg NCCLConfig, s *Store, rank, world, dev int, timeout time.Duration) error {
	ifaces, err := netx.Interfaces()
	if err != nil {
		return &PyError{Type: "RuntimeError", Msg: err.Error()}
	}
	info := func(msg string) {
		if cfg.info() {
			fmt.Fprintln(e.Log, pylog.NCCL(e.Now(), e.Host, e.Pid, dev, "INFO", "", msg))
		}
	}
	warn := func(file, msg string) {
		if cfg.warn() {
			fmt.Fprintln(e.Log, pylog.NCCL(e.Now(), e.Host, e.Pid, dev, "WARN", file, msg))
		}
	}
	if cfg.SocketIfname != "" {
		info("NCCL_SOCKET_IFNAME set by environment to " + cfg.SocketIfname)
	}
	ifc, ok := netx.NCCLFindInterface(ifaces, cfg.SocketIfname)
	if !ok {
		warn("bootstrap.cc:114", "Bootstrap : no socket interface found")
		return ncclError("invalid usage (run with NCCL_DEBUG=WARN for details)", "Bootstrap : no socket interface found")
	}
	ip := ifc.IPv4[0].String()
	info(fmt.Sprintf("Bootstrap: Using %s:%s<0>", ifc.Name, ip))
	ln, err := net.Listen("tcp4", net.JoinHostPort(ip, "0"))
	if err != nil {
		return ncclError("unhandled system error (run with NCCL_DEBUG=INFO for details)", err.Error())
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	if err := s.Set("nccl/bootstrap/"+strconv.Itoa(rank), net.JoinHostPort(ip, strconv.Itoa(port))); err != nil {
		return ncclError("unhandled system error (run with NCCL_DEBUG=INFO for details)", err.Error())
	}
	next := (rank + 1) % world
	peer, err := s.Get("nccl/bootstrap/"+strconv.Itoa(next), timeout)
	if err != nil {
		la, ra := s.LocalAddr()
		fmt.Fprintln(e.Log, "[rank"+strconv.Itoa(rank)+"]:"+pylog.Glog(e.Now(), 'W', "TCPStore.cpp:138", fmt.Sprintf("[c10d] recvValueWithTimeout failed on SocketImpl(fd=48, addr=%s, remote=%s): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?", la, ra)))
		// ProcessGroupNCCL's broadcastUniqueNCCLID wraps the store error.
		return &PyError{Type: "torch.distributed.DistBackendError", Msg: fmt.Sprintf("[%d] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?", rank)}
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp4", peer)
	if err != nil {
		host, p, _ := net.SplitHostPort(peer)
		_, text, _ := netx.Errno(err)
		if text == "" {
			text = err.Error()
		}
		msg := fmt.Sprintf("socketStartConnect: Connect to %s<%s> failed : %s", host, p, text)
		warn("misc/socket.cc:484", msg)
		return ncclError("remote process exited or there was a network error", msg)
	}
	c.Close()
	// Keep listening until every rank has connected to its successor.
	if err := s.Set("nccl/connected/"+strconv.Itoa(rank), "1"); err != nil {
		return ncclError("unhandled system error (run with NCCL_DEBUG=INFO for details)", err.Error())
	}
	for r := 0; r < world; r++ {
		if _, err := s.Get("nccl/connected/"+strconv.Itoa(r), timeout); err != nil {
			return ncclError("remote process exited or there was a network error", "socketProgress: Connection closed by remote peer")
		}
	}
	info(fmt.Sprintf("NET/Socket : Using [0]%s:%s<0>", ifc.Name, ip))
	info("Using network Socket")
	prev := (rank - 1 + world) % world
	info(fmt.Sprintf("Channel 00/0 : %d[%d] -> %d[%d] [receive] via NET/Socket/0", prev, prev, rank, rank))
	info(fmt.Sprintf("Channel 00/0 : %d[%d] -> %d[%d] [send] via NET/Socket/0", rank, rank, next, next))
	return nil
}
