package serve

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/attrs"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/stepenv"
)

// exposeVLLMServe is where the arguments of a serve go that a secret
// must not, for the error that refuses a sensitive value in them
// (config.Arg.Exposure).
const exposeVLLMServe = "the `vllm serve` command line, which every user of the host can read (`ps`, /proc/PID/cmdline) and which vLLM prints in its log (\"non-default args\"), and rayform's plans"

// serveDescriptor is the vllm_serve block: `vllm serve` on a cluster's head.
func serveDescriptor() config.Kind {
	str, num := cty.String, cty.Number
	return config.Kind{
		Type:    Type,
		Summary: "`vllm serve` on a cluster's head",
		Args: []config.Arg{
			{Name: "cluster", Type: cty.DynamicPseudoType, Ref: cluster.Type, Decoded: str, Required: true, Exported: true, Applied: true, ForcesReplacement: true,
				Description: "the cluster to serve on"},
			{Name: "model", Exposure: exposeVLLMServe, Type: str, Required: true, Exported: true, Applied: true, ForcesReplacement: true,
				Description: "Hugging Face model id or path inside the container"},
			{Name: "served_model_name", Exposure: exposeVLLMServe, Type: str, Exported: true, Applied: true, ForcesReplacement: true, DefaultDoc: "`model`",
				Description: "the model name the API reports"},
			{Name: "tensor_parallel_size", Exposure: exposeVLLMServe, Type: num, Default: cty.NumberIntVal(1), Min: 1, Max: 1 << 20, Exported: true, Applied: true, ForcesReplacement: true,
				Description: serveFlagDoc("tensor_parallel_size")},
			{Name: "pipeline_parallel_size", Exposure: exposeVLLMServe, Type: num, Default: cty.NumberIntVal(1), Min: 1, Max: 1 << 20, Exported: true, Applied: true, ForcesReplacement: true,
				Description: serveFlagDoc("pipeline_parallel_size") + "; `tensor_parallel_size × pipeline_parallel_size` must not exceed the `gpus` of the cluster's nodes"},
			{Name: "gpu_memory_utilization", Exposure: exposeVLLMServe, Type: num, Default: cty.NumberFloatVal(0.9), Applied: true, ForcesReplacement: true, DefaultDoc: "`0.9` (vLLM's)",
				Description: "fraction of each GPU's memory vLLM may use, in (0, 1]"},
			{Name: "max_model_len", Exposure: exposeVLLMServe, Type: num, Min: 1, Max: 1 << 40, Applied: true, ForcesReplacement: true, DefaultDoc: "the model's",
				Description: serveFlagDoc("max_model_len")},
			{Name: "port", Exposure: exposeVLLMServe, Type: num, Default: cty.NumberIntVal(8000), Min: 1, Max: 65535, Exported: true, Applied: true, ForcesReplacement: true,
				Description: "API port on the head; must differ from the cluster's ports and other servers'"},
			{Name: "env", Type: cty.Map(str), UnknownOK: true, Applied: true, ForcesReplacement: true, MaySensitive: true,
				Description: "extra environment for `vllm serve`"},
			{Name: "extra_args", Type: cty.List(str), UnknownOK: true, Applied: true, ForcesReplacement: true, Exposure: exposeVLLMServe,
				Description: "extra `vllm serve` arguments (not the flags the arguments above set, nor `--host` or `--distributed-executor-backend`, in any spelling vLLM's parser accepts: `--tensor_parallel_size`, the prefix `--tensor-parallel`, `-tp`, `--port=8001`; not `--api-key`, and no sensitive value: a command line is readable by every user of the host and vLLM logs it)"},
			{Name: "api_key", Type: str, Applied: true, ForcesReplacement: true, Sensitive: true, DefaultDoc: "not set",
				Description: "the key vLLM requires on its `/v1` routes; passed as `VLLM_API_KEY` in the environment (on stdin, never in argv or a file); rayform's own checks send it as a header read from stdin"},
			{Name: "ready_timeout", Type: str, Default: cty.StringVal("30m"), TypeDoc: "duration string",
				Description: "how long to wait for the server to answer, e.g. `\"20m\"`, `\"1h30m\"`"},
			{Name: "listen", Type: str, Default: cty.StringVal(ListenFabric), Applied: true, ForcesReplacement: true, DefaultDoc: "`\"fabric\"`",
				Description: "where vLLM's API listens (`--host`): `\"fabric\"`, the head's fabric address only, what the cluster's network reaches (`endpoint`); `\"all\"`, every address of the head (`--host 0.0.0.0`), so that `public_endpoint` answers on the management network too. Without an `api_key`, `\"all\"` answers anyone who reaches the head, and plan and status say so"},
		},
		Computed: []config.Attr{
			{Name: "endpoint", From: []string{"cluster", "port"}, Doc: "OpenAI base URL `\"http://<head fabric ip>:<port>/v1\"` (*observe*; reachable from the cluster's fabric)"},
			{Name: "public_endpoint", From: []string{"cluster", "port"}, Doc: "the same on the head node's `host`, `\"http://<head host>:<port>/v1\"` (known from the configuration; it answers only with `listen = \"all\"`: by default vLLM listens on the fabric alone)"},
		},
		New:      func() any { return &VLLMServe{} },
		Decode:   decodeServe,
		Check:    checkServe,
		Compute:  computeServe,
		Validate: validateServes,
	}
}

// decodeServe gives served_model_name its default, the model.
func decodeServe(b *config.Block) {
	s := b.Value().(*VLLMServe)
	if !b.IsSet("served_model_name") {
		s.ServedModelName = s.Model
		b.SetDefaultFrom("served_model_name", "model")
	}
}

// computeServe computes endpoint (on the head's fabric address, unknown
// until observed) and public_endpoint (on the head node's host, known
// from the configuration).
func computeServe(b *config.Block) map[string]cty.Value {
	s := b.Value().(*VLLMServe)
	cfg := View(b.Config())
	unknown := cty.UnknownVal(cty.String).RefineNotNull()
	out := map[string]cty.Value{"endpoint": unknown, "public_endpoint": unknown}
	rc := cfg.RayClusters[s.Cluster]
	if rc == nil {
		return out
	}
	if rc.HeadAddress.IsValid() {
		s.Endpoint = "http://" + netip.AddrPortFrom(rc.HeadAddress, uint16(s.Port)).String() + "/v1"
		out["endpoint"] = cty.StringVal(s.Endpoint)
	}
	// The same port on the head's SSH address: what the operator's machine
	// can usually reach (vLLM listens on every address of the host).
	if head := cfg.Nodes[rc.Head]; head != nil && head.Host != "" && !head.IsUnknown("host") {
		host := head.Host
		if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
			host = "[" + host + "]"
		}
		s.PublicEndpoint = "http://" + host + ":" + strconv.Itoa(s.Port) + "/v1"
		out["public_endpoint"] = cty.StringVal(s.PublicEndpoint)
	}
	return out
}

// checkServe checks a vllm_serve's arguments on their own.
func checkServe(b *config.Block) {
	s := b.Value().(*VLLMServe)
	if s.Listen != ListenFabric && s.Listen != ListenAll {
		b.Error("listen", "Invalid listen", fmt.Sprintf("listen must be %q (the head's fabric address only) or %q (every address of the head); got %q.", ListenFabric, ListenAll, s.Listen))
	}
	if b.IsSet("model") && strings.TrimSpace(s.Model) == "" {
		b.Error("model", "Empty model", "model must name a model, like \"Qwen/Qwen3-8B\" or a path inside the container.")
	}
	if b.IsSet("gpu_memory_utilization") && !(s.GPUMemoryUtilization > 0 && s.GPUMemoryUtilization <= 1) {
		b.Error("gpu_memory_utilization", "Invalid gpu_memory_utilization",
			fmt.Sprintf("gpu_memory_utilization is the fraction of each GPU's memory vLLM may use: more than 0 and at most 1 (vLLM's default is 0.9); got %g.", s.GPUMemoryUtilization))
	}
	hostplan.CheckEnv(b, "env", s.Env)
	checkExtraArgs(b, s.ExtraArgs)
	if _, ok := s.Env["VLLM_API_KEY"]; ok && s.APIKey != "" {
		b.Error("api_key", "API key set twice", "Both api_key and env[\"VLLM_API_KEY\"] are set; keep api_key.")
	}
	if bad := hostplan.EnvValueProblem(s.APIKey); bad != "" {
		b.Error("api_key", "API key cannot be passed intact", fmt.Sprintf("api_key contains %s. Remove it from the value.", bad))
	}
	checkServeLimits(b)
}

// validateServes checks the rules between a serve and its cluster: enough
// GPUs for its parallelism, and a port of its own on the head.
func validateServes(c *config.Config, report config.Report) {
	cfg := View(c)
	ports := map[string]string{} // "cluster:port" → serve
	for _, name := range slices.Sorted(maps.Keys(cfg.Serves)) {
		s := cfg.Serves[name]
		rc := cfg.RayClusters[s.Cluster]
		if rc == nil {
			continue
		}
		total := 0
		var parts []string
		gpusUnknown := s.IsUnknown("tensor_parallel_size") || s.IsUnknown("pipeline_parallel_size")
		for _, n := range rc.Nodes() {
			if node := cfg.Nodes[n]; node != nil {
				gpusUnknown = gpusUnknown || node.IsUnknown("gpus")
				total += node.GPUs
				parts = append(parts, fmt.Sprintf("%s: %d", n, node.GPUs))
			}
		}
		need := s.TensorParallelSize * s.PipelineParallelSize
		if need > total && !gpusUnknown {
			attr := "tensor_parallel_size"
			if _, ok := s.AttrRanges[attr]; !ok {
				attr = "pipeline_parallel_size"
			}
			report(&s.Decl, attr, "Not enough GPUs",
				fmt.Sprintf("vllm_serve.%s needs tensor_parallel_size × pipeline_parallel_size = %d × %d = %d GPUs, but the nodes of ray_cluster.%s declare %d in total (%s). Lower the parallelism, add workers to the cluster, or correct the nodes' gpus.",
					name, s.TensorParallelSize, s.PipelineParallelSize, need, rc.Name, total, strings.Join(parts, ", ")))
		}
		switch s.Port {
		case rc.Port, rc.DashboardPort:
			which := "port"
			if s.Port == rc.DashboardPort {
				which = "dashboard_port"
			}
			report(&s.Decl, "port", "Port conflict",
				fmt.Sprintf("Port %d is also the %s of ray_cluster.%s. vLLM's API server runs on the head with host networking, so choose another port.", s.Port, which, rc.Name))
		}
		key := fmt.Sprintf("%s:%d", s.Cluster, s.Port)
		if prev, ok := ports[key]; ok {
			report(&s.Decl, "port", "Port conflict",
				fmt.Sprintf("vllm_serve.%s also listens on port %d on the head of ray_cluster.%s; give each server its own port.", prev, s.Port, s.Cluster))
		}
		ports[key] = name
	}
}

// VLLMServe is a `vllm serve` process on a Ray cluster's head.
type VLLMServe struct {
	config.Decl
	Name                 string            `rayform:",name"`
	Cluster              string            `rayform:"cluster"` // ray_cluster name
	Model                string            `rayform:"model"`
	ServedModelName      string            `rayform:"served_model_name"`      // default Model
	TensorParallelSize   int               `rayform:"tensor_parallel_size"`   // default 1
	PipelineParallelSize int               `rayform:"pipeline_parallel_size"` // default 1
	GPUMemoryUtilization float64           `rayform:"gpu_memory_utilization"`
	MaxModelLen          int               `rayform:"max_model_len"` // 0 = vLLM's default (the model's)
	Port                 int               `rayform:"port"`          // default 8000
	Env                  map[string]string `rayform:"env"`
	ExtraArgs            []string          `rayform:"extra_args"`
	// APIKey is the key vLLM requires on its /v1 routes, "" for none. It
	// reaches vLLM as VLLM_API_KEY in the environment, never in argv.
	APIKey       string        `rayform:"api_key"`
	ReadyTimeout time.Duration `rayform:"ready_timeout"` // default 30m
	// Listen is where vLLM's API listens: ListenFabric (the default) or
	// ListenAll.
	Listen string `rayform:"listen"`
	// Endpoint is the OpenAI base URL, "" until the head's address is
	// observed.
	Endpoint string
	// PublicEndpoint is the same URL on the head node's host (its SSH
	// address as configured), known from the configuration alone.
	PublicEndpoint string
}

// PlacedOn is the nodes of the serve's cluster in cfg, head first: every
// one of them loads its model (kind.Placed).
func (s *VLLMServe) PlacedOn(cfg *config.Config) []string {
	if rc, ok := cfg.Blocks(cluster.Type)[s.Cluster].(*cluster.RayCluster); ok {
		return rc.Nodes()
	}
	return nil
}

// ServesModel is the model the serve loads (its model argument): a block
// that provides weights (Weights) recognises its serves by it.
func (s *VLLMServe) ServesModel() string { return s.Model }

// MountsOn is the directory of the weights s loads, when it runs on the
// cluster named cluster and a model block provides them (kind.Mounter).
func (s *VLLMServe) MountsOn(cfg *config.Config, cluster string) []string {
	if s.Cluster != cluster {
		return nil
	}
	if w := weightsFor(View(cfg), s); w != nil {
		return []string{w.HostDir()}
	}
	return nil
}

// HasSecretsOn reports whether s runs on the cluster named cluster with
// an api_key or a sensitive env value (kind.SecretHolder).
func (s *VLLMServe) HasSecretsOn(cluster string) bool {
	if s.Cluster != cluster {
		return false
	}
	if s.APIKey != "" {
		return true
	}
	for k := range s.Env {
		if s.IsSensitive(fmt.Sprintf("env[%q]", k)) {
			return true
		}
	}
	return false
}

// Kind is the vllm_serve kind: `vllm serve` on a cluster's head.
type Kind struct{}

// The serve kind's optional parts (kind.Kind): no lookup outside the
// hosts, nothing prepared ahead, no fingerprint beyond every plan's (its
// record and answers), no lock of its own (it runs under its cluster's).
var (
	_ kind.KindWithObserve      = Kind{}
	_ kind.KindWithDestroy      = Kind{}
	_ kind.KindWithPresence     = Kind{}
	_ kind.KindWithCommandCheck = Kind{}
	_ kind.KindWithWalk         = Kind{}
	_ kind.KindWithSteps        = Kind{}
	_ kind.KindWithLogs         = Kind{}
	_ kind.KindWithEarlySteps   = Kind{}
	_ kind.KindWithAwait        = Kind{}
	_ kind.KindWithStatus       = Kind{}
)

// Schema is the vllm_serve block's descriptor.
func (Kind) Schema() config.Kind { return serveDescriptor() }

// Traits: a serve is replaced (its process restarted) on request, its log
// file is read on its head, and an output shows what its schema exports.
func (Kind) Traits() kind.Traits {
	return kind.Traits{Replaceable: true, Exported: attrs.Exported(serveSchema()), Status: "serves"}
}

// Observe asks each serve's head for its own port, record and model files,
// and for status its /metrics and its process's start time.
func (Kind) Observe(o *kind.Observation) {
	observeServes(o)
	if o.Status {
		statusProbes(o.Spec, View(o.Config), o.Project)
	}
}

// Plan checks that the serves of each cluster fit its GPUs together
// (gpuBudget), then plans each serve of the configuration, after the
// clusters (it reads its cluster's planned action), then judges where the
// serves it starts get their GPUs from what Ray reports free
// (clusterBudget).
func (Kind) Plan(p kind.Planner) {
	pl := newPlanner(p)
	// The serves of each cluster together must fit its GPUs.
	for _, name := range slices.Sorted(maps.Keys(pl.cfg.RayClusters)) {
		pl.gpuBudget(pl.cfg.RayClusters[name])
	}
	for _, sv := range sortedServes(pl.cfg) {
		pl.serve(sv)
	}
	for _, name := range slices.Sorted(maps.Keys(pl.cfg.RayClusters)) {
		pl.clusterBudget(pl.cfg.RayClusters[name])
	}
}

// Destroy stops the doomed serves, before their clusters go.
func (Kind) Destroy(d kind.Destroyer) { destroyServes(d) }

// Present finds the serves whose process runs.
func (Kind) Present(pr *kind.Presence) { presentServes(pr) }

// CheckCommands checks its start line within its head's limits
// (hostplan.CheckCommandLimits).
func (Kind) CheckCommands(req kind.CommandCheckRequest) error { return hostplan.CheckCommands(req) }

// OpenWalk starts the data-plane checks of the serves of the walk whose
// ranks launch as their cluster's containers start (stepenv.OpenChecks).
func (Kind) OpenWalk(ctx context.Context, req kind.WalkRequest) func() {
	return stepenv.OpenChecks(ctx, req)
}

// stepEnv is the environment of the steps of w.
func (k Kind) stepEnv(env *kind.Env, w *kind.Work) *stepenv.StepEnv {
	return stepenv.New(env, k, w.Address)
}

// Steps are the steps of a serve's work (serveSteps).
func (k Kind) Steps(req kind.StepsRequest) []apply.Step {
	w := req.Work
	if WorkOf(w) == nil {
		return kind.Unsupported(w)
	}
	return serveSteps(k.stepEnv(req.Env, w), w)
}

// EarlySteps stop each serve that is replaced along with its cluster's
// containers before the cluster changes: a worker under a running serve
// must not go away (nor restart) under it. It also stops, before the
// first serve of the GPU budget's order starts, each replaced serve that
// starts later (ServeWork.StopBefore): its GPUs were counted free. The stop is a node of its own,
// "ADDRESS#stop", that the cluster depends on; the serve's own stop step
// then finds the process gone.
func (k Kind) EarlySteps(req kind.EarlyStepsRequest) []kind.EarlySteps {
	ws, steps := req.Work, req.Steps
	var out []kind.EarlySteps
	for _, addr := range slices.Sorted(maps.Keys(ws)) {
		w := ws[addr]
		sw := WorkOf(w)
		if sw == nil || w.Action != plan.Replace || len(steps[addr]) == 0 {
			continue
		}
		before := sw.StopBefore
		if cw := ws[sw.Cluster]; sw.Cluster != "" && cw != nil && cw.Action != plan.NoOp {
			before = sw.Cluster
		}
		if before == "" {
			continue
		}
		stop := ServeStopSteps(k.stepEnv(req.Env, w), w)
		if len(stop) == 0 {
			continue
		}
		out = append(out, kind.EarlySteps{Node: addr + "#stop", Before: before, Address: addr, Action: plan.Replace, Steps: stop})
	}
	return out
}

// Starting are the serves running as declared but not answering yet
// (StartingServes).
func (Kind) Starting(req kind.StartingRequest) []*kind.Work {
	return StartingServes(View(req.Config), req.Facts)
}

// AwaitSteps wait for a starting serve to be ready.
func (k Kind) AwaitSteps(req kind.StepsRequest) []apply.Step {
	return AwaitSteps(k.stepEnv(req.Env, req.Work), req.Work)
}

// Status shows each serve's health on its own port; one not ok is a
// problem.
func (Kind) Status(q kind.StatusQuery) []kind.Status {
	cfg := View(q.Config)
	var out []kind.Status
	for _, sv := range sortedServes(cfg) {
		ss := serveStatus(cfg, q.Facts, q.Project, sv)
		var problems []string
		if ss.Health != HealthOK {
			problems = append(problems, fmt.Sprintf("%s: %s (%s)", sv.Addr, ss.Health, ss.HealthDetail))
		}
		out = append(out, kind.Status{Address: sv.Addr, Value: ss, Problems: problems, Render: ss.render})
	}
	return out
}

// Logs is the serve's log file on its cluster's head (bind-mounted into
// the container), read on the host with tail: no docker exec.
func (Kind) Logs(q kind.LogQuery) ([]kind.LogCommand, error) {
	cfg := View(q.Config)
	sv := serveAt(cfg, q.Address)
	if sv == nil {
		return nil, fmt.Errorf("%s: no such %s in the configuration", q.Address, Type)
	}
	if q.Since != "" {
		return nil, fmt.Errorf("-since applies to %s logs (docker logs); the serve log is a file: use -tail", cluster.Type)
	}
	rc := cfg.RayClusters[sv.Cluster]
	if rc == nil {
		return nil, fmt.Errorf("%s: its cluster %s is not in the configuration", q.Address, sv.Cluster)
	}
	if q.Node != "" && q.Node != rc.Head {
		return nil, fmt.Errorf("%s runs on its cluster's head, %s, not on %s", q.Address, rc.Head, q.Node)
	}
	tail := "+1"
	if q.Tail >= 0 {
		tail = strconv.Itoa(q.Tail)
	}
	spec := ServeSpec{Name: sv.Name, Container: cluster.ContainerName(rc), Node: rc.Head}
	path, none := spec.HostLogPath(q.Project), ": the serve has not been started by rayform on this host"
	if q.Previous {
		path, none = spec.HostPreviousLogPath(q.Project), ": rayform has started this serve only once on this host"
	}
	argv := []string{"tail", "-n", tail}
	if q.Follow {
		argv = append(argv, "-F")
	}
	argv = append(argv, path)
	script := fmt.Sprintf("test -e %s || { echo %s >&2; exit 1; }; exec %s",
		shell.Quote(path), shell.Quote("no serve log at "+path+none), shell.Join(argv))
	return []kind.LogCommand{{Node: rc.Head, Script: script}}, nil
}

// observeServes asks, for each serve, the head for its own port's
// answers, its record and its model's files (the model kind lists a
// model block's directory on every node); for a serve the state
// remembers but the configuration no longer declares, its record.
func observeServes(o *kind.Observation) {
	cfg, project := View(o.Config), o.Project
	for _, sv := range sortedServes(cfg) {
		rc := cfg.RayClusters[sv.Cluster]
		if rc == nil {
			continue
		}
		container := cluster.ContainerName(rc)
		for _, node := range rc.Nodes() {
			hs := o.Host(node)
			if node == rc.Head {
				// Each serve asks for its own port's answers.
				hs.Ports = hostplan.AppendUniqueInt(hs.Ports, sv.Port)
				hs.HTTP = append(hs.HTTP, serveHTTPProbes(container, sv.Port)...)
				hs.Records = append(hs.Records, serveRecordProbe(project, node, container, sv.Name))
				hs.Reads = append(hs.Reads, preflightReads(cfg, sv)...)
				hs.Reads = append(hs.Reads, failedStartProbe(project, node, container, sv.Name), goodProbe(project, node, container, sv.Name))
				// The GPU budget of a multi-node cluster: what Ray
				// reports free on each node (clusterBudget), asked once.
				if u := cluster.RayUsageProbe(rc, project); len(rc.Workers) > 0 && !slices.ContainsFunc(hs.HTTP, func(h observe.HTTPProbe) bool { return h.URL == u.URL }) {
					hs.HTTP = append(hs.HTTP, u)
				}
			}
			o.SetHost(node, hs)
		}
	}
	for _, addr := range o.Remembered(Type) {
		r, _ := o.State.Get(addr)
		if len(r.Hosts) == 0 || r.Container == "" {
			continue
		}
		node := r.Hosts[0].Node
		hs := o.Host(node)
		hs.Records = append(hs.Records, serveRecordProbe(project, node, r.Container, plan.ParseAddress(addr).Instance()))
		o.SetHost(node, hs)
	}
}

// presentServes finds the serves whose process runs where the
// configuration or the state says they run.
func presentServes(pr *kind.Presence) {
	type serveAt struct{ name, node, container string }
	serves := map[string]serveAt{}
	if pr.State != nil {
		for _, addr := range pr.State.Addresses() {
			r, _ := pr.State.Get(addr)
			if a := plan.ParseAddress(addr); a.Type == Type && len(r.Hosts) > 0 {
				serves[addr] = serveAt{a.Instance(), r.Hosts[0].Node, r.Container}
			}
		}
	}
	if cfg := View(pr.Config); cfg != nil {
		for _, sv := range sortedServes(cfg) {
			if rc := cfg.RayClusters[sv.Cluster]; rc != nil {
				serves[sv.Addr] = serveAt{sv.Name, rc.Head, cluster.ContainerName(rc)}
			}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(serves)) {
		s := serves[addr]
		hf, ok := pr.Known(s.node)
		if !ok {
			continue
		}
		if rec := ServeRecord(hf, s.name); rec.Found && rec.Alive && (rec.Resource == "" || rec.Resource == addr) {
			pr.Add(addr, Type, s.node, s.container)
		}
	}
}

// StartingServes returns, for each vllm_serve of cfg that
// the hosts show running as declared but not answering yet (plan's "vLLM
// is still starting": the process runs, its port is closed), the work of
// waiting for it to be ready (AwaitSteps). Apply runs it whether or not it
// changed anything, so that it reports success only for serves that serve.
func StartingServes(cfg *Blocks, facts *observe.Facts) []*kind.Work {
	if cfg == nil || facts == nil {
		return nil
	}
	var out []*kind.Work
	for _, sv := range sortedServes(cfg) {
		rc := cfg.RayClusters[sv.Cluster]
		if rc == nil {
			continue
		}
		head := facts.Hosts[rc.Head]
		if head == nil || head.Err != "" {
			continue
		}
		spec, err := ServeSpecFor(cfg, sv)
		if err != nil {
			continue
		}
		rec := ServeRecord(head, sv.Name)
		if !serveCurrent(spec, rec.SpecHash) || JudgeServe(rec, ServeAnswer(head, sv.Port), spec).State != HealthStarting {
			continue
		}
		out = append(out, &kind.Work{Address: sv.Addr, Type: Type, Action: plan.NoOp, Hosts: []string{rc.Head},
			Do: &ServeWork{Spec: spec, ReadyTimeout: sv.ReadyTimeout, Cluster: rc.Addr, ClusterNodes: rc.Nodes()}})
	}
	return out
}

// destroyServes plans the stop of each doomed serve whose process runs,
// ordered before the removal of its cluster (before every other removal
// when its cluster is unknown).
func destroyServes(d kind.Destroyer) {
	cfg := View(d.Config())
	serves := map[string]*ServeWork{}
	hosts := map[string][]string{}
	clusterOf := map[string]string{} // serve address → its cluster's address
	for _, addr := range d.Doomed(Type) {
		if sv := serveAt(cfg, addr); sv != nil {
			if rc := cfg.RayClusters[sv.Cluster]; rc != nil {
				serves[addr] = &ServeWork{Spec: ServeSpec{Resource: sv.Addr, Name: sv.Name, Container: cluster.ContainerName(rc), Node: rc.Head, Port: sv.Port}, Cluster: rc.Addr, ClusterNodes: rc.Nodes()}
				hosts[addr] = []string{rc.Head}
				clusterOf[addr] = rc.Addr
			}
			continue
		}
		if r, ok := d.State().Get(addr); ok {
			serves[addr] = &ServeWork{Spec: ServeSpec{Resource: addr, Name: plan.ParseAddress(addr).Instance(), Container: r.Container, Node: hostplan.FirstHost(r.Hosts)}}
			hosts[addr] = hostplan.StateNodes(r.Hosts)
		}
	}
	refuseForeignServes(d.Finding, serves, d.Facts(), d.Project())
	// A serve of the state runs on the cluster whose container it names.
	others := slices.Sorted(maps.Keys(d.Works()))
	for addr, sw := range serves {
		if clusterOf[addr] != "" {
			continue
		}
		for _, o := range others {
			if w := d.Works()[o]; w.Type != Type && w.Container() == sw.Spec.Container {
				clusterOf[addr] = o
			}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(serves)) {
		sw := serves[addr]
		running := false
		if hf := d.Facts().Hosts[sw.Spec.Node]; hf != nil {
			rec := ServeRecord(hf, sw.Spec.Name)
			running = rec.Found && rec.Alive
		}
		sw.Stop = true
		w := &kind.Work{Address: addr, Type: Type, Hosts: hosts[addr], Do: sw}
		d.Add(w, sw.Spec.Name, running)
		// Serves stop first: before their cluster goes, and before every
		// other removal when their cluster is unknown.
		if c := clusterOf[addr]; c != "" {
			d.Before(addr, c)
			continue
		}
		for _, o := range others {
			d.Before(addr, o)
		}
	}
}

// serveAt is the configuration's serve at addr, nil when none.
func serveAt(cfg *Blocks, addr string) *VLLMServe {
	if cfg == nil {
		return nil
	}
	if a := plan.ParseAddress(addr); a.Type == Type {
		return cfg.Serves[a.Instance()]
	}
	return nil
}

// checkServeLimits is vllm_serve's part of the checks: the values vllm
// serve receives in argv or its environment fit.
func checkServeLimits(b *config.Block) {
	s := b.Value().(*VLLMServe)
	vals := []hostplan.ArgValue{
		{Attr: "model", What: "model", Value: s.Model},
		{Attr: "served_model_name", What: "served_model_name", Value: s.ServedModelName},
	}
	if s.APIKey != "" {
		vals = append(vals, hostplan.ArgValue{Attr: "api_key", What: "api_key", Value: "VLLM_API_KEY=" + s.APIKey, Secret: true, Env: true})
	}
	vals = append(vals, hostplan.EnvValues(b, "env", s.Env)...)
	vals = append(vals, hostplan.ListValues(b, "extra_args", s.ExtraArgs)...)
	hostplan.CheckArgLimits(b, vals, 3, true)
}
