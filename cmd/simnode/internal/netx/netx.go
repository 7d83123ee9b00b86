// Package netx holds the networking the simulated programs do exactly as the
// real ones: Ray's and vLLM's "which local address would reach X" trick (a UDP
// connect, which sends no packet), interface lookup for NCCL_SOCKET_IFNAME and
// GLOO_SOCKET_IFNAME, and errno rendering as C libraries print it.
package netx

import (
	"context"
	"errors"
	"net"
	"os"
	"sort"
	"strings"
	"syscall"
)

// SourceIP returns the local address the kernel would use to reach
// host:port, by connecting a UDP socket (no packet is sent). The error wraps
// the errno, e.g. ENETUNREACH when no route exists.
func SourceIP(ctx context.Context, network, hostport string) (net.IP, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, hostport)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ua, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok {
		return nil, errors.New("not a UDP address")
	}
	return ua.IP, nil
}

// RayNodeIP is Ray's node_ip_address_from_perspective(address): the source
// address towards address; on ENETUNREACH the address the host name resolves
// to; else 127.0.0.1.
func RayNodeIP(ctx context.Context, address, hostname string) string {
	ip, err := SourceIP(ctx, "udp4", address)
	if err == nil {
		return ip.String()
	}
	if errors.Is(err, syscall.ENETUNREACH) && hostname != "" {
		if addrs, lerr := net.DefaultResolver.LookupIP(ctx, "ip4", hostname); lerr == nil && len(addrs) > 0 {
			return addrs[0].String()
		}
	}
	return "127.0.0.1"
}

// Errno extracts the errno of a socket error, with its C strerror text.
// ok is false when err carries no errno.
func Errno(err error) (num int, text string, ok bool) {
	var en syscall.Errno
	if errors.As(err, &en) {
		return int(en), Strerror(en), true
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return int(syscall.ETIMEDOUT), Strerror(syscall.ETIMEDOUT), true
	}
	return 0, "", false
}

// Strerror returns glibc's message for e ("Network is unreachable").
func Strerror(e syscall.Errno) string {
	s := e.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Iface is one interface of the current network namespace.
type Iface struct {
	Index int
	Name  string
	Up    bool
	IPv4  []net.IP
	IPv6  []net.IP
}

// Interfaces lists the interfaces of the current namespace in index order.
func Interfaces() ([]Iface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Iface, 0, len(ifs))
	for _, i := range ifs {
		it := Iface{Index: i.Index, Name: i.Name, Up: i.Flags&net.FlagUp != 0}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if v4 := ipn.IP.To4(); v4 != nil {
				it.IPv4 = append(it.IPv4, v4)
			} else {
				it.IPv6 = append(it.IPv6, ipn.IP)
			}
		}
		out = append(out, it)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Index < out[b].Index })
	return out, nil
}

// MatchIfName applies NCCL's NCCL_SOCKET_IFNAME syntax to one interface name:
// a comma-separated list of prefixes; a leading '^' excludes; a leading '='
// (after any '^') makes the match exact.
func MatchIfName(spec, name string) bool {
	exclude := false
	if strings.HasPrefix(spec, "^") {
		exclude = true
		spec = spec[1:]
	}
	exact := false
	if strings.HasPrefix(spec, "=") {
		exact = true
		spec = spec[1:]
	}
	matched := false
	for _, p := range strings.Split(spec, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if (exact && name == p) || (!exact && strings.HasPrefix(name, p)) {
			matched = true
			break
		}
	}
	if exclude {
		return !matched
	}
	return matched
}

// NCCLFindInterface picks the interface NCCL's bootstrap would use: with
// spec set, the first up interface with an IPv4 address matching it;
// without, the first such interface that is neither lo* nor docker*, then
// docker*, then lo*. ok is false when none matches ("no socket interface
// found").
func NCCLFindInterface(ifaces []Iface, spec string) (Iface, bool) {
	usable := func(i Iface) bool { return i.Up && len(i.IPv4) > 0 }
	if spec != "" {
		for _, i := range ifaces {
			if usable(i) && MatchIfName(spec, i.Name) {
				return i, true
			}
		}
		return Iface{}, false
	}
	for _, pass := range []string{"^docker,lo", "docker", "lo"} {
		for _, i := range ifaces {
			if usable(i) && MatchIfName(pass, i.Name) {
				return i, true
			}
		}
	}
	return Iface{}, false
}

// Operstate returns the kernel's operational state of netdev name ("up",
// "down", "unknown", ...) from sysfs, falling back to the interface flags.
// ok is false when the interface does not exist.
func Operstate(name string) (string, bool) {
	if b, err := os.ReadFile("/sys/class/net/" + name + "/operstate"); err == nil {
		return strings.TrimSpace(string(b)), true
	}
	i, err := net.InterfaceByName(name)
	if err != nil {
		return "", false
	}
	if i.Flags&net.FlagRunning != 0 {
		return "up", true
	}
	return "down", true
}
