package netx

import (
	"context"
	"net"
	"syscall"
	"testing"
)

// NCCL_SOCKET_IFNAME syntax (ray-vllm-facts.md §2.4): prefixes, '^'
// excludes, '=' exact.
func TestMatchIfName(t *testing.T) {
	tests := []struct {
		spec, name string
		want       bool
	}{
		{"enp1s0f1np1", "enp1s0f1np1", true},
		{"enp1s0f1", "enp1s0f1np1", true},
		{"=enp1s0f1", "enp1s0f1np1", false},
		{"=enp1s0f1np1", "enp1s0f1np1", true},
		{"^docker,lo", "lo", false},
		{"^docker,lo", "eth0", true},
		{"^=docker0", "docker0", false},
		{"eth9", "enp1s0f1np1", false},
		{"eth,enp", "enp2s0", true},
	}
	for _, tt := range tests {
		if got := MatchIfName(tt.spec, tt.name); got != tt.want {
			t.Errorf("MatchIfName(%q, %q) = %v, want %v", tt.spec, tt.name, got, tt.want)
		}
	}
}

func TestNCCLFindInterface(t *testing.T) {
	ifaces := []Iface{
		{Index: 1, Name: "lo", Up: true, IPv4: []net.IP{net.IPv4(127, 0, 0, 1)}},
		{Index: 2, Name: "docker0", Up: true, IPv4: []net.IP{net.IPv4(172, 17, 0, 1)}},
		{Index: 3, Name: "mgmt0", Up: true, IPv4: []net.IP{net.IPv4(10, 1, 230, 180)}},
		{Index: 4, Name: "enp1s0f1np1", Up: true, IPv4: []net.IP{net.IPv4(192, 168, 200, 12)}},
		{Index: 5, Name: "enp1s0f0np0", Up: false, IPv4: []net.IP{net.IPv4(192, 168, 201, 12)}},
	}
	tests := []struct {
		spec string
		want string // "" when none
	}{
		{"", "mgmt0"},
		{"enp1s0f1np1", "enp1s0f1np1"},
		{"enp1s0f0np0", ""},
		{"eth9", ""},
		{"^mgmt,lo,docker", "enp1s0f1np1"},
	}
	for _, tt := range tests {
		got, ok := NCCLFindInterface(ifaces, tt.spec)
		if (tt.want == "") == ok || (ok && got.Name != tt.want) {
			t.Errorf("NCCLFindInterface(%q) = %q, %v; want %q", tt.spec, got.Name, ok, tt.want)
		}
	}
}

func TestErrno(t *testing.T) {
	_, err := net.Dial("tcp", "127.0.0.1:1")
	if err == nil {
		t.Skip("something listens on 127.0.0.1:1")
	}
	num, text, ok := Errno(err)
	if !ok || num != int(syscall.ECONNREFUSED) || text != "Connection refused" {
		t.Errorf("Errno = %d %q %v, want 111 \"Connection refused\"", num, text, ok)
	}
	if got := Strerror(syscall.ENETUNREACH); got != "Network is unreachable" {
		t.Errorf("Strerror(ENETUNREACH) = %q", got)
	}
}

func TestSourceIPLoopback(t *testing.T) {
	ip, err := SourceIP(context.Background(), "udp4", "127.0.0.1:53")
	if err != nil || !ip.IsLoopback() {
		t.Errorf("SourceIP = %v, %v; want a loopback address", ip, err)
	}
}
