package cudacompat

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/observe"
)

// Finding is one mismatch between an image and a node's GPU stack; the
// caller places it (Attr names the attribute whose file:line it is about:
// "image" of the cluster, "env" of the cluster, or "" for the node).
type Finding struct {
	Error                bool
	Attr                 string
	Summary, Detail, Fix string
}

// Image is what the judgment reads of an image: its reference, the values
// of its config's CUDA variables (observe.Image.Env), and the container
// environment the cluster adds to it.
type Image struct {
	Ref string
	Env map[string]string
	// ContainerEnv is the cluster's env, which overrides the image's.
	ContainerEnv map[string]string
}

// Judge compares an image with one node's GPU stack. Nothing unknown is a
// finding: a node whose nvidia-smi did not answer, or an image that names
// no CUDA, is judged on what is known.
func Judge(node string, g observe.GPUFacts, img Image) []Finding {
	if g.Err != "" || len(g.List) == 0 {
		return nil
	}
	var out []Finding
	driver := g.List[0].Driver
	dc, known := DriverCUDA(driver, g.CUDA)
	req, hasReq := ImageRequirement(img.Env, img.ContainerEnv)
	if known && hasReq && dc.Less(req.CUDA) && !(req.Enforced && req.acceptsBranch(driver)) {
		out = append(out, driverFinding(node, driver, dc, img, req))
	}
	out = append(out, archFindings(node, g, img)...)
	if f, ok := migFinding(node, g); ok {
		out = append(out, f)
	}
	if len(g.NVSwitches) > 0 && g.FabricManager != "" && g.FabricManager != "active" {
		out = append(out, Finding{Error: true,
			Summary: fmt.Sprintf("the fabric manager is not running on %s (nvidia-fabricmanager: %s), and its GPUs are joined by %d NVSwitches", node, g.FabricManager, len(g.NVSwitches)),
			Detail:  "On an NVSwitch system CUDA does not initialise until the fabric manager has set up the NVLink fabric: every process fails at its first CUDA call with error 802 (cudaErrorSystemNotReady, \"system not yet initialized\"), after the containers started.",
			Fix:     fmt.Sprintf("on %s: install nvidia-fabricmanager of the driver's exact version (%s) and `systemctl enable --now nvidia-fabricmanager`", node, driver)})
	}
	if f, ok := hostCompat(node, g); ok {
		out = append(out, f)
	}
	out = append(out, compatFindings(node, driver, dc, known, img, req, hasReq)...)
	return out
}

func driverFinding(node, driver string, dc Version, img Image, req Requirement) Finding {
	need := MinDriver(req.CUDA)
	needText := "a driver that supports CUDA " + req.CUDA.String()
	if need != "" {
		needText = "driver " + need + " or newer (the first with CUDA " + req.CUDA.String() + ")"
	}
	f := Finding{Error: true, Attr: "image",
		Summary: fmt.Sprintf("the driver on %s (%s, CUDA %s) is older than the image %s needs (CUDA %s, from its %s)", node, driver, dc, img.Ref, req.CUDA, req.Var),
		Fix:     fmt.Sprintf("install %s on %s, or use an image built for CUDA %s or older", needText, node, dc)}
	switch {
	case req.Enforced:
		f.Detail = fmt.Sprintf("The NVIDIA container toolkit refuses to start the container: \"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=%s, please update your driver to a newer version, or use an earlier cuda container\" (the image's %s=%s).", req.CUDA, req.Var, req.Text)
	case req.CUDA.Major == dc.Major:
		// CUDA's minor-version compatibility: the runtime runs on a
		// driver of the same major version, except PTX it must JIT and
		// features of the newer minor.
		f.Error = false
		f.Detail = fmt.Sprintf("The image sets no NVIDIA_REQUIRE_CUDA, so the container starts; CUDA %s runs on a CUDA %s driver by minor-version compatibility, but PTX built by the newer toolkit cannot be JIT-compiled (cudaErrorUnsupportedPtxVersion, 222) and the newer minor's features fail.", req.CUDA, dc)
	default:
		f.Detail = fmt.Sprintf("The image sets no NVIDIA_REQUIRE_CUDA, so the container starts, and the first CUDA call fails: \"CUDA driver version is insufficient for CUDA runtime version\" (cudaErrorInsufficientDriver, 35) (the image's CUDA_VERSION=%s).", req.Text)
	}
	return f
}

// Arch is one target of a kernel build: sm_XY (a cubin, binary code for
// capability X.Y), or compute_XY (PTX, JIT-compiled by the driver for
// X.Y or higher). Exact ("a") cubins run only on X.Y itself; family ("f")
// cubins on X.Y and higher minors of X.
type Arch struct {
	Major, Minor int
	PTX          bool
	Suffix       string // "", "a" or "f"
}

func (a Arch) String() string {
	n := fmt.Sprintf("%d%d%s", a.Major, a.Minor, a.Suffix)
	if a.PTX {
		return "compute_" + n
	}
	return "sm_" + n
}

// ParseArchList reads TORCH_CUDA_ARCH_LIST ("7.0 8.0;9.0a 12.0+PTX") and
// torch/nvcc names ("sm_90", "compute_90", "sm_100a"); words it cannot
// read are ignored.
func ParseArchList(s string) []Arch {
	var out []Arch
	for w := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ' ' || r == ';' || r == ',' }) {
		ptx := false
		if base, ok := strings.CutSuffix(w, "+PTX"); ok {
			w, ptx = base, true
		}
		var a Arch
		switch {
		case strings.HasPrefix(w, "sm_") || strings.HasPrefix(w, "compute_"):
			a.PTX = strings.HasPrefix(w, "compute_")
			n := w[strings.IndexByte(w, '_')+1:]
			if k := strings.LastIndexAny(n, "0123456789"); k >= 0 && k+1 < len(n) {
				n, a.Suffix = n[:k+1], n[k+1:]
			}
			v, err := strconv.Atoi(n)
			if err != nil || v < 10 {
				continue
			}
			a.Major, a.Minor = v/10, v%10
		default:
			if k := strings.LastIndexAny(w, "0123456789"); k >= 0 && k+1 < len(w) {
				w, a.Suffix = w[:k+1], w[k+1:]
			}
			v, ok := ParseVersion(w)
			if !ok || !strings.Contains(w, ".") {
				continue
			}
			a.Major, a.Minor = v.Major, v.Minor
		}
		if a.Suffix != "" && a.Suffix != "a" && a.Suffix != "f" {
			continue
		}
		out = append(out, a)
		if ptx {
			p := a
			p.PTX, p.Suffix = true, ""
			out = append(out, p)
		}
	}
	return out
}

// Runs says whether code built for archs runs on a GPU of capability cc,
// and by what: the cubin that matches, or the PTX the driver compiles.
func Runs(archs []Arch, cc Version) (Arch, bool) {
	var jit *Arch
	for i, a := range archs {
		switch {
		case a.PTX:
			if !cc.Less(Version{a.Major, a.Minor}) && (jit == nil || Version{jit.Major, jit.Minor}.Less(Version{a.Major, a.Minor})) {
				jit = &archs[i]
			}
		case a.Suffix == "a":
			if a.Major == cc.Major && a.Minor == cc.Minor {
				return a, true
			}
		default:
			if a.Major == cc.Major && a.Minor <= cc.Minor {
				return a, true
			}
		}
	}
	if jit != nil {
		return *jit, true
	}
	return Arch{}, false
}

func archNames(archs []Arch) string {
	var names []string
	for _, a := range archs {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}

// archFindings: each distinct compute capability of the node's GPUs
// against the image's TORCH_CUDA_ARCH_LIST (what its kernels were built
// for), when the image declares it.
func archFindings(node string, g observe.GPUFacts, img Image) []Finding {
	list := img.Env["TORCH_CUDA_ARCH_LIST"]
	return kernelFindings(node, g, img.Ref, ParseArchList(list), fmt.Sprintf("Its TORCH_CUDA_ARCH_LIST=%q", list))
}

// JudgeKernels judges the archs of an image's compiled kernels, as the
// image itself reported them (what names where they came from, e.g.
// "vLLM's kernels (vllm/_C.abi3.so)"), against the node's GPUs.
func JudgeKernels(node string, g observe.GPUFacts, ref string, archs []string, what string) []Finding {
	if g.Err != "" {
		return nil
	}
	return kernelFindings(node, g, ref, ParseArchList(strings.Join(archs, " ")), what)
}

func kernelFindings(node string, g observe.GPUFacts, ref string, archs []Arch, what string) []Finding {
	if len(archs) == 0 {
		return nil
	}
	var out []Finding
	var seen []string
	for _, gpu := range g.List {
		cc, ok := ParseVersion(gpu.ComputeCap)
		if !ok || slices.Contains(seen, gpu.ComputeCap) {
			continue
		}
		seen = append(seen, gpu.ComputeCap)
		if _, ok := Runs(archs, cc); ok {
			continue
		}
		out = append(out, Finding{Error: true, Attr: "image",
			Summary: fmt.Sprintf("the image %s has no kernels for compute capability %s (%s on %s): it was built for %s", ref, cc, gpu.Name, node, archNames(archs)),
			Detail:  fmt.Sprintf("%s holds no cubin of capability %d.x at or below %s and no PTX at or below it to JIT-compile: vLLM fails at its first kernel with \"CUDA error: no kernel image is available for execution on the device\", after the model loaded.", what, cc.Major, cc),
			Fix:     fmt.Sprintf("use an image built with %s (or a PTX target at or below it, e.g. TORCH_CUDA_ARCH_LIST=\"%d.0+PTX\") for %s", Arch{Major: cc.Major, Minor: cc.Minor}, cc.Major, node)})
	}
	return out
}

func migFinding(node string, g observe.GPUFacts) (Finding, bool) {
	var idx []string
	for _, gpu := range g.List {
		if gpu.MIGMode == "Enabled" {
			idx = append(idx, strconv.Itoa(gpu.Index))
		}
	}
	if len(idx) == 0 {
		return Finding{}, false
	}
	return Finding{Error: true,
		Summary: fmt.Sprintf("GPU %s of %s is in MIG mode", strings.Join(idx, ", "), node),
		Detail:  "Ray counts a MIG-mode GPU as one whole GPU and vLLM's workers select it by index, but CUDA on a MIG-mode GPU runs only inside a MIG instance named by its MIG UUID: vLLM cannot use it as the whole GPU its tensor parallelism plans for.",
		Fix:     fmt.Sprintf("on %s: `nvidia-smi -i %s -mig 0` (then reset the GPU or reboot), or declare only the GPUs not in MIG mode", node, strings.Join(idx, ","))}, true
}

// libVersion is the driver version of a libcuda file name
// (libcuda.so.580.95.05 → 580.95.05).
func libVersion(p string) string {
	_, v, ok := strings.Cut(path.Base(p), ".so.")
	if !ok || !strings.Contains(v, ".") {
		return ""
	}
	return v
}

// compatFindings: a CUDA forward-compatibility library that would be
// loaded where the driver does not need it. Forward compatibility exists
// for an older driver running a newer CUDA; a compat library older than
// the driver shadows it, and CUDA fails with error 803
// (cudaErrorSystemDriverMismatch).
func compatFindings(node, driver string, dc Version, known bool, img Image, req Requirement, hasReq bool) []Finding {
	var out []Finding
	if dir := compatDir(img.ContainerEnv["LD_LIBRARY_PATH"], img.Env["LD_LIBRARY_PATH"]); dir != "" && known && hasReq && req.CUDA.Less(dc) {
		out = append(out, Finding{Error: true, Attr: "image",
			Summary: fmt.Sprintf("the image %s loads the CUDA compat library of CUDA %s (LD_LIBRARY_PATH has %s) on %s, whose driver %s supports CUDA %s itself", img.Ref, req.CUDA, dir, node, driver, dc),
			Detail:  "A forward-compatibility libcuda is for a driver older than the image's CUDA; on a newer driver it shadows the driver's own libcuda, and the first CUDA call fails with error 803: \"system has unsupported display driver / cuda driver combination\".",
			Fix:     fmt.Sprintf("set LD_LIBRARY_PATH in the ray_cluster's env without %s (the driver on %s needs no compat library), or use an image without it", dir, node)})
	}
	return out
}

// compatDir is the first directory of the library path (the container's
// env overriding the image's) that is a CUDA compat directory.
func compatDir(container, image string) string {
	p := image
	if container != "" {
		p = container
	}
	for d := range strings.SplitSeq(p, ":") {
		if path.Base(path.Clean(d)) == "compat" {
			return d
		}
	}
	return ""
}

// hostCompat is a finding when the host's own libcuda.so.1 resolves to a
// compat library older than its driver (engine/observe.GPUFacts.LibCUDA).
func hostCompat(node string, g observe.GPUFacts) (Finding, bool) {
	if len(g.List) == 0 || !strings.Contains(g.LibCUDA, "/compat/") {
		return Finding{}, false
	}
	v, driver := libVersion(g.LibCUDA), g.List[0].Driver
	if v == "" || driver == "" || compareDriver(v, driver) >= 0 {
		return Finding{}, false
	}
	return Finding{Error: true,
		Summary: fmt.Sprintf("libcuda.so.1 on %s is a CUDA compat library (%s, of driver %s) older than the driver %s", node, g.LibCUDA, v, driver),
		Detail:  "The loader's cache puts the forward-compatibility library before the driver's own libcuda; on a newer driver CUDA fails with error 803: \"system has unsupported display driver / cuda driver combination\".",
		Fix:     fmt.Sprintf("on %s: remove %s from /etc/ld.so.conf.d and run ldconfig", node, path.Dir(g.LibCUDA))}, true
}
