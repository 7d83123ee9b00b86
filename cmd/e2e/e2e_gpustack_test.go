//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/transport/shell"
)

// e2eGPUStack is a two-node lab cluster of image %[1]q, with no serve: the
// subject is the cluster's image against each node's GPU stack.
const e2eGPUStack = `
network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = "enp1s0f1np1"
}

ray_cluster "spark" {
  image           = %[1]q
  head            = node.spark1
  workers         = [node.spark2]
  network         = network.fabric
  memory_monitor  = false
  dataplane_check = false
}
`

// TestE2EPreflightGPUStack: plan judges the cluster's image against the GPU
// stack each node's probe reports (simnode's nvidia-smi playing the
// hardware file, docker's image config playing a CUDA image) and refuses
// each mismatch with its node, the two versions or archs and the fix, at
// the image attribute or the node's block; apply refuses the same and no
// container is created. The lab plays the mismatches: an image whose
// NVIDIA_REQUIRE_CUDA is newer than the driver, a node whose driver is
// older than the image needs, a GPU whose compute capability the image's
// TORCH_CUDA_ARCH_LIST lacks, an image whose LD_LIBRARY_PATH loads a CUDA
// 12.8 compat library on a CUDA 13.0 driver, GPUs in MIG mode. The lab's own image, on
// the lab's default stack, plans a create: no finding.
func TestE2EPreflightGPUStack(t *testing.T) {
	// Fast mode: nothing starts; the subject is plan's judgment.
	l := startLab(t, "rfe2egpu", append([]string{"-gpus", "2", "-unified=false", "-gpu-model", "NVIDIA H100 80GB HBM3"}, fastRay...)...)
	images := map[string]string{
		"rflab/cuda131":   "ENV NVIDIA_REQUIRE_CUDA=\"cuda>=13.1 brand=tesla,driver>=535,driver<536\" CUDA_VERSION=13.1.0",
		"rflab/cuda128":   "ENV NVIDIA_REQUIRE_CUDA=\"cuda>=12.8\" CUDA_VERSION=12.8.1",
		"rflab/sm80sm90":  "ENV TORCH_CUDA_ARCH_LIST=\"8.0 9.0\"",
		"rflab/compat128": "ENV CUDA_VERSION=12.8.1 LD_LIBRARY_PATH=/usr/local/cuda-12.8/compat:/usr/local/nvidia/lib64",
	}
	for _, node := range []string{"spark1", "spark2"} {
		for tag, env := range images {
			cmd := fmt.Sprintf("printf 'FROM %%s\\n%%s\\n' %s %s | DOCKER_BUILDKIT=0 docker build -q -t %s -", shell.Quote(seedImage), shell.Quote(env), shell.Quote(tag))
			if out, err := l.ssh(node, cmd); err != nil {
				t.Fatalf("building %s on %s: %v\n%s", tag, node, err, out)
			}
		}
	}
	tests := []struct {
		name  string
		image string
		gpus  map[string]func(hw map[string]any) // per node, an edit of its hardware file
		code  int
		want  []string
		at    string // the configuration line the finding points at: "image" or a node
		host  string // the host of that finding
	}{
		{"the lab's image on the lab's stack", seedImage, nil, exitChanges, []string{"Plan: 1 to add"}, "", ""},
		{"image needs a newer CUDA than the drivers", "rflab/cuda131", nil, exitError, []string{
			"Error: the driver on spark1 (580.126.09, CUDA 13.0) is older than the image rflab/cuda131 needs (CUDA 13.1, from its NVIDIA_REQUIRE_CUDA)",
			"Error: the driver on spark2 (580.126.09, CUDA 13.0) is older than the image rflab/cuda131 needs",
			"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.1",
			"Fix: install driver 590.44.01 or newer (the first with CUDA 13.1) on spark1, or use an image built for CUDA 13.0 or older"}, "image", "spark1"},
		{"one node's driver older than the image needs", "rflab/cuda128", map[string]func(map[string]any){
			"spark2": func(hw map[string]any) { hw["driver_version"], hw["cuda_version"] = "550.54.15", "12.4" }}, exitError, []string{
			"Error: the driver on spark2 (550.54.15, CUDA 12.4) is older than the image rflab/cuda128 needs (CUDA 12.8, from its NVIDIA_REQUIRE_CUDA)",
			"Fix: install driver 570.26 or newer (the first with CUDA 12.8) on spark2"}, "image", "spark2"},
		{"a GPU whose compute capability the image lacks", "rflab/sm80sm90", map[string]func(map[string]any){
			"spark2": func(hw map[string]any) { setGPUs(hw, "compute_cap", "12.1") }}, exitError, []string{
			"Error: the image rflab/sm80sm90 has no kernels for compute capability 12.1 (NVIDIA H100 80GB HBM3 on spark2): it was built for sm_80, sm_90",
			"no kernel image is available for execution on the device",
			"Fix: use an image built with sm_121"}, "image", "spark2"},
		{"a compat library the driver does not need", "rflab/compat128", nil, exitError, []string{
			"Error: the image rflab/compat128 loads the CUDA compat library of CUDA 12.8 (LD_LIBRARY_PATH has /usr/local/cuda-12.8/compat) on spark1, whose driver 580.126.09 supports CUDA 13.0 itself",
			"system has unsupported display driver / cuda driver combination",
			"Fix: set LD_LIBRARY_PATH in the ray_cluster's env without /usr/local/cuda-12.8/compat"}, "image", "spark1"},
		{"GPUs in MIG mode", seedImage, map[string]func(map[string]any){
			"spark1": func(hw map[string]any) { setGPUs(hw, "mig", "Enabled") }}, exitError, []string{
			"Error: GPU 0, 1 of spark1 is in MIG mode",
			"Fix: on spark1: `nvidia-smi -i 0,1 -mig 0`"}, "spark1", "spark1"},
	}
	before := l.containers(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for node, edit := range tt.gpus {
				restore := l.editHardware(t, node, edit)
				t.Cleanup(restore)
			}
			dir := l.config(fmt.Sprintf(e2eGPUStack, tt.image))
			src := l.twoGPUs(t, dir)
			r := l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode")
			t.Logf("plan took %v", r.elapsed)
			mustCode(t, "plan", r, tt.code)
			out := r.stdout + r.stderr
			mustContain(t, "plan", out, tt.want...)
			switch tt.at {
			case "":
				if strings.Contains(out, "Error:") || strings.Contains(out, "Warning:") {
					t.Errorf("a finding on a matching stack:\n%s", r)
				}
			case "image":
				line := 1 + strings.Count(src[:strings.Index(src, "  image ")], "\n")
				mustContain(t, "plan", out, fmt.Sprintf("with ray_cluster.spark, on host %s, at main.hcl:%d", tt.host, line))
			default:
				line := 1 + strings.Count(src[:strings.Index(src, fmt.Sprintf("node %q", tt.at))], "\n")
				mustContain(t, "plan", out, fmt.Sprintf("with node.%s, on host %s, at main.hcl:%d", tt.at, tt.host, line))
			}
			if tt.code == exitError {
				r := l.rayform("", "-chdir="+dir, "apply", "-auto-approve")
				mustCode(t, "apply", r, exitError)
				mustContain(t, "apply", r.stdout+r.stderr, tt.want[0])
			}
			if after := l.containers(t); after != before {
				t.Errorf("containers changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// setGPUs sets key of every GPU of a hardware file.
func setGPUs(hw map[string]any, key string, v any) {
	gpus, _ := hw["gpus"].([]any)
	for _, g := range gpus {
		if m, ok := g.(map[string]any); ok {
			m[key] = v
		}
	}
}

// editHardware is the lab's knob for a node's GPU stack: it rewrites the
// node's simulated hardware file (SIMNODE_HARDWARE of its SSH sessions,
// which simnode's nvidia-smi reads) with edit applied, and returns the
// function that puts the original back.
func (l *e2eLab) editHardware(t *testing.T, node string, edit func(map[string]any)) func() {
	t.Helper()
	orig, err := l.ssh(node, `cat "$SIMNODE_HARDWARE"`)
	if err != nil {
		t.Fatalf("reading the hardware file of %s: %v\n%s", node, err, orig)
	}
	var hw map[string]any
	if err := json.Unmarshal([]byte(orig), &hw); err != nil {
		t.Fatalf("the hardware file of %s: %v", node, err)
	}
	edit(hw)
	b, err := json.Marshal(hw)
	if err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		if out, err := l.ssh(node, "printf %s "+shell.Quote(s)+` >"$SIMNODE_HARDWARE"`); err != nil {
			t.Errorf("writing the hardware file of %s: %v\n%s", node, err, out)
		}
	}
	write(string(b))
	return func() { write(orig) }
}
