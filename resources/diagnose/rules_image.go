package diagnose

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/rayform/rayform/resources/cudacompat"
)

// This file holds the rules of the image domain: what the container image
// brings (or fails to bring) — the GPU runtime, the pull, Ray in the image,
// and a model newer than the image's transformers or vLLM.

// ---- docker --gpus without the NVIDIA runtime -------------------------------

var gpuDriverRE = regexp.MustCompile(`could not select device driver "([^"]*)" with capabilities: \[\[gpu\]\]`)

func matchGPURuntime(b string) bool {
	return containsAny(b, "could not select device driver", "nvidia-container-cli: initialization error")
}

func buildGPURuntime(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	host := s.nodeOf(i)
	on := onHost(host)
	if !strings.Contains(s.lines[i].body, "could not select device driver") {
		// The hook's NVML error names the cause itself: its NVML
		// catalogue entry ("nvml error: driver/library version mismatch",
		// on this line or the next where a terminal wrapped it) says which
		// reading applies; this rule steps aside for it.
		if e, _, ok := signatureOf(s.continuation(i, strings.TrimSpace(s.lines[i].body), 2)); ok && e.Layer == "NVML" && e.Class != "nvml-error" {
			return Diagnosis{}, false
		}
		return Diagnosis{
			Title:       "the NVIDIA container hook failed" + on + ": the driver is not usable",
			Evidence:    []Evidence{s.evidence(i)},
			Explanation: "Docker has the NVIDIA runtime, but nvidia-container-cli could not initialise NVML: the kernel driver is not loaded (or does not match the user-space libraries)" + on + ".",
			Fix:         "On " + orDefault(host, "the host") + ": make `nvidia-smi` work on the host first (load the driver, or reboot after a driver upgrade), then re-run rayform apply.",
		}, true
	}
	driver := "\"\""
	if m := gpuDriverRE.FindStringSubmatch(s.lines[i].body); m != nil {
		driver = strconv.Quote(m[1])
	}
	return Diagnosis{
		Title:    "docker" + on + " cannot give the container a GPU: no NVIDIA runtime",
		Evidence: []Evidence{s.evidence(i)},
		Explanation: "`docker run --gpus all` asks Docker for a device driver with the \"gpu\" capability and Docker has none registered (driver " + driver + "): " +
			"the NVIDIA Container Toolkit is not installed, or not configured in /etc/docker/daemon.json" + on + ". Nothing started.",
		Fix: "On " + orDefault(host, "the host") + ": install nvidia-container-toolkit, then\n" +
			"  sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker\n" +
			"Check: docker run --rm --gpus all " + s.ctx.imageRef() + " nvidia-smi",
	}, true
}

// onHost is " on spark1", or "" when the host is unknown.
func onHost(h string) string {
	if h == "" {
		return ""
	}
	return " on " + h
}

// ---- image pull -------------------------------------------------------------

var (
	pullPlatformRE = regexp.MustCompile(`no matching manifest for (\S+?)\.? in the manifest list entries`)
	pullDeniedRE   = regexp.MustCompile(`pull access denied for ([^,\s]+)`)
	pullManifestRE = regexp.MustCompile(`manifest for (\S+) not found`)
	pullRegistryRE = regexp.MustCompile(`Get "?(https?://([^/"\s]+)/v2/[^"\s]*)"?: (.*)`)
	pullNoImageRE  = regexp.MustCompile(`No such image: (\S+)`)
	pullLocalRE    = regexp.MustCompile(`Unable to find image '([^']+)' locally`)
	netReasonRE    = regexp.MustCompile(`connection refused|i/o timeout|no such host|Client\.Timeout exceeded|network is unreachable|no route to host|server misbehaving|TLS handshake timeout`)
)

func matchImagePull(b string) bool {
	switch {
	case containsAny(b, "no matching manifest for", "pull access denied for", "manifest unknown",
		"server gave HTTP response to HTTPS client", "toomanyrequests", "No such image: "):
		return true
	case pullManifestRE.MatchString(b):
		return true
	case strings.Contains(b, "Error response from daemon") && containsAny(b, "unauthorized: authentication required", "denied: requested access to the resource is denied"):
		return true
	case pullRegistryRE.MatchString(b) && netReasonRE.MatchString(b):
		return true
	}
	return false
}

func buildImagePull(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	b := s.lines[i].body
	host := s.nodeOf(i)
	on := onHost(host)
	img := s.ctx.Image
	lo, hi := s.logSpan(i)
	for j := lo; j < hi; j++ {
		if m := pullLocalRE.FindStringSubmatch(s.lines[j].body); m != nil {
			img = m[1]
			break
		}
	}
	ev := []Evidence{s.evidence(i)}
	d := Diagnosis{Evidence: ev}
	imgName := orDefault(img, "the image")
	check := "Check from " + orDefault(host, "the host") + ": docker manifest inspect " + orDefault(img, "<image>")
	switch {
	case pullPlatformRE.MatchString(b):
		plat := pullPlatformRE.FindStringSubmatch(b)[1]
		d.Title = imgName + " has no " + plat + " variant" + on
		d.Explanation = "The tag exists, but its manifest list has no entry for this host's platform " + plat + " (DGX Spark and GH200 are ARM64): an image built only for amd64 cannot run here."
		d.Fix = "Use an ARM64 or multi-arch build of the image in image on " + s.ctx.cluster() + " (for GB10 / DGX Spark, an image built for it).\n" + check
	case pullDeniedRE.MatchString(b):
		repo := pullDeniedRE.FindStringSubmatch(b)[1]
		d.Title = "cannot pull " + repo + on + ": the repository does not exist or needs docker login"
		d.Explanation = "The registry refused the pull of " + repo + ": either the name is wrong (a typo, a missing registry host or namespace) or the repository is private and this host is not logged in."
		d.Fix = "Check the image name on " + s.ctx.cluster() + "; if it is private, run `docker login <registry>` on every node (rayform reads credentials from each host's Docker config).\n" + check
	case pullManifestRE.MatchString(b) || strings.Contains(b, "manifest unknown"):
		ref := imgName
		if m := pullManifestRE.FindStringSubmatch(b); m != nil {
			ref = m[1]
		}
		d.Title = ref + " does not exist in the registry (manifest unknown)"
		d.Explanation = "The repository exists but has no tag or digest " + ref + "; many repositories publish no \"latest\"."
		d.Fix = "Set image on " + s.ctx.cluster() + " to a published tag (pin a version or a digest).\n" + check
	case strings.Contains(b, "server gave HTTP response to HTTPS client"):
		reg := "the registry"
		if m := pullRegistryRE.FindStringSubmatch(b); m != nil {
			reg = m[2]
		}
		d.Title = "registry " + reg + " speaks plain HTTP; docker" + on + " requires HTTPS"
		d.Explanation = "Docker pulls over HTTPS unless the registry is listed as insecure; " + reg + " answered with plain HTTP."
		d.Fix = "Serve the registry with TLS, or add it on every node to /etc/docker/daemon.json and restart Docker:\n  {\"insecure-registries\": [\"" + reg + "\"]}"
	case strings.Contains(b, "toomanyrequests"):
		d.Title = "the registry rate-limited the pull" + on
		d.Explanation = "The registry answered toomanyrequests: anonymous pulls are rate limited per source IP."
		d.Fix = "Run `docker login` on every node, or pull through a mirror (registry-mirrors in /etc/docker/daemon.json)."
	case containsAny(b, "unauthorized: authentication required", "denied: requested access to the resource is denied"):
		d.Title = "the registry refused the pull of " + imgName + on + ": not authorised"
		d.Explanation = "The registry requires credentials for " + imgName + " and this host has none (or wrong ones)."
		d.Fix = "Run `docker login <registry>` on every node."
	case pullNoImageRE.MatchString(b):
		ref := pullNoImageRE.FindStringSubmatch(b)[1]
		d.Title = ref + " is not present" + on
		d.Explanation = "Docker was told not to pull and the image is not in the local store of this host."
		d.Fix = "Pull it on every node (docker pull " + ref + "), or let rayform pull it."
	default:
		m := pullRegistryRE.FindStringSubmatch(b)
		reason := netReasonRE.FindString(b)
		reg := "the registry"
		if m != nil {
			reg = m[2]
		}
		d.Title = "registry " + reg + " is unreachable" + on + " (" + reason + ")"
		d.Explanation = "Docker could not reach " + reg + " to pull " + imgName + ": " + reason + ". The host has no route, DNS or proxy path to the registry, or the registry is down."
		d.Fix = "Make " + reg + " reachable from " + orDefault(host, "the host") + " (check: curl -sv https://" + reg + "/v2/), configure a registry mirror, or copy the image: docker save " + orDefault(img, "<image>") + " | ssh " + orDefault(host, "<host>") + " docker load"
	}
	return d, true
}

// ---- Ray missing from the image ---------------------------------------------

var rayMissingRE = regexp.MustCompile(`(?:^|[\s:/])ray: (?:command )?not found|exec: \\?"ray\\?": executable file not found|No module named '?ray'?(?:$|[^.\w])|Failed to import Ray`)

func matchRayMissing(b string) bool {
	return containsAny(b, "ray", "Ray") && rayMissingRE.MatchString(b)
}

func buildRayMissing(s *scan, hits []int) (Diagnosis, bool) {
	// vLLM warns "Failed to import Ray ... For distributed inference, please
	// install Ray" on every start without Ray; a single-node run does not
	// need it. The warning alone is a cause only where the deployment runs
	// on Ray (rayform's context says so).
	var strong []int
	for _, j := range hits {
		if !strings.Contains(s.lines[j].body, "Failed to import Ray") {
			strong = append(strong, j)
		}
	}
	if len(strong) == 0 && !s.ctx.onRay() {
		return Diagnosis{}, false
	}
	i := hits[0]
	if len(strong) > 0 {
		i = strong[0]
	}
	host := s.nodeOf(i)
	img := s.ctx.image()
	return Diagnosis{
		Title:    img + " has no Ray" + onHost(host),
		Evidence: []Evidence{s.evidence(i)},
		Explanation: "rayform runs `ray start` inside the image, and vLLM's Ray executor imports ray; this image has neither the ray CLI nor the Python module. " +
			"vLLM dropped ray from its dependencies (0.19.1; official images since about 0.18), so a stock vLLM image no longer ships it.",
		Fix: "Use an image that ships Ray, or extend this one and set image on " + s.ctx.cluster() + " to the result (the same image on every node, so head and workers run the same Ray):\n" +
			"  FROM " + orDefault(s.ctx.Image, "<image>") + "\n" +
			"  RUN pip install 'ray[default]'\n" +
			"Check: docker run --rm --entrypoint ray <image> --version",
	}, true
}

// ---- transformers does not know the model type ---------------------------------

var modelTypeRE = regexp.MustCompile("has model type `?([^`\\s]+)`? but Transformers does not recognize this architecture")

func matchModelType(b string) bool {
	return strings.Contains(b, "but Transformers does not recognize") && modelTypeRE.MatchString(b)
}

func buildModelType(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	mt := modelTypeRE.FindStringSubmatch(s.lines[i].body)[1]
	host := s.nodeOf(i)
	c := s.ctx
	return Diagnosis{
		Title:    "the transformers in " + c.image() + onHost(host) + " does not know the model type " + mt,
		Evidence: []Evidence{s.evidence(i)},
		Explanation: "vLLM reads the model's config.json with transformers' AutoConfig, which maps \"model_type\": \"" + mt + "\" to a config class; this transformers has none: " +
			"it is older than the model (transformers as pinned by the image's vLLM), or the model ships its own code and needs --trust-remote-code.",
		Fix: "Use an image whose vLLM and transformers support " + mt + " (a newer vLLM release; its notes list new models) in image on " + c.cluster() +
			" — check with `docker run --rm --entrypoint python3 " + c.imageRef() + " -c 'import transformers; print(transformers.__version__)'`. " +
			"If the model card says it needs custom code, add \"--trust-remote-code\" to extra_args on " + c.serve() + " instead.",
	}, true
}

// ---- architecture unknown to the image's vLLM ---------------------------------

var archRE = regexp.MustCompile(`Model architectures? (\[[^\]]*\]) (failed to be inspected|are not supported for now|is not supported)`)

func matchArch(b string) bool { return archRE.MatchString(b) }

func buildArch(s *scan, hits []int) (Diagnosis, bool) {
	i := hits[0]
	m := archRE.FindStringSubmatch(s.lines[i].body)
	host := s.nodeOf(i)
	c := s.ctx
	in := "the vLLM in " + c.image()
	if c.VLLMVersion != "" {
		in = "vLLM " + c.VLLMVersion + " in " + c.image()
	}
	return Diagnosis{
		Title:    in + onHost(host) + " cannot load the model's architecture " + m[1],
		Evidence: []Evidence{s.evidence(i)},
		Explanation: "vLLM looks the architecture named in the model's config.json up in its model registry; \"" + m[2] + "\" means this vLLM has no (working) implementation of it: " +
			"the model is newer than the image's vLLM, or model files were copied between vLLM versions whose base classes differ.",
		Fix: "Use an image whose vLLM supports " + m[1] + " (its release notes list new architectures) in image on " + c.cluster() + "; `docker run --rm " + c.imageRef() + " vllm --version` shows what the image has.",
	}, true
}

// ---- the host's NVIDIA driver is older than the image's CUDA -------------------

// DriverTooOld: the host's NVIDIA driver does not support the CUDA version
// of the image (the catalogue's class): the container runtime refuses the
// container, or CUDA fails in it (error 804, 803, 35).
const DriverTooOld Cause = "driver-too-old"

var (
	// torch/cuda/__init__.py (_check_driver): "The NVIDIA driver on your
	// system is too old (found version 11040)" — the driver's CUDA version
	// as 1000*major + 10*minor.
	torchDriverOldRE = regexp.MustCompile(`The NVIDIA driver on your system is too old \(found version (\d+)\)`)
	// libnvidia-container's requirement ("unsatisfied condition: cuda>=12.8"
	// and the --require=cuda>=9.2 of the hook's command line), the CUDA
	// images' banner ("CUDA Version 12.1.1").
	cudaRequireRE = regexp.MustCompile(`(?:unsatisfied condition: |--require=)cuda ?>= ?(\d+\.\d+)|^CUDA Version (\d+\.\d+)`)
	// nvidia-smi's header pasted into a log: "Driver Version: 525.147.05   CUDA Version: 12.0".
	smiDriverRE = regexp.MustCompile(`Driver Version: (\d+\.\d+(?:\.\d+)?)\s+CUDA Version: (\d+\.\d+)`)
	cudaErrNoRE = regexp.MustCompile(`(?:Error|error|CUDA failure) (80[34]|35)\b`)
)

// cudaMinDriver is the Linux driver CUDA need ("12.8") needs natively
// (cudacompat's table, from NVIDIA's release notes); "" when unknown.
func cudaMinDriver(need string) string {
	v, ok := cudacompat.ParseVersion(need)
	if !ok {
		return ""
	}
	return cudacompat.MinDriver(v)
}

func matchDriver(b string) bool {
	if torchDriverOldRE.MatchString(b) {
		return true
	}
	if !containsAny(b, "unsatisfied condition", "forward compatibility", "driver combination", "driver version is insufficient") {
		return false
	}
	e, _, ok := signatureOf(b)
	return ok && Cause(e.Class) == DriverTooOld
}

// firstFailing returns the first of hits that keep (nil: all) accepts and
// whose process did not go on past it (healthyAfter).
func (s *scan) firstFailing(hits []int, keep func(int) bool) (int, bool) {
	for _, j := range hits {
		if (keep == nil || keep(j)) && !s.healthyAfter(j) {
			return j, true
		}
	}
	return -1, false
}

func buildDriver(s *scan, hits []int) (Diagnosis, bool) {
	i, ok := s.firstFailing(hits, nil)
	if !ok {
		return Diagnosis{}, false
	}
	b := s.lines[i].body
	host := s.nodeOf(i)
	ev := []Evidence{s.evidence(i)}
	// What the logs say of the two versions.
	need, drv, drvCUDA := "", "", ""
	if m := torchDriverOldRE.FindStringSubmatch(b); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			drvCUDA = strconv.Itoa(n/1000) + "." + strconv.Itoa(n%1000/10)
		}
	}
	lo, hi := s.logSpan(i)
	for j := lo; j < hi; j++ {
		t := s.lines[j].text
		if m := cudaRequireRE.FindStringSubmatch(s.lines[j].body); m != nil && need == "" {
			need = m[1] + m[2]
		}
		if m := smiDriverRE.FindStringSubmatch(t); m != nil && drv == "" {
			drv, drvCUDA = m[1], m[2]
			ev = append(ev, s.evidence(j))
		}
	}
	d := Diagnosis{Evidence: ev}
	d.Title = "the NVIDIA driver" + onHost(host) + " is too old for the image's CUDA" + ifNotEmpty(" "+need, need)
	if drv != "" || drvCUDA != "" {
		d.Title += " (the driver" + ifNotEmpty(" "+drv, drv) + " supports CUDA " + orDefault(drvCUDA, "?") + ")"
	}
	var why string
	errNo := ""
	if m := cudaErrNoRE.FindStringSubmatch(b); m != nil {
		errNo = m[1]
	}
	switch {
	case strings.Contains(b, "unsatisfied condition"):
		why = "The NVIDIA container runtime compares the image's requirement (NVIDIA_REQUIRE_CUDA" + ifNotEmpty(": cuda>="+need, need) + ") with the CUDA version the host's driver supports, and refused to start the container: nothing in it ran."
	case strings.Contains(b, "forward compatibility") || errNo == "804":
		why = "CUDA error 804: the image's CUDA is newer than the host's driver supports. The image carries CUDA's forward-compatibility libraries, which work only on data-center GPUs; on this GPU the CUDA runtime refuses, and torch finds no device."
	case strings.Contains(b, "driver combination") || errNo == "803":
		why = "CUDA error 803: the CUDA user-space driver (libcuda) the process loaded does not match the host's kernel driver module: a driver upgraded without a reboot (the old module still loaded), or a forward-compatibility libcuda of the image that this GPU or driver does not accept."
	case torchDriverOldRE.MatchString(b):
		why = "torch was built for a newer CUDA than the host's driver supports" + ifNotEmpty(" (the driver reports CUDA "+drvCUDA+")", drvCUDA) + "."
	default:
		why = "The CUDA runtime in the image is newer than the host's driver supports (CUDA error 35)."
	}
	if need != "" {
		if min := cudaMinDriver(need); min != "" {
			why += "\nCUDA " + need + " needs driver " + min + " or newer (NVIDIA's CUDA release notes)."
		}
	}
	d.Explanation = why
	on := orDefault(host, "every node")
	fix := "On " + on + ": `nvidia-smi` shows the driver and the newest CUDA it supports. Install a driver"
	if min := cudaMinDriver(need); min != "" {
		fix += " ≥ " + min + " (for CUDA " + need + ")"
	} else {
		fix += " that supports the image's CUDA"
	}
	fix += ", or use an image built for a CUDA the driver supports" + ifNotEmpty(" (≤ "+drvCUDA+")", drvCUDA) + " in image on " + s.ctx.cluster() + " — the same on every node. "
	if strings.Contains(b, "driver combination") || errNo == "803" {
		fix += "After a driver upgrade, reboot (or reload the nvidia kernel modules) so the kernel driver matches its libraries. "
	}
	fix += "" +
		"NVIDIA_DISABLE_REQUIRES=true only skips the container runtime's check; CUDA then fails in the container (error 804) on a GPU without forward compatibility."
	d.Fix = fix
	return d, true
}

// ---- the image's kernels were not built for this GPU -------------------------------

// CUDAArchUnsupported: the image's CUDA kernels were not built for the
// GPU's architecture (the catalogue's class): the CUDA runtime finds no
// kernel image, a kernel asserts the architectures it supports, a JIT
// finds no source for the GPU's architecture. GB10 (DGX Spark) is sm_121,
// which many builds for sm_120 or sm_100 lack.
const CUDAArchUnsupported Cause = "cuda-arch-unsupported"

var (
	// The messages of the sources that state it: CUTLASS/DeepGEMM/FlashMLA
	// device asserts ("This kernel only supports sm90", "... SM100-family
	// GPUs", "... sm_100f"); torch/cuda/__init__.py ("NVIDIA GB10 with CUDA
	// capability sm_121 is not compatible with the current PyTorch
	// installation."); ptxas, as Triton runs it ("Value 'sm_121a' is not
	// defined for option 'gpu-name'"); flashinfer ("No supported CUDA
	// architectures found for major versions [12]"); a JIT's kernel source
	// named for the architecture that is missing ("Failed to open:
	// .../sm121_fp8_mqa_logits.cuh").
	archOnlyRE    = regexp.MustCompile(`This kernel only supports (?:sm_?|SM)(\d+\w*)`)
	archTorchRE   = regexp.MustCompile(`with CUDA capability sm_(\d+) is not compatible with the current PyTorch installation`)
	archPtxasRE   = regexp.MustCompile(`Value 'sm_(\d+)\w*' is not defined for option 'gpu-name'`)
	archFlashRE   = regexp.MustCompile(`No supported CUDA architectures found for major versions`)
	archMissingRE = regexp.MustCompile(`Failed to open: (\S*)`)
	archFileRE    = regexp.MustCompile(`\bsm_?(\d{2,3})[a-z]?_\w*\.(?:cuh|cu|h|cubin)\b`)
)

func matchArchKernel(b string) bool {
	switch {
	case archOnlyRE.MatchString(b), archTorchRE.MatchString(b), archPtxasRE.MatchString(b), archFlashRE.MatchString(b):
		return true
	case strings.Contains(b, "no kernel image is available"):
		return true
	case strings.Contains(b, "Failed to open: "):
		return true // an arch-named kernel source, buildArchKernel checks
	}
	return false
}

// archFileMissing returns the architecture of a kernel source a JIT failed
// to open at line i (the path may wrap onto the next line), or "".
func (s *scan) archFileMissing(i int) string {
	t := s.window(i, 1)
	if !archMissingRE.MatchString(t) {
		return ""
	}
	if m := archFileRE.FindStringSubmatch(strings.ReplaceAll(t, " ", "")); m != nil {
		return m[1]
	}
	return ""
}

func buildArchKernel(s *scan, hits []int) (Diagnosis, bool) {
	i, ok := s.firstFailing(hits, func(j int) bool {
		// A file a JIT failed to open is this cause only when it is a
		// kernel source named for an architecture.
		return !strings.Contains(s.lines[j].body, "Failed to open: ") || s.archFileMissing(j) != ""
	})
	if !ok {
		return Diagnosis{}, false
	}
	b := s.lines[i].body
	host := s.nodeOf(i)
	kernelArch, gpuArch := "", s.archFileMissing(i)
	if m := archOnlyRE.FindStringSubmatch(b); m != nil {
		kernelArch = "sm_" + m[1]
	}
	if m := archTorchRE.FindStringSubmatch(b); m != nil {
		gpuArch = m[1]
	}
	if m := archPtxasRE.FindStringSubmatch(b); m != nil {
		gpuArch = m[1]
	}
	// The GPU's architecture named elsewhere in the log: a kernel file of
	// it that was not found, torch's capability line.
	lo, hi := s.logSpan(i)
	for j := lo; j < hi && gpuArch == ""; j++ {
		gpuArch = s.archFileMissing(j)
		if m := archTorchRE.FindStringSubmatch(s.lines[j].body); m != nil {
			gpuArch = m[1]
		}
	}
	d := Diagnosis{Evidence: []Evidence{s.evidence(i)}}
	if strings.Contains(b, "Failed to open: ") && !archFileRE.MatchString(b) && i+1 < hi {
		d.Evidence = append(d.Evidence, s.evidence(i+1)) // the path wrapped
	}
	gpu := "this GPU"
	if gpuArch != "" {
		gpu = "sm_" + gpuArch
		if gpuArch == "121" {
			gpu += " (NVIDIA GB10, DGX Spark)"
		}
	}
	d.Title = "the image's CUDA kernels were not built for " + gpu + onHost(host)
	if kernelArch != "" {
		d.Title += ": the kernel supports only " + kernelArch
	}
	why := "The kernel that ran was compiled for other GPU architectures than this GPU's"
	if kernelArch != "" {
		why += " (it asserts " + kernelArch + ")"
	}
	why += ". Each CUDA kernel in torch, vLLM, FlashInfer, DeepGEMM or Triton is built for a list of architectures; a GPU outside the list gets \"no kernel image\", a device assert, or a JIT that finds no source for it."
	if gpuArch == "121" {
		why += " GB10 is sm_121: builds made for sm_120 (desktop Blackwell) or sm_100 (B200) do not run on it unless they were compiled for sm_121 (CUDA 12.9 or newer)."
	}
	d.Explanation = why
	d.Fix = "Use an image whose vLLM, torch and kernels were built for " + gpu + " in image on " + s.ctx.cluster() + " (for GB10: an image built for DGX Spark, CUDA 13 with TORCH_CUDA_ARCH_LIST including 12.1), the same on every node; " +
		"or avoid the kernel: another quantization or attention backend whose kernels the image has for this GPU. `docker run --rm --gpus all <image> python3 -c 'import torch; print(torch.cuda.get_arch_list(), torch.cuda.get_device_capability())'` shows both lists."
	return d, true
}
