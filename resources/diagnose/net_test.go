package diagnose

import "testing"

// TestNodeOfNCCLPrefix: a log read without a host names it in NCCL's
// "host:pid:tid [dev]" prefix (also behind mpirun's "[rank] " and NCCL's
// timestamp), and a declared host wins over it.
func TestNodeOfNCCLPrefix(t *testing.T) {
	for _, c := range []struct{ host, line, want string }{
		{"", "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion", "node-2"},
		{"", "[3] node0:13571:13571 [0] NCCL INFO Bootstrap : Using enp10s0:10.10.7.107<0>", "node0"},
		{"", "[2026-11-29 23:22:58] vm:1004:1004 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found", "vm"},
		{"spark1", "node-2:5776:5902 [0] NCCL WARN x", "spark1"},
		{"", "ERROR 06-30 13:53:19 [core.py:515] EngineCore failed to start.", ""},
	} {
		s := newScan(Input{Logs: []Log{{Host: c.host, Text: []byte(c.line)}}})
		if got := s.nodeOf(0); got != c.want {
			t.Errorf("nodeOf(%q) with host %q = %q, want %q", c.line, c.host, got, c.want)
		}
	}
}
