package observe

import (
	"net/netip"
	"testing"
)

// TestParseRouteBatch reads `ip -j -force -batch -` as iproute2 prints it
// (captured on this machine): answers as JSON lines matched by dst, and
// failures on stderr as the kernel's message then "Command failed -:N".
func TestParseRouteBatch(t *testing.T) {
	out := "@@rayform@@ probe 1\n@@rayform@@ begin route.batch addrs=192.168.200.12,192.168.200.14,192.168.200.13\n" +
		`[{"dst":"192.168.200.12","dev":"enp1s0f1np1","prefsrc":"192.168.200.13","flags":[],"uid":0,"cache":[]}]` + "\n" +
		`[{"dst":"192.168.200.13","dev":"lo","prefsrc":"192.168.200.13","flags":[],"uid":0,"cache":["local"]}]` + "\n" +
		"\n@@rayform@@ stderr\nRTNETLINK answers: Network is unreachable\nCommand failed -:2\n@@rayform@@ end 1\n@@rayform@@ done\n"
	f, err := Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []RouteCheck{
		{Addr: netip.MustParseAddr("192.168.200.12"), Dev: "enp1s0f1np1", Src: netip.MustParseAddr("192.168.200.13")},
		{Addr: netip.MustParseAddr("192.168.200.14"), Err: "RTNETLINK answers: Network is unreachable"},
		{Addr: netip.MustParseAddr("192.168.200.13"), Dev: "lo", Src: netip.MustParseAddr("192.168.200.13")},
	}
	if len(f.RouteChecks) != len(want) {
		t.Fatalf("RouteChecks = %+v, want %+v", f.RouteChecks, want)
	}
	for i := range want {
		if f.RouteChecks[i] != want[i] {
			t.Errorf("RouteChecks[%d] = %+v, want %+v", i, f.RouteChecks[i], want[i])
		}
	}
}
