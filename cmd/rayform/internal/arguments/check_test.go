package arguments

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/resources/dataplane"
)

func TestParseCheck(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Check) bool
	}{
		{nil, "", func(a *Check) bool {
			return a.Options.Timeout == dataplane.DefaultTimeout && a.Options.SizeMiB == dataplane.DefaultSizeMiB && a.Options.Backends == "auto" && len(a.Options.Env) == 0 && len(a.Clusters) == 0
		}},
		{[]string{"-json", "-timeout=30s", "-size-mb=8", "-backends=gloo", "-env", "NCCL_IB_HCA=mlx5", "-env", "X=", "spark", "ray_cluster.b"}, "", func(a *Check) bool {
			return a.ViewType == ViewJSON && a.Options.Timeout.String() == "30s" && a.Options.SizeMiB == 8 && a.Options.Backends == "gloo" &&
				len(a.Options.Env) == 2 && a.Options.Env["NCCL_IB_HCA"] == "mlx5" && a.Options.Env["X"] == "" &&
				strings.Join(a.Clusters, " ") == "spark ray_cluster.b"
		}},
		{[]string{"-env", "=1"}, `-env "=1": want NAME=VALUE`, nil},
		{[]string{"-env", "X"}, `-env "X": want NAME=VALUE`, nil},
		{[]string{"-timeout=x"}, `invalid value "x" for flag -timeout`, nil},
		{[]string{"-size-mb=big"}, `invalid value "big" for flag -size-mb`, nil},
	}
	for _, tt := range tests {
		a, err := ParseCheck(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
