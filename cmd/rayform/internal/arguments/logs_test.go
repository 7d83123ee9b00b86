package arguments

import "testing"

func TestParseLogs(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*Logs) bool
	}{
		{[]string{"ray_cluster.x"}, "", func(a *Logs) bool {
			q := a.Query
			return q.Address == "ray_cluster.x" && q.Tail == 100 && !q.Follow && q.Node == "" && q.Since == "" && !q.Previous
		}},
		// Flags before or after the address, as people type them.
		{[]string{"vllm_serve.q", "-f", "-tail=5", "-node", "h1", "-since=10m", "-previous"}, "", func(a *Logs) bool {
			q := a.Query
			return q.Address == "vllm_serve.q" && q.Follow && q.Tail == 5 && q.Node == "h1" && q.Since == "10m" && q.Previous
		}},
		{nil, "logs takes one argument, a resource address (ray_cluster.NAME or vllm_serve.NAME)", nil},
		{[]string{"a", "b"}, "logs takes one argument", nil},
		{[]string{"a", "-tail=x"}, `invalid value "x" for flag -tail`, nil},
	}
	for _, tt := range tests {
		a, err := ParseLogs(tt.args)
		wantError(t, tt.args, err, tt.wantErr)
		if tt.check != nil && err == nil && !tt.check(a) {
			t.Errorf("%q: %+v", tt.args, a)
		}
	}
}
