package network

import "testing"

// UCX names RDMA devices <hca>:<port>; a netdev name would limit it to TCP.
func TestUCXDevices(t *testing.T) {
	for _, tt := range []struct {
		hcas []string
		want string
	}{
		{[]string{"mlx5_0"}, "mlx5_0:1"},
		{[]string{"mlx5_0:2", "rocep1s0f1"}, "mlx5_0:2,rocep1s0f1:1"},
		{[]string{"=mlx5_0"}, "mlx5_0:1"},
		{[]string{"^mlx5_1"}, ""},
	} {
		if got := ucxDevices(tt.hcas); got != tt.want {
			t.Errorf("ucxDevices(%q) = %q, want %q", tt.hcas, got, tt.want)
		}
	}
}
