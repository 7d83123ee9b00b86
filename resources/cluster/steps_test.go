package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/hostenv"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/servedir"
)

const (
	stepsImage = "registry.lab:5000/vllm-ray:0.17"
	stepsPull  = `0.17: Pulling from vllm-ray
2d473b07cdd5: Pulling fs layer
5a3ea8efae5d: Pulling fs layer
2d473b07cdd5: Verifying Checksum
2d473b07cdd5: Download complete
5a3ea8efae5d: Download complete
2d473b07cdd5: Pull complete
5a3ea8efae5d: Pull complete
Digest: sha256:1b2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff001
Status: Downloaded newer image for registry.lab:5000/vllm-ray:0.17
registry.lab:5000/vllm-ray:0.17
`
)

// pairSpecs is the seeds' pair: spark1 (head, 192.168.200.12) and spark2
// (worker, 192.168.200.13), one GPU each, pinned to the fabric.
func pairSpecs() []ContainerSpec {
	mk := func(node, role, ip string) ContainerSpec {
		return ContainerSpec{Resource: "ray_cluster.main", Node: node, Role: role, Name: "rayform-main", Image: stepsImage,
			NodeIP: ip, HeadAddr: "192.168.200.12:6379", GPUs: 1, Port: 6379, DashboardPort: 8265,
			Env: map[string]string{"VLLM_HOST_IP": ip, "NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
				"RAY_memory_monitor_refresh_ms": "0", "VLLM_CONFIG_ROOT": VLLMConfigRoot},
			NonCarryOver: network.EnvKeys(), ServeDir: servedir.Dir}
	}
	return []ContainerSpec{mk("spark1", "head", "192.168.200.12"), mk("spark2", "worker", "192.168.200.13")}
}

func TestJudgeRayTable(t *testing.T) {
	specs := pairSpecs()
	gpus := func(n float64) map[string]float64 { return map[string]float64{"GPU": n} }
	head := observe.RayNode{NodeIP: "192.168.200.12", IsHead: true, State: "ALIVE", Resources: gpus(1)}
	worker := observe.RayNode{NodeIP: "192.168.200.13", State: "ALIVE", Resources: gpus(1)}
	tests := []struct {
		name string
		rows []observe.RayNode
		want []string
	}{
		{"as declared", []observe.RayNode{head, worker, {NodeIP: "192.168.200.14", State: "DEAD"}}, nil},
		{"worker missing", []observe.RayNode{head}, []string{"spark2 (192.168.200.13) is not ALIVE in Ray's node table"}},
		{"head elsewhere", []observe.RayNode{{NodeIP: "10.1.230.180", IsHead: true, State: "ALIVE", Resources: gpus(1)}, worker},
			[]string{"ray head registered as 10.1.230.180; want 192.168.200.12"}},
		{"gpus", []observe.RayNode{head, {NodeIP: "192.168.200.13", State: "ALIVE"}}, []string{"spark2 (192.168.200.13) has 0 GPUs in Ray, want 1"}},
		{"twice", []observe.RayNode{head, worker, worker}, []string{"spark2 (192.168.200.13) is ALIVE 2 times"}},
		{"undeclared", []observe.RayNode{head, worker, {NodeIP: "10.1.230.181", State: "ALIVE"}},
			[]string{"10.1.230.181 is ALIVE as a worker but is no declared node's fabric address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reasons(judgeRayTable(specs, tt.rows))
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
	p := &pullProgress{image: stepsImage, layers: map[string]bool{}, progress: func(s string) { got = append(got, s) },
		throttle: hostenv.NewThrottle(now, time.Second)}
	w := hostenv.NewLineWriter(p.line)
	_, _ = w.Write([]byte(stepsPull[:40]))
	_, _ = w.Write([]byte(stepsPull[40:]))
	want := []string{
		"pulling " + stepsImage + ": 1/2 layers",
		"pulling " + stepsImage + ": 2/2 layers",
		"Status: Downloaded newer image for " + stepsImage,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestServeHostDirMount(t *testing.T) {
	spec := pairSpecs()[0]
	args := spec.RunArgs("lab")
	i := slices.Index(args, "/var/tmp/rayform/lab/spark1/rayform-main:/tmp/rayform/serve")
	if i < 1 || args[i-1] != "-v" {
		t.Fatalf("docker run does not mount the serve dir from the host:\n%q", args)
	}
	if got := servedir.Host("lab", "spark1", "rayform-main"); got != "/var/tmp/rayform/lab/spark1/rayform-main" {
		t.Fatalf("ServeHostDir = %q", got)
	}
	if ep := spec.EntrypointScript(); !strings.HasPrefix(ep, "mkdir -p /tmp/rayform/serve && rm -f /tmp/rayform/serve/serve-* && ") {
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
