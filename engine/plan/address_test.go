package plan

import "testing"

func TestAddress(t *testing.T) {
	tests := []struct {
		in   string
		want Address
	}{
		{"ray_cluster.main", Address{Type: "ray_cluster", Name: "main"}},
		{`node.gpu["h1"]`, Address{Type: "node", Name: "gpu", Key: "h1"}},
		{`node.gpu["a.b"]`, Address{Type: "node", Name: "gpu", Key: "a.b"}},
		{"output", Address{Type: "output"}},
	}
	for _, tt := range tests {
		got := ParseAddress(tt.in)
		if !got.Equal(tt.want) {
			t.Errorf("ParseAddress(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("ParseAddress(%q).String() = %q", tt.in, got.String())
		}
	}
	if ParseAddress("vllm_serve.a").Equal(ParseAddress("ray_cluster.a")) {
		t.Error("addresses of different types are equal")
	}
}
