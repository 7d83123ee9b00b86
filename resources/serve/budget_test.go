package serve

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/cluster"
)

// TestPlaceServes is the GPU budget's judgment (issue 33 item 1) on a
// cluster of two nodes of 2 GPUs: with vLLM's classic Ray executor a serve
// takes as many of the head's free GPUs as it has bundles, so a serve of
// 2 fills the head and every serve started after it fails ("Current node
// has no GPU available"); started smallest first, a serve of 1 and one of
// 2 both fit, whatever order the configuration lists them in.
func TestPlaceServes(t *testing.T) {
	sv := func(name string, tp int) *VLLMServe {
		return &VLLMServe{Decl: config.Decl{Addr: "vllm_serve." + name}, Name: name, TensorParallelSize: tp, PipelineParallelSize: 1}
	}
	classic := func(*VLLMServe) bool { return true }
	v2 := func(*VLLMServe) bool { return false }
	nodes := func(headFree, workerFree int) []gpuNode {
		return []gpuNode{{Name: "spark1", Total: 2, Free: headFree}, {Name: "spark2", Total: 2, Free: workerFree}}
	}
	cases := []struct {
		name    string
		nodes   []gpuNode
		serves  []*VLLMServe
		headGPU func(*VLLMServe) bool
		// want is each placed serve as name:head+worker, in order, then
		// "!name" for the one that fails (and "head" when for the head).
		want string
	}{
		{"a serve of 2 running fills the head; one of 1 added fails", nodes(0, 2), []*VLLMServe{sv("b", 1)}, classic, "!b head"},
		{"a serve of 2 added to a full head fails", nodes(0, 2), []*VLLMServe{sv("b", 2)}, classic, "!b head"},
		{"created together: the serve of 1 first", nodes(2, 2), []*VLLMServe{sv("a", 2), sv("b", 1)}, classic, "b:1+0 a:1+1"},
		{"created together, listed the other way round", nodes(2, 2), []*VLLMServe{sv("b", 1), sv("a", 2)}, classic, "b:1+0 a:1+1"},
		{"two serves of 2 never fit together", nodes(2, 2), []*VLLMServe{sv("b", 2), sv("a", 2)}, classic, "a:2+0 !b head"},
		{"a serve of 3 takes the head's 2 and one more", nodes(2, 2), []*VLLMServe{sv("a", 3)}, classic, "a:2+1"},
		{"more than the cluster has free", nodes(2, 1), []*VLLMServe{sv("a", 4)}, classic, "!a"},
		{"RayExecutorV2 needs no GPU on the head", nodes(0, 2), []*VLLMServe{sv("b", 2)}, v2, "b:0+2"},
		{"RayExecutorV2, two serves of 2", nodes(2, 2), []*VLLMServe{sv("b", 2), sv("a", 2)}, v2, "a:2+0 b:0+2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := placeServes(c.nodes, c.serves, c.headGPU)
			var got []string
			for _, p := range v.Order {
				got = append(got, fmt.Sprintf("%s:%d+%d", p.Serve.Name, p.GPUs[0], p.GPUs[1]))
			}
			if v.Failed != nil {
				f := "!" + v.Failed.Name
				if v.Head {
					f += " head"
				}
				got = append(got, f)
			}
			if s := strings.Join(got, " "); s != c.want {
				t.Errorf("placeServes = %q, want %q", s, c.want)
			}
			// The nodes given are not changed.
			if !slices.Equal(c.nodes, nodes(c.nodes[0].Free, c.nodes[1].Free)) {
				t.Errorf("placeServes changed its input: %+v", c.nodes)
			}
		})
	}
}

// TestNeedsHeadGPU is vLLM's rule by version: the classic Ray executor
// (0.17.1, and an unknown version: the stricter rule) needs a GPU on the
// head; RayExecutorV2, the default from 0.32.0, does not, unless the
// serve's or the cluster's env turns it off.
func TestNeedsHeadGPU(t *testing.T) {
	cases := []struct {
		version          string
		serveEnv, rayEnv map[string]string
		want             bool
	}{
		{"", nil, nil, true},
		{"0.17.1", nil, nil, true},
		{"0.32.0", nil, nil, false},
		{"0.33.0+cpu", nil, nil, false},
		{"0.32.0", map[string]string{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"}, nil, true},
		{"0.32.0", nil, map[string]string{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"}, true},
		{"0.32.0", map[string]string{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "1"}, map[string]string{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"}, false},
		{"0.17.1", map[string]string{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "1"}, nil, true},
	}
	for _, c := range cases {
		sv := &VLLMServe{Env: c.serveEnv}
		rc := &cluster.RayCluster{Env: c.rayEnv}
		if got := needsHeadGPU(sv, rc, c.version); got != c.want {
			t.Errorf("needsHeadGPU(vLLM %q, serve env %v, cluster env %v) = %v, want %v", c.version, c.serveEnv, c.rayEnv, got, c.want)
		}
	}
}
