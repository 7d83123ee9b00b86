package cluster_test

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/cluster"
)

// TestRayInImage: an image shows Ray when its command runs the ray CLI or
// a build step installs the ray package (not raylib); otherwise its
// presence is unknown.
func TestRayInImage(t *testing.T) {
	tests := []struct {
		img  observe.Image
		want string // evidence, "" for unknown
	}{
		{observe.Image{Installs: []string{"vllm==0.17.1", "ray[default]==2.53.0"}}, `built with "ray[default]==2.53.0"`},
		{observe.Image{Installs: []string{"ray==2.40.0"}}, `built with "ray==2.40.0"`},
		{observe.Image{Installs: []string{"ray"}}, `built with "ray"`},
		{observe.Image{Installs: []string{"vllm", "raylib"}}, ""},
		{observe.Image{Command: []string{"/usr/local/bin/ray", "start"}}, `runs "/usr/local/bin/ray"`},
		{observe.Image{Command: []string{"rayon"}}, ""},
	}
	for _, tt := range tests {
		present, evidence := cluster.RayInImage(tt.img)
		if present != (tt.want != "") || !strings.Contains(evidence, tt.want) {
			t.Errorf("RayInImage(%+v) = %v, %q; want %q", tt.img, present, evidence, tt.want)
		}
	}
}
