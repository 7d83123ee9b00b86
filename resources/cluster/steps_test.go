package cluster_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/internal/steplab"
	"github.com/rayform/rayform/resources/servefiles"
	"github.com/rayform/rayform/resources/stepenv"
)

func TestJudgeRayTable(t *testing.T) {
	specs := steplab.PairSpecs("192.168.200.12")
	gpus := func(n float64) map[string]float64 { return map[string]float64{"GPU": n} }
	head := cluster.RayNode{NodeIP: "192.168.200.12", IsHead: true, State: "ALIVE", Resources: gpus(1)}
	worker := cluster.RayNode{NodeIP: "192.168.200.13", State: "ALIVE", Resources: gpus(1)}
	tests := []struct {
		name string
		rows []cluster.RayNode
		want []string
	}{
		{"as declared", []cluster.RayNode{head, worker, {NodeIP: "192.168.200.14", State: "DEAD"}}, nil},
		{"worker missing", []cluster.RayNode{head}, []string{"spark2 (192.168.200.13) is not ALIVE in Ray's node table"}},
		{"head elsewhere", []cluster.RayNode{{NodeIP: "10.1.230.180", IsHead: true, State: "ALIVE", Resources: gpus(1)}, worker},
			[]string{"ray head registered as 10.1.230.180; want 192.168.200.12"}},
		{"gpus", []cluster.RayNode{head, {NodeIP: "192.168.200.13", State: "ALIVE"}}, []string{"spark2 (192.168.200.13) has 0 GPUs in Ray, want 1"}},
		{"twice", []cluster.RayNode{head, worker, worker}, []string{"spark2 (192.168.200.13) is ALIVE 2 times"}},
		{"undeclared", []cluster.RayNode{head, worker, {NodeIP: "10.1.230.181", State: "ALIVE"}},
			[]string{"10.1.230.181 is ALIVE as a worker but is no declared node's fabric address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cluster.RayTableReasons(specs, tt.rows)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPullProgress(t *testing.T) {
	// The clock stands still: only a new phase or a final line passes.
	now := func() time.Time { return time.Date(2026, 4, 8, 23, 30, 0, 0, time.UTC) }
	var got []string
	w := cluster.PullProgress(steplab.Image, func(s string) { got = append(got, s) }, stepenv.NewThrottle(now, time.Second))
	_, _ = w.Write([]byte(steplab.Pull[:40]))
	_, _ = w.Write([]byte(steplab.Pull[40:]))
	want := []string{
		"pulling " + steplab.Image + ": 1/2 layers",
		"pulling " + steplab.Image + ": 2/2 layers",
		"Status: Downloaded newer image for " + steplab.Image,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestServeHostDirMount(t *testing.T) {
	spec := steplab.PairSpecs("192.168.200.12")[0]
	args := spec.RunArgs("lab")
	i := slices.Index(args, "/var/tmp/rayform/lab/spark1/rayform-main:/tmp/rayform/serve")
	if i < 1 || args[i-1] != "-v" {
		t.Fatalf("docker run does not mount the serve dir from the host:\n%q", args)
	}
	if got := servefiles.Host("lab", "spark1", "rayform-main"); got != "/var/tmp/rayform/lab/spark1/rayform-main" {
		t.Fatalf("ServeHostDir = %q", got)
	}
	if ep := spec.EntrypointScript(); !strings.Contains(ep, "; mkdir -p /tmp/rayform/serve && rm -f /tmp/rayform/serve/serve-* && ") {
		t.Fatalf("the entrypoint does not clear the serve files of a previous run: %s", ep)
	}
	// A container from before the mount existed has another spec hash, so
	// the plan replaces it.
	old := spec
	old.ServeDir = ""
	if old.Hash() == spec.Hash() {
		t.Fatal("the serve mount is not part of the spec hash")
	}
	if slices.ContainsFunc(old.RunArgs("lab"), func(a string) bool { return strings.Contains(a, "/var/tmp/rayform") }) {
		t.Fatal("a spec without ServeDir mounts a serve dir")
	}
}
