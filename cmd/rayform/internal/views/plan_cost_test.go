package views

import "testing"

// TestCostText is issue 33 item 8: "at most 1 round trips".
func TestCostText(t *testing.T) {
	for _, tt := range []struct {
		conns, rts int
		want       string
	}{
		{2, 1, "2 SSH connections, at most 1 round trip per host"},
		{1, 2, "1 SSH connection, at most 2 round trips per host"},
		{0, 0, "0 SSH connections, at most 0 round trips per host"},
	} {
		if got := CostText(tt.conns, tt.rts); got != tt.want {
			t.Errorf("CostText(%d, %d) = %q, want %q", tt.conns, tt.rts, got, tt.want)
		}
	}
}
