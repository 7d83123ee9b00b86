package serve

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/modelfit"
	"github.com/rayform/rayform/resources/vllmcli"
)

// The model preflight: before a vllm_serve starts, plan reads the model's
// own config.json (and model.safetensors.index.json) on the head and
// judges with modelfit whether the serve's parallelism, max_model_len and
// memory fit it, so a misfit that vLLM would report only after the
// weights loaded stops the plan, at the attribute's file:line.
//
// The files are read where vLLM will read them: an absolute model path,
// or the Hugging Face cache, as the host sees them through the
// ray_cluster's volumes. When they are not there (the weights are not
// downloaded yet, or the path is inside the image), the preflight says
// why it did not run and judges nothing.

// Bounds of the reads: config.json is a few KiB; of the index only the
// head is read, where its metadata.total_size is.
const (
	preflightConfigMax = 1 << 20
	preflightIndexMax  = 64 << 10
)

// defaultHFHome is HF_HOME in the vLLM images (they run as root).
const defaultHFHome = "/root/.cache/huggingface"

// modelFiles is where the head's host holds a serve's model files.
type modelFiles struct {
	// Dir is the host directory of config.json; with Ref, one of its
	// components is observe.RefPlaceholder, named by the file Ref.
	Dir, Ref string
	// Why is set when the files cannot be read on the host.
	Why string
}

func (m modelFiles) config() observe.ReadProbe {
	return observe.ReadProbe{Path: m.Dir + "/config.json", Ref: m.Ref, Max: preflightConfigMax}
}

func (m modelFiles) index() observe.ReadProbe {
	return observe.ReadProbe{Path: m.Dir + "/model.safetensors.index.json", Ref: m.Ref, Max: preflightIndexMax}
}

// hexRevision is a commit hash, which names a snapshot directly.
var hexRevision = regexp.MustCompile(`^[0-9a-f]{40}$`)

// hubID is a Hugging Face repository id: ORG/NAME, or a legacy NAME
// without an organisation (gpt2).
var hubID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)

// locateModel says where on the head's host the serve's model files are:
// for an absolute model path, that directory; for a Hub id ORG/NAME, its
// snapshot in the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, from
// the serve's or the cluster's env, else the images' default), at the
// revision --revision names in extra_args (a commit, or a branch or tag
// whose commit refs/NAME holds), else refs/main. Container paths become
// host paths through the cluster's volumes. It is the one place that
// knows where weights live; a kind that stages weights can answer here.
func locateModel(rc *cluster.RayCluster, sv *VLLMServe) modelFiles {
	env := func(k string) string {
		if v, ok := sv.Env[k]; ok {
			return v
		}
		return rc.Env[k]
	}
	var dir, ref, why string
	switch {
	case strings.HasPrefix(sv.Model, "/"):
		dir = path.Clean(sv.Model)
		why = fmt.Sprintf("no volume of %s maps %s from the host: the model's files are inside the image", rc.Addr, dir)
	case hubID.MatchString(sv.Model):
		hub := env("HF_HUB_CACHE")
		if hub == "" {
			home := env("HF_HOME")
			if home == "" {
				home = defaultHFHome
			}
			hub = path.Join(home, "hub")
		}
		repo := path.Join(hub, "models--"+strings.ReplaceAll(sv.Model, "/", "--"))
		why = fmt.Sprintf("no volume of %s maps the Hugging Face cache %s from the host: vLLM downloads the model inside the container", rc.Addr, repo)
		rev := serveRevision(sv.ExtraArgs)
		if hexRevision.MatchString(rev) {
			dir = repo + "/snapshots/" + rev
		} else {
			dir = repo + "/snapshots/" + observe.RefPlaceholder
			ref = repo + "/refs/" + rev
		}
	default:
		return modelFiles{Why: fmt.Sprintf("model %q is neither an absolute path nor a Hugging Face id", sv.Model)}
	}
	host, ok := hostPath(rc.Volumes, dir)
	if !ok {
		return modelFiles{Why: why}
	}
	m := modelFiles{Dir: host}
	if ref != "" {
		m.Ref, _ = hostPath(rc.Volumes, ref)
	}
	if err := (observe.HostSpec{Reads: []observe.ReadProbe{m.config()}}).Validate(); err != nil {
		return modelFiles{Why: fmt.Sprintf("the host path %s cannot be read by the probe (%v)", host, err)}
	}
	return m
}

// serveRevision is the revision --revision names in extra_args, else main.
func serveRevision(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--revision="); ok {
			return v
		}
		if a == "--revision" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return "main"
}

// hostPath is the host path of container path p through docker -v specs
// SOURCE:/container/path[:OPTIONS] whose source is a host directory (the
// deepest mount wins, as in the container); ok is false when none maps it.
func hostPath(volumes []string, p string) (string, bool) {
	best, bestLen := "", -1
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "/") {
			continue
		}
		src, dst := path.Clean(parts[0]), path.Clean(parts[1])
		rest, ok := strings.CutPrefix(p, dst)
		if !ok || rest != "" && !strings.HasPrefix(rest, "/") && dst != "/" {
			continue
		}
		if len(dst) > bestLen {
			best, bestLen = path.Join(src, rest), len(dst)
		}
	}
	return best, bestLen >= 0
}

// preflightReads are the reads the head's probe makes for the serve.
func preflightReads(cfg *Blocks, sv *VLLMServe) []observe.ReadProbe {
	rc := cfg.RayClusters[sv.Cluster]
	if rc == nil {
		return nil
	}
	m := locateWeights(cfg, rc, sv)
	if m.Why != "" {
		return nil
	}
	return []observe.ReadProbe{m.config(), m.index()}
}

// totalSize reads metadata.total_size from the head of an index file.
var totalSize = regexp.MustCompile(`"total_size"\s*:\s*([0-9][0-9.eE+]*)`)

// preflight judges a serve about to start against its model's own
// config.json, and reports each misfit at the attribute it names. A serve
// that keeps running as it is (no action) is not judged again: vLLM has
// shown that it fits. It returns the architecture check apply runs before
// the serve starts (archPlan), nil when there is none to run.
//
// When the weights are not on the head yet and a block of the
// configuration stages them during the same apply (a model block), it
// returns the check apply runs right after staging, before the serve
// starts (ModelCheck): the same judgment, on the files staged.
func (p *planner) preflight(sv *VLLMServe, rc *cluster.RayCluster, action plan.Action, running, newModel bool) (*ArchCheck, *ModelCheck) {
	if action == plan.NoOp || p.RefreshOnly() {
		return nil, nil
	}
	if head := p.Host(rc.Head); head != nil {
		p.kernelPlan(sv, rc, head)
	}
	skip := func(why string) {
		p.Note(fmt.Sprintf("the model preflight of %s did not run: %s.", sv.Addr, why))
	}
	m := locateWeights(p.cfg, rc, sv)
	if m.Why != "" {
		skip(m.Why)
		return nil, nil
	}
	head := p.Host(rc.Head)
	if head == nil {
		return nil, nil // the head was not observed: a finding says so
	}
	s := p.fitOnHead(sv, rc, head, running)
	var later *ModelCheck
	if weightsFor(p.cfg, sv) != nil {
		later = &ModelCheck{Node: rc.Head, Files: m, Serve: s, sv: sv}
	}
	mc, where, why, notYet := p.headModelConfig(sv, rc, head, m)
	switch {
	case notYet:
		skip(why)
		return nil, later
	case why != "":
		skip(why)
		return nil, nil
	}
	if idx, ok := head.Reads[m.index().Key()]; ok && idx.Exists && idx.Err == "" {
		s.WeightBytes = weightBytes(idx)
	}
	if s.UnifiedMemory && running && s.WeightBytes > 0 {
		p.Note(fmt.Sprintf("the model preflight of %s did not check memory: on unified memory the running serve holds its share until apply stops it.", sv.Addr))
	}
	source := preflightSource(rc.Head, where)
	findings := modelFindings(sv, mc, s, source)
	for _, f := range findings {
		p.Finding(f)
	}
	if line, ok := capacityNote(sv, mc, s, findings); ok {
		p.Note(line)
	}
	return p.archPlan(sv, rc, head, mc, source, newModel), nil
}

// fitOnHead is FitServe with what the head tells: the image's platform
// (when the KV cache is sized exactly) and the GPUs' memory (none known
// on unified memory while the serve being replaced still holds its
// share).
func (p *planner) fitOnHead(sv *VLLMServe, rc *cluster.RayCluster, head *observe.HostFacts, running bool) modelfit.Serve {
	s := FitServe(sv, rc)
	if s.KVCacheMemoryBytes > 0 {
		// The KV cache is sized exactly: the platform decides the block
		// size and the word vLLM's line starts with.
		if _, im, ok := p.imageAnswer(rc, head); ok {
			// An answer of an older query has vllm.__version__, which
			// lacks a CPU build's "+cpu": only a "+cpu" in it tells.
			if a := answerOf(im); answerCurrent(im) || cpuBuild(a.VLLM) {
				s.CPU, s.PlatformKnown = a.cpu(), true
			}
		}
	}
	s.GPUMemoryBytes, s.UnifiedMemory = p.gpuMemory(rc)
	if s.UnifiedMemory && running {
		// The serve being replaced holds its memory until apply stops it:
		// what the OS leaves now is not what the new one gets.
		s.GPUMemoryBytes = 0
	}
	return s
}

// headModelConfig is the model's config.json as the head's probe read it
// from the weights m, and where (the directory, its ref resolved). why
// says why the preflight cannot run ("" when it can); notYet is set when
// that is because the weights are not on the head yet.
func (p *planner) headModelConfig(sv *VLLMServe, rc *cluster.RayCluster, head *observe.HostFacts, m modelFiles) (mc modelfit.ModelConfig, where, why string, notYet bool) {
	got, ok := head.Reads[m.config().Key()]
	where = m.Dir
	if got.Ref != "" {
		where = strings.Replace(where, observe.RefPlaceholder, got.Ref, 1)
	}
	switch {
	case !ok:
		return mc, where, "the probe of " + rc.Head + " did not read " + m.config().Path, false
	case got.Err != "":
		return mc, where, fmt.Sprintf("reading %s/config.json on %s: %s", where, rc.Head, got.Err), false
	case !got.Exists && m.Ref != "" && got.Ref == "":
		return mc, where, fmt.Sprintf("%s has no %s: the model is not in its Hugging Face cache yet (%s)", rc.Head, m.Ref, p.fetchedBy(sv, "vLLM downloads it at start")), true
	case !got.Exists:
		return mc, where, fmt.Sprintf("%s has no %s/config.json (the weights are not there yet; %s)", rc.Head, where, p.fetchedBy(sv, "vLLM fetches them at start")), true
	case got.Truncated:
		return mc, where, fmt.Sprintf("%s/config.json on %s is larger than %d bytes", where, rc.Head, preflightConfigMax), false
	}
	mc, err := modelfit.ParseConfig([]byte(got.Content))
	if err != nil {
		return mc, where, fmt.Sprintf("%s/config.json on %s: %v", where, rc.Head, err), false
	}
	return mc, where, "", false
}

// FitServe is what modelfit judges of sv on rc before any host is
// observed: its parallel sizes, max_model_len, gpu_memory_utilization,
// VLLM_ALLOW_LONG_MAX_MODEL_LEN and what extra_args tell vLLM about its KV
// cache. The preflight adds the GPUs' memory, the weights' size and the
// image's platform.
func FitServe(sv *VLLMServe, rc *cluster.RayCluster) modelfit.Serve {
	s := modelfit.Serve{TP: sv.TensorParallelSize, PP: sv.PipelineParallelSize, MaxModelLen: sv.MaxModelLen,
		AllowLongMaxModelLen: allowLongMaxModelLen(rc, sv), GPUMemoryUtilization: sv.GPUMemoryUtilization}
	kvCacheArgs(sv, &s)
	return s
}

// kvCacheArgs sets in s what sv's extra_args tell vLLM about its KV cache:
// --kv-cache-memory-bytes, --block-size, --dtype and --kv-cache-dtype, as
// vLLM's parser binds them.
func kvCacheArgs(sv *VLLMServe, s *modelfit.Serve) {
	opts := vllmcli.ServeOptions()
	if v, ok := opts.LastValue(sv.ExtraArgs, "--kv-cache-memory-bytes"); ok {
		if n, err := vllmcli.ParseHumanInt(v); err == nil && n > 0 {
			s.KVCacheMemoryBytes = int64(n)
		}
	}
	if v, ok := opts.LastValue(sv.ExtraArgs, "--block-size"); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			s.BlockSize = n
		}
	}
	s.Dtype, _ = opts.LastValue(sv.ExtraArgs, "--dtype")
	s.KVCacheDtype, _ = opts.LastValue(sv.ExtraArgs, "--kv-cache-dtype")
}

// cpu says whether the image's vLLM runs on its CPU platform: as vLLM
// itself said (current_platform), else from its version (cpuBuild).
func (a imageAnswer) cpu() bool {
	if a.Platform != "" {
		return a.Platform == "cpu"
	}
	return cpuBuild(a.VLLM)
}

// cpuBuild says whether a vLLM version is a CPU build ("0.32.0+cpu"): vLLM
// picks its CPU platform from that local version
// (vllm/platforms/__init__.py cpu_platform_plugin).
func cpuBuild(version string) bool {
	_, local, _ := strings.Cut(version, "+")
	return strings.Contains(local, "cpu")
}

// capacityNote is plan's line with the KV cache vLLM will report for sv
// (modelfit.KVCapacity), unless a finding already says it will not start.
func capacityNote(sv *VLLMServe, mc modelfit.ModelConfig, s modelfit.Serve, findings []plan.Finding) (string, bool) {
	for _, f := range findings {
		if f.Severity == plan.Error {
			return "", false
		}
	}
	capy, ok := modelfit.KVCapacity(mc, s)
	if !ok {
		return "", false
	}
	verb := "will report"
	if !capy.Exact {
		verb = "will report at most"
	}
	return fmt.Sprintf("%s: vLLM %s \"%s\" (%s).", sv.Addr, verb, capy.LogLine(), capy), true
}

// preflightSource says where the preflight read the model's config.
func preflightSource(head, where string) string {
	return fmt.Sprintf("From the model's config.json on %s (%s/config.json).", head, where)
}

// modelFindings is the one judgment of a serve against its model's
// config.json (modelfit.Check), each finding at the attribute it names:
// plan's preflight and apply's check after staging (ModelCheck) both
// report these.
func modelFindings(sv *VLLMServe, mc modelfit.ModelConfig, s modelfit.Serve, source string) []plan.Finding {
	var out []plan.Finding
	for _, f := range modelfit.Check(mc, s) {
		sev := plan.Error
		if f.Severity == modelfit.Warning {
			sev = plan.Warning
		}
		r := sv.Range(f.Attribute)
		at := fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
		if _, set := sv.AttrRanges[f.Attribute]; !set {
			f.Fix += fmt.Sprintf(" (%s is not set in %s)", f.Attribute, sv.Addr)
		}
		out = append(out, plan.Finding{Severity: sev, Address: sv.Addr, At: at,
			Summary: f.Summary, Detail: f.Detail + "\n" + source, Fix: f.Fix})
	}
	return out
}

// allowLongMaxModelLen is vLLM's own override of the context-length check
// in the serve's environment (envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN: "1" or
// "true", any case).
func allowLongMaxModelLen(rc *cluster.RayCluster, sv *VLLMServe) bool {
	v, ok := sv.Env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"]
	if !ok {
		v = rc.Env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"]
	}
	v = strings.ToLower(strings.TrimSpace(v))
	return v == "1" || v == "true"
}

// weightBytes is the weights' size from the head of the index file: the
// whole index when it was read whole, else its metadata.total_size (0 when
// unknown).
func weightBytes(idx observe.ReadResult) int64 {
	if !idx.Truncated {
		if n, err := modelfit.WeightBytes([]byte(idx.Content), nil); err == nil {
			return n
		}
		return 0
	}
	m := totalSize.FindStringSubmatch(idx.Content)
	if m == nil {
		return 0
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil || n <= 0 {
		return 0
	}
	return int64(n)
}

// gpuMemory is the memory of the smallest GPU on the cluster's nodes, as
// nvidia-smi reports it; on unified-memory hosts (GB10), whose GPUs
// report none, what the OS leaves (MemAvailable). 0 when no node told.
func (p *planner) gpuMemory(rc *cluster.RayCluster) (int64, bool) {
	var least int64
	unified := false
	for _, node := range rc.Nodes() {
		hf := p.Host(node)
		if hf == nil || hf.GPUs.Err != "" || len(hf.GPUs.List) == 0 {
			continue
		}
		var mem int64
		if hf.UnifiedMemory {
			mem = int64(hf.Memory.AvailableBytes)
			unified = true
		} else {
			for _, g := range hf.GPUs.List {
				if b := g.MemoryTotalMiB << 20; b > 0 && (mem == 0 || b < mem) {
					mem = b
				}
			}
		}
		if mem > 0 && (least == 0 || mem < least) {
			least = mem
		}
	}
	return least, unified
}

// fetchedBy says who brings a serve's missing weights: the block that
// provides them (a model block: apply stages them before vLLM starts),
// else vLLM itself (def).
func (p *planner) fetchedBy(sv *VLLMServe, def string) string {
	if weightsFor(p.cfg, sv) != nil {
		return "apply stages it, then checks it before vLLM starts"
	}
	return def
}
