package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/cudacompat"
	"github.com/rayform/rayform/resources/modelfit"
)

// The architecture check: whether the image's vLLM and transformers know
// the model's architecture and model_type (modelfit.CheckArchitecture).
// Only the image can say what it knows, and asking it means starting its
// Python and importing vLLM (and with it torch): seconds, too slow and too
// intrusive for plan, which runs no container. So apply asks it, once per
// image ID, right before vllm serve starts, inside the head's Ray container
// (rayform's own, which already runs the image), and records the answer in
// the state; every later plan with that image judges from the state at
// plan time. An image's content never changes under its ID, so the answer
// never goes stale.

// archQueryTimeout bounds the query: importing vLLM imports torch and
// CUDA's libraries (seconds to tens of seconds on a cold page cache).
const archQueryTimeout = 120 * time.Second

// archMarker starts the query's answer line: vLLM logs to stdout.
const archMarker = "RAYFORM_ARCH "

// archQuery prints what the image's vLLM and transformers know, as one
// JSON line after archMarker. Plugins are loaded first, as vllm serve
// does, so architectures registered by out-of-tree plugins count. The
// version is the distribution's (importlib.metadata, what `vllm
// --version` and vLLM's own platform detection read: "0.32.0+cpu" for a
// CPU build, whose vllm.__version__ says "0.32.0"), the platform vLLM's
// current_platform.device_type ("cuda", "cpu", ...). Names:
// vllm.model_executor.models.ModelRegistry.get_supported_archs() and
// vllm.transformers_utils.config._CONFIG_REGISTRY (vLLM's sources),
// transformers.models.auto.configuration_auto.CONFIG_MAPPING (its lazy
// mapping; keys() includes the types registered at import).
const archQuery = `import json
out = {}
def err(e):
    return "%s: %s" % (type(e).__name__, e)
try:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    out["transformers"] = transformers.__version__
    out["model_types"] = sorted(CONFIG_MAPPING.keys())
except Exception as e:
    out["transformers_error"] = err(e)
try:
    import vllm
    out["vllm"] = getattr(vllm, "__version__", "")
    try:
        from importlib.metadata import version as dist_version
        out["vllm_dist"] = dist_version("vllm")
    except Exception:
        pass
    try:
        from vllm.platforms import current_platform
        out["platform"] = current_platform.device_type
    except Exception:
        pass
    try:
        from vllm.plugins import load_general_plugins
        load_general_plugins()
    except Exception:
        pass
    from vllm.model_executor.models import ModelRegistry
    out["architectures"] = sorted(ModelRegistry.get_supported_archs())
except Exception as e:
    out["vllm_error"] = err(e)
try:
    from vllm.transformers_utils.config import _CONFIG_REGISTRY
    out["vllm_config_types"] = sorted(_CONFIG_REGISTRY.keys())
except Exception:
    pass
` + cudaQuery + `
print("` + archMarker + `" + json.dumps(out), flush=True)
`

// cudaQuery adds to the answer what the image's CUDA stack was built for
// and loads: torch's CUDA version and compiled arch flags
// (torch._C._cuda_getArchFlags, what torch.cuda.get_arch_list returns,
// read without a GPU), the archs of vLLM's own kernels (the fatbins in
// vllm/_C.abi3.so: a cubin entry is sm_XY, a PTX entry compute_XY), and
// the libcuda.so.1 the process loads with the CUDA version it reports
// (cuDriverGetVersion), where a forward-compatibility library shows. It was
// run as written on a real H100 (testdata/observe/h100/cudaquery.*): its
// fatbin reader finds every arch of torch's get_arch_list in
// libtorch_cuda.so.
const cudaQuery = `try:
    import ctypes
    lib = ctypes.CDLL("libcuda.so.1")
    v = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
        out["libcuda_cuda"] = "%d.%d" % (v.value // 1000, v.value % 1000 // 10)
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if "/libcuda.so" in p:
                out["libcuda"] = p
                break
except Exception:
    pass
def fatbin_archs(path):
    import mmap
    found = set()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        i = m.find(b"\x50\xed\x55\xba")
        while i >= 0:
            hs = int.from_bytes(m[i + 6:i + 8], "little")
            size = int.from_bytes(m[i + 8:i + 16], "little")
            if m[i + 4:i + 6] == b"\x01\x00" and hs == 16 and 0 < size < len(m):
                j, end = i + hs, i + hs + size
                while j + 32 <= end:
                    kind = int.from_bytes(m[j:j + 2], "little")
                    ehs = int.from_bytes(m[j + 4:j + 8], "little")
                    esz = int.from_bytes(m[j + 8:j + 16], "little")
                    arch = int.from_bytes(m[j + 28:j + 32], "little")
                    if kind not in (1, 2) or ehs < 32:
                        break
                    found.add(("compute_%d" if kind == 1 else "sm_%d") % arch)
                    j += ehs + esz
                i = m.find(b"\x50\xed\x55\xba", max(end, i + 4))
            else:
                i = m.find(b"\x50\xed\x55\xba", i + 4)
    return sorted(found)
try:
    import torch
    out["torch_cuda"] = torch.version.cuda or ""
    flags = torch._C._cuda_getArchFlags() if hasattr(torch._C, "_cuda_getArchFlags") else None
    out["torch_archs"] = flags.split() if flags else []
except Exception:
    pass
try:
    import importlib.util
    spec = importlib.util.find_spec("vllm._C")
    if spec and spec.origin:
        out["vllm_archs"] = fatbin_archs(spec.origin)
except Exception:
    pass`

// ArchCheck is what plan hands apply for the architecture check of a
// serve: the model's config.json as plan read it, and where to point.
type ArchCheck struct {
	Config          modelfit.ModelConfig
	TrustRemoteCode bool
	// At is the file:line of the serve's model attribute; Source says
	// where config.json was read.
	At, Source string
}

// archAnswer is the query's JSON line.
type archAnswer struct {
	VLLM              string   `json:"vllm"`
	VLLMDist          string   `json:"vllm_dist"`
	Platform          string   `json:"platform"`
	Transformers      string   `json:"transformers"`
	Architectures     []string `json:"architectures"`
	ModelTypes        []string `json:"model_types"`
	VLLMConfigTypes   []string `json:"vllm_config_types"`
	VLLMError         string   `json:"vllm_error"`
	TransformersError string   `json:"transformers_error"`
	CUDA
}

// CUDA is what the image's CUDA stack was built for and loads (cudaQuery).
type CUDA struct {
	TorchCUDA   string   `json:"torch_cuda,omitempty"`
	TorchArchs  []string `json:"torch_archs,omitempty"`
	VLLMArchs   []string `json:"vllm_archs,omitempty"`
	LibCUDA     string   `json:"libcuda,omitempty"`
	LibCUDACUDA string   `json:"libcuda_cuda,omitempty"`
}

// imageAnswer is an image's answer to the model query, as the state
// records it for the serve kind (state.Image.Answer): the model
// architectures its vLLM has code for, the model types its transformers
// and vLLM read configs of, and both versions; or why it could not
// answer.
type imageAnswer struct {
	// Query is the version of archQuery that answered (answerQuery);
	// an older answer lacks what later queries ask and is asked again.
	Query int    `json:"query,omitempty"`
	VLLM  string `json:"vllm,omitempty"`
	// Platform is vLLM's platform in the image ("cuda", "cpu"), "" when
	// it did not say.
	Platform        string   `json:"platform,omitempty"`
	Transformers    string   `json:"transformers,omitempty"`
	Architectures   []string `json:"architectures,omitempty"`
	ModelTypes      []string `json:"model_types,omitempty"`
	VLLMConfigTypes []string `json:"vllm_config_types,omitempty"`
	Unchecked       string   `json:"unchecked,omitempty"`
	CUDA
}

// answerQuery is the version of archQuery: 2 added the distribution's
// version (local segment included) and vLLM's platform.
const answerQuery = 2

// answerCurrent says whether im holds an answer of the current archQuery
// (an image's content never changes, but what rayform asks it does).
func answerCurrent(im state.Image) bool { return answerOf(im).Query >= answerQuery }

// answerOf reads the serve kind's answer in im (none when it holds
// another).
func answerOf(im state.Image) imageAnswer {
	var a imageAnswer
	if len(im.Answer) > 0 {
		_ = json.Unmarshal(im.Answer, &a)
	}
	return a
}

// record is a as the state holds it.
func (a imageAnswer) record() state.Image {
	b, _ := json.Marshal(a)
	return state.Image{Answer: b}
}

// registry is the modelfit form of an image's recorded answer.
func registry(im state.Image) modelfit.Registry {
	a := answerOf(im)
	return modelfit.Registry{VLLM: a.VLLM, Transformers: a.Transformers, Architectures: a.Architectures,
		ModelTypes: a.ModelTypes, VLLMConfigTypes: a.VLLMConfigTypes, Unchecked: a.Unchecked}
}

// parseArchAnswer reads the query's output into the state's form; ok is
// false when the image gave no answer line (the query did not run).
func parseArchAnswer(stdout []byte) (state.Image, bool) {
	for _, line := range strings.Split(string(stdout), "\n") {
		rest, found := strings.CutPrefix(strings.TrimSpace(line), archMarker)
		if !found {
			continue
		}
		var a archAnswer
		if json.Unmarshal([]byte(rest), &a) != nil {
			return state.Image{}, false
		}
		version := a.VLLMDist
		if version == "" {
			version = a.VLLM
		}
		im := imageAnswer{Query: answerQuery, VLLM: version, Platform: a.Platform, Transformers: a.Transformers, Architectures: a.Architectures,
			ModelTypes: a.ModelTypes, VLLMConfigTypes: a.VLLMConfigTypes, CUDA: a.CUDA}
		switch {
		case a.VLLMError != "":
			im.Unchecked = "the image's python3 cannot import vLLM's model registry (" + a.VLLMError + ")"
		case a.TransformersError != "":
			im.Unchecked = "the image's python3 cannot import transformers (" + a.TransformersError + ")"
		}
		return im.record(), true
	}
	return state.Image{}, false
}

// trustRemoteCode says whether extra_args pass --trust-remote-code.
func trustRemoteCode(args []string) bool {
	return slices.Contains(args, "--trust-remote-code")
}

// archPlan judges the serve from the answer the state holds for the
// head's image, or says that apply will ask the image. An image that
// could not answer is mentioned only for a model the serve did not run
// yet (newModel). It returns the
// check apply runs: nil when the state already answered.
func (p *planner) archPlan(sv *VLLMServe, rc *cluster.RayCluster, head *observe.HostFacts, mc modelfit.ModelConfig, source string, newModel bool) *ArchCheck {
	if len(mc.Architectures) == 0 && mc.ModelType == "" {
		return nil // config.json names nothing to check
	}
	r := sv.Range("model")
	ac := &ArchCheck{Config: mc, TrustRemoteCode: trustRemoteCode(sv.ExtraArgs), At: fmt.Sprintf("%s:%d", r.Filename, r.Start.Line), Source: source}
	id, known, ok := p.imageAnswer(rc, head)
	if !ok {
		name := shortImage(rc.Image, id)
		if name == "" {
			name = "of " + rc.Addr
		}
		p.Note(fmt.Sprintf("the architecture check of %s runs in apply, before vllm serve starts: the image %s was not asked yet what its vLLM and transformers know (once per image).", sv.Addr, name))
		return ac
	}
	findings, skipped := modelfit.CheckArchitecture(mc, registry(known), ac.TrustRemoteCode)
	if skipped != "" && newModel {
		// The image cannot answer (no vLLM its python3 imports): the
		// apply that asked it said so, and it never changes for the
		// image. It matters again only for a model the serve did not
		// run yet.
		p.Note(fmt.Sprintf("the architecture check of %s did not run: %s (the image %s answered on %s): vLLM itself will say whether it knows %s when it starts.",
			sv.Addr, skipped, shortImage(rc.Image, id), known.CheckedAt.Format(time.DateOnly), sv.Model))
	}
	for _, f := range findings {
		sev := plan.Error
		if f.Severity == modelfit.Warning {
			sev = plan.Warning
		}
		p.Finding(plan.Finding{Severity: sev, Address: sv.Addr, At: ac.At, Summary: f.Summary,
			Detail: f.Detail + "\n" + source + fmt.Sprintf(" The image %s answered on %s (asked by apply; it took %.1f s).", shortImage(rc.Image, id), known.CheckedAt.Format(time.DateOnly), known.Seconds),
			Fix:    f.Fix})
	}
	if !answerCurrent(known) {
		// Asked by an older rayform, which did not ask for the platform
		// and the distribution's version: apply asks again.
		return ac
	}
	return nil
}

// kernelPlan judges the archs of the image's compiled kernels — vLLM's
// own (the fatbins of vllm/_C.abi3.so), else torch's arch list — as the
// image answered the query apply made (cudaQuery, recorded in the state
// once per image ID), against the compute capability of every GPU of the
// cluster's nodes (cudacompat.JudgeKernels). An image not asked yet, or
// asked by a rayform whose query did not read its archs, is not judged:
// the architecture check's note already says apply will ask it.
func (p *planner) kernelPlan(sv *VLLMServe, rc *cluster.RayCluster, head *observe.HostFacts) {
	id, known, ok := p.imageAnswer(rc, head)
	if !ok {
		return
	}
	a := answerOf(known)
	archs, what := a.VLLMArchs, "vLLM's compiled kernels (the fatbins of vllm/_C.abi3.so)"
	if len(archs) == 0 {
		archs, what = a.TorchArchs, "torch's compiled arch list (torch.cuda.get_arch_list)"
	}
	if len(archs) == 0 {
		return
	}
	what += fmt.Sprintf(", as the image answered on %s,", known.CheckedAt.Format(time.DateOnly))
	r := rc.Range("image")
	for _, n := range rc.Nodes() {
		hf := p.Host(n)
		if hf == nil {
			continue
		}
		for _, f := range cudacompat.JudgeKernels(n, hf.GPUs, shortImage(rc.Image, id), archs, what) {
			p.Finding(plan.Finding{Severity: plan.Error, Address: sv.Addr, Host: n, At: fmt.Sprintf("%s:%d", r.Filename, r.Start.Line),
				Summary: f.Summary, Detail: f.Detail, Fix: f.Fix})
		}
	}
}

// imageAnswer is what the state recorded of the image the cluster's head
// runs (its ID, and its answer to the model query); ok false when the
// state holds no answer for it.
func (p *planner) imageAnswer(rc *cluster.RayCluster, head *observe.HostFacts) (id string, known state.Image, ok bool) {
	id = headImageID(head, rc, p.Project())
	if p.State() == nil {
		return id, known, false
	}
	if id != "" {
		known, ok = p.State().Image(id)
	} else if c := p.Container(rc.Head, headContainer(p.cfg, rc)); c.Found && c.C.Image == rc.Image {
		// The head's container keeps running this image: the answer
		// given for its reference is the answer for it.
		id, known, ok = p.State().ImageByRef(rc.Image)
	}
	return id, known, ok
}

// headImageID is the ID of the image the cluster's head runs: from the
// image inspection when the probe made one, else from the cluster's own
// container on the head running that image (a converged cluster's probe
// skips the inspection); "" when neither tells.
func headImageID(head *observe.HostFacts, rc *cluster.RayCluster, project string) string {
	for _, im := range head.Images {
		if im.Ref == rc.Image && im.Present && im.ID != "" {
			return im.ID
		}
	}
	for _, c := range head.Containers.List {
		if c.Labels[cluster.LabelManaged] == "true" && c.Labels[cluster.LabelProject] == project && c.Labels[cluster.LabelResource] == rc.Addr && c.Image == rc.Image && c.ImageID != "" {
			return c.ImageID
		}
	}
	return ""
}

// headContainer is the name of the cluster's container on its head.
func headContainer(cfg *Blocks, rc *cluster.RayCluster) string {
	for _, s := range cluster.ClusterSpecs(cluster.View(cfg.Config), rc, nil, nil) {
		if s.Node == rc.Head {
			return s.Name
		}
	}
	return ""
}

// shortImage names an image by its reference and the head of its ID.
func shortImage(ref, id string) string {
	short := strings.TrimPrefix(id, "sha256:")
	short = short[:min(12, len(short))]
	switch {
	case id == "":
		return ref
	case ref == "":
		return short
	}
	return fmt.Sprintf("%s (%s)", ref, short)
}

// queryImage runs archQuery in the head container and records the answer
// under the image ID; ok is false when the image gave none (nothing is
// recorded then: the failure may be passing).
func (r *serveRun) queryImage(ctx context.Context, id, ref string, progress func(string)) (state.Image, bool) {
	ctx, cancel := context.WithTimeout(ctx, archQueryTimeout)
	defer cancel()
	limit := int(archQueryTimeout / time.Second)
	script := fmt.Sprintf(`command -v python3 >/dev/null 2>&1 || { echo "rayform: the image has no python3" >&2; exit 127; }
if command -v timeout >/dev/null 2>&1; then exec timeout %d python3 -c %s; fi
exec python3 -c %s`, limit, shell.Quote(archQuery), shell.Quote(archQuery))
	start := time.Now()
	res, err := r.e.Run(ctx, r.node(), transport.Cmd{Argv: []string{"docker", "exec", r.spec.Container, "sh", "-c", script}})
	took := time.Since(start).Seconds()
	im, ok := parseArchAnswer(res.Stdout)
	switch {
	case ok:
	case strings.Contains(string(res.Stderr), "the image has no python3"):
		im, ok = imageAnswer{Unchecked: "the image has no python3"}.record(), true
	default:
		progress(fmt.Sprintf("not checked: asking the image on %s failed after %.1f s (%v): %s", r.node(), took, err, lastLine(res.Stderr)))
		return state.Image{}, false
	}
	if ref != "" {
		im.Refs = []string{ref}
	}
	im.Seconds = float64(int(took*10)) / 10
	im.CheckedAt = time.Now()
	if r.e.State != nil {
		r.e.State.SetImage(id, im)
	}
	progress(fmt.Sprintf("asked the image %s what its vLLM and transformers know: %.1f s, recorded in the state", shortImage("", id), took))
	return im, true
}

// lastLine is the last non-empty line of b.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
