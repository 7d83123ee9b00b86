package cluster

import (
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/imageref"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/attrs"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/node"
	"github.com/rayform/rayform/resources/stepenv"
)

// Where arguments of the cluster go that a secret must not, for the error
// that refuses a sensitive value in them (config.Arg.Exposure).
const (
	exposeDockerRun = "the `docker run` command line of the cluster's containers, which every user of the host can read (`ps`, /proc/PID/cmdline), what `docker inspect` shows of them (arguments, labels, mounts) and rayform's plans"
	exposeRayStart  = "the `ray start` command line in every container, which every user of the host can read (`ps`), and the addresses rayform's plans and status show"
)

// clusterDescriptor is the ray_cluster block: Ray in one container per node.
func clusterDescriptor() config.Kind {
	str, num, dyn, boolean := cty.String, cty.Number, cty.DynamicPseudoType, cty.Bool
	strList := cty.List(cty.String)
	return config.Kind{
		Type:    Type,
		Noun:    "Ray cluster",
		Summary: "Ray in one container per node",
		Args: []config.Arg{
			{Name: "image", Type: str, Required: true, Exported: true, Applied: true, ForcesReplacement: true, Exposure: exposeDockerRun,
				Description: "container image with Ray and vLLM"},
			{Name: "head", Type: dyn, Ref: node.Type, Decoded: str, Required: true, Exported: true, Applied: true, ForcesReplacement: true, ExportDoc: "node name",
				Description: "the node running the Ray head (it contributes its GPUs too)"},
			{Name: "workers", Type: dyn, Ref: node.Type, Decoded: strList, Exported: true, Applied: true, ExportDoc: "node names",
				Description: "the other nodes; a node belongs to at most one cluster and cannot be head and worker"},
			{Name: "network", Type: dyn, Ref: network.Type, Decoded: str, Exported: true, Applied: true, ForcesReplacement: true, ExportDoc: "name",
				DefaultDoc:  "required when the cluster has workers",
				Description: "the fabric the cluster binds to; a single-node cluster may omit it (without it, Ray and vLLM's c10d master use each node's default-route address, which workers on another network cannot reach)"},
			{Name: "port", Type: num, Default: cty.NumberIntVal(6379), Min: 1, Max: 65535, Exported: true, Applied: true, ForcesReplacement: true, Exposure: exposeRayStart,
				Description: "Ray GCS port on the head"},
			{Name: "dashboard_port", Type: num, Default: cty.NumberIntVal(8265), Min: 1, Max: 65535, Exported: true, Applied: true, ForcesReplacement: true, Exposure: exposeRayStart,
				Description: "Ray dashboard port on the head"},
			{Name: "memory_monitor", Type: boolean, Default: cty.True, Applied: true, ForcesReplacement: true, DefaultDoc: "`true` (Ray's default)",
				Description: "Ray's memory monitor (OOM killer); `false` sets `RAY_memory_monitor_refresh_ms=0`. Turn it off on unified-memory machines such as DGX Spark, where it kills workers while weights load"},
			{Name: "dataplane_check", Type: boolean, Default: cty.True,
				Description: "run the data-plane check before `vllm serve` starts: one torch process per node inside its Ray container, a c10d rendezvous on the head's fabric address, a Gloo (and, with GPUs, NCCL) all_reduce; shows the interface each backend used and the bus bandwidth, and stops the apply on a failure (see `rayform check`). `false` for images without Python and torch"},
			{Name: "shm_size", Type: str, DefaultDoc: "not set",
				Description: "has no effect, and rayform warns: the containers run with `--ipc host`, so `/dev/shm` is the host's and docker ignores `--shm-size`; rayform does not pass it (changing it replaces nothing)"},
			{Name: "env", Type: cty.Map(str), UnknownOK: true, Applied: true, ForcesReplacement: true, MaySensitive: true,
				Description: "extra environment variables in every container"},
			{Name: "volumes", Type: strList, UnknownOK: true, Applied: true, ForcesReplacement: true,
				Exposure:    "the containers' mounts: the `docker run -v` command line every user of the host can read (`ps`, /proc/PID/cmdline), `docker inspect` (Mounts, HostConfig.Binds), the containers' labels and rayform's plans",
				Description: "`docker run -v` specs, `SOURCE:/container/path[:OPTIONS]`"},
			{Name: "docker_args", Type: strList, UnknownOK: true, Applied: true, ForcesReplacement: true, Exposure: exposeDockerRun,
				Description: "extra `docker run` arguments (escape hatch; not what rayform sets: `--name`, `--network`/`--net`, `--gpus`, `-d` alone or in `-dit`, `--ipc`, `--restart`, `--entrypoint`, `--shm-size`, nor `-e`/`--env` of a pinned variable)"},
			{Name: "container_name", Type: str, Exported: true, Applied: true, ForcesReplacement: true, DefaultDoc: "`\"rayform-NAME\"`",
				Exposure:    "the containers' names: the `docker run` and `docker exec` command lines every user of the host can read (`ps`), `docker ps`, `docker inspect`, and rayform's plans, status and messages",
				Description: "container name on every node"},
			{Name: "auth", Type: str, Default: cty.StringVal(AuthToken), Applied: true, ForcesReplacement: true, DefaultDoc: "`\"token\"`",
				Description: "Ray's authentication: `\"token\"` turns on Ray's token authentication (`RAY_AUTH_MODE=token`, Ray 2.52 and later): Ray's GCS, raylets and dashboard (its Jobs API included) refuse whoever does not send the deployment's token, which rayform makes once, keeps on the head beside its lock (`~/.rayform/locks/PROJECT.CLUSTER.bearer`, mode 0600), hands to every container like the other secrets and sends with each of its own reads; `rayform apply -rotate-token` makes a new one. `\"none\"` leaves the cluster open to anyone who reaches its ports, and plan says so"},
		},
		Computed: []config.Attr{
			{Name: "address", Doc: "`\"<head fabric ip>:<port>\"` (*observe*)", From: []string{"head", "network", "port"}},
			{Name: "head_ip", Doc: "(*observe*)", From: []string{"head", "network"}},
			{Name: "dashboard_url", Doc: "`\"http://127.0.0.1:<dashboard_port>\"`: the dashboard listens on the head's loopback only; open `dashboard_tunnel` first", From: []string{"dashboard_port"}},
			{Name: "dashboard_tunnel", Doc: "`\"ssh -N -L <dashboard_port>:127.0.0.1:<dashboard_port> [-p PORT] [USER@]<head host>\"`: the SSH tunnel that makes `dashboard_url` answer on the operator's machine (send the deployment's token: Ray asks for it)", From: []string{"head", "dashboard_port"}},
		},
		New:      func() any { return &RayCluster{} },
		Decode:   decodeRayCluster,
		Check:    checkRayCluster,
		Compute:  computeRayCluster,
		Validate: validateClusters,
	}
}

// decodeRayCluster gives container_name its default, "rayform-NAME".
func decodeRayCluster(b *config.Block) {
	rc := b.Value().(*RayCluster)
	if !b.IsSet("container_name") {
		rc.ContainerName = "rayform-" + rc.Name
		b.SetDefault("container_name", cty.StringVal(rc.ContainerName))
	}
}

// computeRayCluster sets the head's fabric address from the observed
// facts and computes address, head_ip and dashboard_url (unknown until
// the head's address is observed).
func computeRayCluster(b *config.Block) map[string]cty.Value {
	rc := b.Value().(*RayCluster)
	rc.HeadAddress = kind.FactsOf(b).FabricAddrs[rc.Head]
	unknown := cty.UnknownVal(cty.String).RefineNotNull()
	out := map[string]cty.Value{"address": unknown, "head_ip": unknown, "dashboard_tunnel": unknown,
		"dashboard_url": cty.StringVal("http://" + DashboardHost + ":" + strconv.Itoa(rc.DashboardPort))}
	if a, ok := rc.Address(); ok {
		out["address"] = cty.StringVal(a)
		out["head_ip"] = cty.StringVal(rc.HeadAddress.String())
	}
	if head := kind.BlocksOf[node.Node](b.Config(), node.Type)[rc.Head]; head != nil && head.Host != "" && !head.IsUnknown("host") && !head.IsUnknown("user") {
		out["dashboard_tunnel"] = cty.StringVal(dashboardTunnel(head, rc.DashboardPort))
	}
	return out
}

// checkRayCluster checks a Ray cluster's arguments on their own.
func checkRayCluster(b *config.Block) {
	rc := b.Value().(*RayCluster)
	if b.IsSet("image") && strings.TrimSpace(rc.Image) == "" {
		b.Error("image", "Empty image", "image must name a container image, like \"vllm/vllm-openai:v0.11.0\".")
	}
	if len(rc.Workers) > 0 && rc.Network == "" && !b.Failed("network") {
		b.Error("network", "Multi-node cluster without a network binding",
			fmt.Sprintf("ray_cluster.%s has workers but no network. Without a network, Ray registers each node under the address of its default route (usually the management network) and vLLM's c10d master listens there; a worker that cannot reach that address fails, after the model starts loading, with \"The client socket has failed to connect to any network address of (<ip>, <port>)\". "+
				"Declare the fabric the nodes share as a network block, network \"fabric\" with its cidr and interface (for example cidr = \"192.168.200.0/24\" and interface = \"enp1s0f1np1\"), and set network = network.fabric in ray_cluster.%s.", rc.Name, rc.Name))
	}
	if rc.Auth != AuthToken && rc.Auth != AuthNone {
		b.Error("auth", "Invalid auth", fmt.Sprintf("auth must be %q (Ray's token authentication) or %q (no authentication: anyone who reaches the cluster's ports can run code in it); got %q.", AuthToken, AuthNone, rc.Auth))
	}
	for k := range rc.Env {
		if strings.HasPrefix(k, "RAY_AUTH_") {
			b.Error("env", "Ray's authentication set in env", fmt.Sprintf("env sets %s; rayform sets Ray's authentication itself (auth = %q or %q) and hands the token to every container and to its own commands.", k, AuthToken, AuthNone))
		}
	}
	if rc.Port == rc.DashboardPort {
		b.Error("dashboard_port", "Port conflict", fmt.Sprintf("port and dashboard_port are both %d; Ray's GCS and its dashboard need different ports.", rc.Port))
	}
	if rc.ShmSize != "" && !hostplan.Matches(shmSizePattern, rc.ShmSize) {
		b.Error("shm_size", "Invalid shm_size", fmt.Sprintf("shm_size must be a size as docker's --shm-size takes it, like \"16g\" or \"512m\"; got %q.", rc.ShmSize))
	} else if rc.ShmSize != "" {
		b.Warn("shm_size", "shm_size has no effect", "rayform runs the Ray containers with --ipc host (NCCL and vLLM share memory across processes through it), so /dev/shm is the host's and docker ignores --shm-size. rayform does not pass it; remove shm_size.")
	}
	if !hostplan.Matches(containerNamePattern, rc.ContainerName) {
		b.Error("container_name", "Invalid container name", fmt.Sprintf("%q is not a valid Docker container name: use letters, digits, and _ . - (not first).", rc.ContainerName))
	}
	hostplan.CheckEnv(b, "env", rc.Env)
	for i, v := range rc.Volumes {
		if b.Decl().IsUnknown(fmt.Sprintf("volumes[%d]", i)) {
			continue
		}
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || !strings.HasPrefix(parts[1], "/") {
			b.Error("volumes", "Invalid volume", fmt.Sprintf("volumes[%d] is %q; a volume is SOURCE:/container/path[:OPTIONS], like \"/data/hf:/root/.cache/huggingface\".", i, v))
		}
	}
	checkDockerArgs(b, rc.DockerArgs)
	checkLabelArgs(b, rc.DockerArgs)
	checkClusterLimits(b)
}

// validateClusters checks the rules between clusters and their nodes: a
// node is in one cluster, once, and never both head and worker.
func validateClusters(c *config.Config, report config.Report) {
	cfg := View(c)
	owner := map[string]string{} // node → cluster
	for _, name := range slices.Sorted(maps.Keys(cfg.RayClusters)) {
		rc := cfg.RayClusters[name]
		claim := func(node, attr string) {
			if prev, ok := owner[node]; ok {
				report(&rc.Decl, attr, "Node in two Ray clusters",
					fmt.Sprintf("Node %s is already in ray_cluster.%s. A node runs one Ray container, so it can belong to one cluster only; remove it from one of them.", node, prev))
				return
			}
			owner[node] = name
		}
		claim(rc.Head, "head")
		seen := map[string]bool{}
		for _, w := range rc.Workers {
			switch {
			case w == rc.Head:
				report(&rc.Decl, "workers", "Node is both head and worker",
					fmt.Sprintf("%s is the head of ray_cluster.%s and is also listed in workers. The head contributes its GPUs to the cluster already; remove it from workers.", w, name))
			case seen[w]:
				report(&rc.Decl, "workers", "Duplicate worker", fmt.Sprintf("%s appears more than once in the workers of ray_cluster.%s; list each node once.", w, name))
			default:
				seen[w] = true
				claim(w, "workers")
			}
		}
	}
}

// RayCluster is a Ray cluster: one container per node, a head and workers.
type RayCluster struct {
	config.Decl
	Name          string   `rayform:",name"`
	Image         string   `rayform:"image"`
	Head          string   `rayform:"head"`           // node name
	Workers       []string `rayform:"workers"`        // node names, in configuration order
	Network       string   `rayform:"network"`        // network name, "" when none (allowed for a single node)
	Port          int      `rayform:"port"`           // GCS port, default 6379
	DashboardPort int      `rayform:"dashboard_port"` // default 8265
	// MemoryMonitor is Ray's memory monitor (the OOM killer); false sets
	// RAY_memory_monitor_refresh_ms=0 in every container. Default true.
	MemoryMonitor bool `rayform:"memory_monitor"`
	// Auth is Ray's authentication mode: AuthToken (the default) or
	// AuthNone.
	Auth string `rayform:"auth"`
	// DataplaneCheck runs the data-plane check (torch c10d, Gloo and NCCL
	// across every node, resources/dataplane) before vllm serve starts.
	// Default true; false for images without Python and torch.
	DataplaneCheck bool              `rayform:"dataplane_check"`
	ShmSize        string            `rayform:"shm_size"` // docker --shm-size, "" = not set
	Env            map[string]string `rayform:"env"`
	Volumes        []string          `rayform:"volumes"`        // docker -v specs
	DockerArgs     []string          `rayform:"docker_args"`    // extra docker run arguments
	ContainerName  string            `rayform:"container_name"` // default "rayform-<name>"
	// HeadAddress is the head's observed fabric address; invalid until
	// observed.
	HeadAddress netip.Addr
}

// Nodes returns the head followed by the workers.
func (r *RayCluster) Nodes() []string {
	return append([]string{r.Head}, r.Workers...)
}

// PlacedOn is the cluster's nodes, head first (kind.Placed).
func (r *RayCluster) PlacedOn(*config.Config) []string { return r.Nodes() }

// NetworkNodes returns the network the cluster binds and its nodes
// (network.Member): how the network learns its members.
func (r *RayCluster) NetworkNodes() (string, []string) { return r.Network, r.Nodes() }

// Address returns "<head fabric ip>:<port>", and false before the head's
// address is observed.
func (r *RayCluster) Address() (string, bool) {
	if !r.HeadAddress.IsValid() {
		return "", false
	}
	return netip.AddrPortFrom(r.HeadAddress, uint16(r.Port)).String(), true
}

// Kind is the ray_cluster kind: Ray in one container per node.
type Kind struct{}

// The cluster kind's optional parts (kind.Kind): no lookup outside the
// hosts, no early steps, no readiness but its steps'.
var (
	_ kind.KindWithObserve      = Kind{}
	_ kind.KindWithDestroy      = Kind{}
	_ kind.KindWithPresence     = Kind{}
	_ kind.KindWithCommandCheck = Kind{}
	_ kind.KindWithSteps        = Kind{}
	_ kind.KindWithPrepare      = Kind{}
	_ kind.KindWithLogs         = Kind{}
	_ kind.KindWithFingerprint  = Kind{}
	_ kind.KindWithStatus       = Kind{}
	_ kind.KindWithLocks        = Kind{}
	_ kind.KindWithHostFacts    = Kind{}
	_ kind.KindWithFabric       = Kind{}
)

// Schema is the ray_cluster block's descriptor.
func (Kind) Schema() config.Kind { return clusterDescriptor() }

// Traits: a cluster is replaced (its containers recreated) on request, its
// containers' logs are read with docker logs, and an output shows what its
// plan schema exports.
func (Kind) Traits() kind.Traits {
	return kind.Traits{Replaceable: true, Exported: attrs.Exported(clusterPlanSchema()), Status: "clusters"}
}

// Observe asks for each cluster's containers, image, fabric and node table.
func (Kind) Observe(o *kind.Observation) {
	observeClusters(o)
	o.EnvKeys = hostplan.EnvKeys()
}

// Plan plans each cluster of the configuration.
func (Kind) Plan(p kind.Planner) {
	pl := newPlanner(p)
	for _, rc := range sortedClusters(pl.cfg) {
		pl.cluster(rc)
	}
}

// Destroy removes the doomed clusters' containers.
func (Kind) Destroy(d kind.Destroyer) { destroyClusters(d) }

// Present finds the project's cluster containers.
func (Kind) Present(pr *kind.Presence) { presentClusters(pr) }

// CheckCommands checks its containers' docker run lines within their
// hosts' limits (hostplan.CheckCommandLimits).
func (Kind) CheckCommands(req kind.CommandCheckRequest) error { return hostplan.CheckCommands(req) }

// stepEnv is the environment of the steps of w.
func (k Kind) stepEnv(env *kind.Env, w *kind.Work) *stepenv.StepEnv {
	return stepenv.New(env, k, w.Address)
}

// Steps are the steps of a cluster's work (clusterSteps).
func (k Kind) Steps(req kind.StepsRequest) []apply.Step {
	w := req.Work
	if WorkOf(w) == nil {
		return kind.Unsupported(w)
	}
	return clusterSteps(k.stepEnv(req.Env, w), w)
}

// PrepareSteps pull the image and check Ray in it on every node that
// starts a container, before anything is removed.
func (k Kind) PrepareSteps(req kind.StepsRequest) []apply.Step {
	w := req.Work
	if w.Action == plan.Delete || WorkOf(w) == nil {
		return nil
	}
	r := newClusterRun(k.stepEnv(req.Env, w), w)
	if len(r.started) == 0 {
		return nil
	}
	return []apply.Step{newImageStep(r, r.started), newRayStep(r, r.started)}
}

// Logs are its containers' logs (docker logs), on every node or on
// q.Node.
func (Kind) Logs(q kind.LogQuery) ([]kind.LogCommand, error) {
	rc := At(View(q.Config), q.Address)
	if rc == nil {
		return nil, fmt.Errorf("%s: no such %s in the configuration", q.Address, Type)
	}
	if q.Previous {
		// A replaced container is removed with its logs.
		return nil, fmt.Errorf("-previous applies to vllm_serve logs (a serve keeps its previous process's log); a ray_cluster's containers keep none")
	}
	tail := "all"
	if q.Tail >= 0 {
		tail = strconv.Itoa(q.Tail)
	}
	var out []kind.LogCommand
	for _, n := range rc.Nodes() {
		if q.Node != "" && n != q.Node {
			continue
		}
		argv := []string{"docker", "logs", "--tail", tail}
		if q.Since != "" {
			argv = append(argv, "--since", q.Since)
		}
		if q.Follow {
			argv = append(argv, "-f")
		}
		argv = append(argv, ContainerName(rc))
		out = append(out, kind.LogCommand{Node: n, Script: shell.Join(argv)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-node %s is not a node of %s (%s)", q.Node, q.Address, strings.Join(rc.Nodes(), ", "))
	}
	return out, nil
}

// Fingerprint is Ray's node table of every answer that is one, compared
// by its rows (node address and state).
func (Kind) Fingerprint(hf *observe.HostFacts) []string {
	var out []string
	for _, r := range hf.HTTP {
		for _, n := range ParseRayNodes(r, true).List {
			out = append(out, "ray "+n.NodeIP+" "+n.State)
		}
	}
	return out
}

// Locks are each cluster's lock on its head, and, for each cluster the
// state records, its lock on the head it was applied with (every host it
// was applied to when the state does not say which was the head), so that
// a copy of the configuration with another head, or a renamed cluster
// carrying the same state, waits for a run of the original.
func (Kind) Locks(req kind.LocksRequest) []kind.Lock {
	cfg, st := View(req.Config), req.State
	var out []kind.Lock
	for _, name := range slices.Sorted(maps.Keys(cfg.RayClusters)) {
		rc := cfg.RayClusters[name]
		out = append(out, kind.Lock{Resource: ClusterAddress(name), Key: name, Host: rc.Head})
	}
	if st == nil {
		return out
	}
	for _, addr := range st.Addresses() {
		a := plan.ParseAddress(addr)
		if a.Type != Type {
			continue
		}
		r, _ := st.Get(addr)
		if r.Head != "" {
			out = append(out, kind.Lock{Resource: ClusterAddress(a.Instance()), Key: a.Instance(), Host: r.Head, FromState: true})
			continue
		}
		for _, h := range r.Hosts {
			out = append(out, kind.Lock{Resource: ClusterAddress(a.Instance()), Key: a.Instance(), Host: h.Node, FromState: true})
		}
	}
	return out
}

// ClusterName is the name of the ray_cluster an argument names, as
// commands about one cluster (check, force-unlock) take it: NAME or
// ray_cluster.NAME.
func ClusterName(arg string) string { return strings.TrimPrefix(arg, Type+".") }

// ClusterAddress is the address of the ray_cluster called name.
func ClusterAddress(name string) string { return Type + "." + name }

// observeClusters asks each cluster's nodes for its image and containers,
// their fabric and peers, and its head for Ray's node table and ports.
func observeClusters(o *kind.Observation) {
	cfg, st, project := View(o.Config), o.State, o.Project
	spec := o.Spec
	assumed, assumedIfaces := AssumedFabric(cfg, st)
	hashes := assumedSpecHashes(cfg, assumed, assumedIfaces)
	secretKeyProbes(spec, cfg, project)
	for _, rc := range sortedClusters(cfg) {
		nw := cfg.Networks[rc.Network]
		container := ContainerName(rc)
		nodes := rc.Nodes()
		for _, node := range nodes {
			hs := o.Host(node)
			hs.Images = hostplan.AppendUnique(hs.Images, rc.Image)
			hs.Containers = hostplan.AppendUnique(hs.Containers, container)
			// status's exposure report reads every listener.
			hs.AllListeners = hs.AllListeners || o.Status
			if h, ok := hashes[node][container]; ok {
				if hs.SpecHashes == nil {
					hs.SpecHashes = map[string]string{}
				}
				hs.SpecHashes[container] = h
			}
			if nw != nil {
				hs.Fabric = nw.Fabric(node)
				for _, peer := range nodes {
					if peer != node {
						a := assumed[peer]
						hs.Peers = append(hs.Peers, observe.Peer{Host: peer, Addr: a, Assumed: a.IsValid()})
					}
				}
			}
			if node == rc.Head {
				hs.Ports = hostplan.AppendUniqueInt(hs.Ports, rc.Port, rc.DashboardPort)
				hs.HTTP = append(hs.HTTP, rayTableProbe(rc, project))
				if rc.Auth == AuthToken {
					hs.HTTP = append(hs.HTTP, observe.HTTPProbe{URL: AuthModeURL(rc.DashboardPort), Owner: container})
				}
			}
			o.SetHost(node, hs)
		}
	}
}

// presentClusters finds the project's cluster containers on the hosts, in
// any state (an exited container still belongs to its cluster).
func presentClusters(pr *kind.Presence) {
	for _, node := range slices.Sorted(maps.Keys(pr.Facts.Hosts)) {
		hf, ok := pr.Known(node)
		if !ok {
			continue
		}
		for _, c := range hf.Containers.List {
			if !IsContainerOf(c.Labels, pr.Project) {
				continue
			}
			addr := c.Labels[LabelResource]
			pr.Add(addr, Type, node, c.Name)
			if c.Labels[LabelRole] == "head" {
				pr.Head(addr, node)
			}
		}
	}
}

// destroyClusters plans the removal of the doomed clusters: each one's
// containers of the project, labelled with its address, that the facts
// show on any host (and, with Adopt, those of any other cluster address).
func destroyClusters(d kind.Destroyer) {
	cfg := View(d.Config())
	containers := map[string]string{} // address → container name
	hosts := map[string][]string{}
	for _, addr := range d.Doomed(Type) {
		if rc := At(cfg, addr); rc != nil {
			containers[addr], hosts[addr] = ContainerName(rc), rc.Nodes()
		} else if r, ok := d.State().Get(addr); ok {
			containers[addr], hosts[addr] = r.Container, hostplan.StateNodes(r.Hosts)
		}
	}
	facts := d.Facts()
	found := map[string][]Removal{}
	for _, node := range slices.Sorted(maps.Keys(facts.Hosts)) {
		hf := facts.Hosts[node]
		if hf == nil {
			continue
		}
		for _, c := range hf.Containers.List {
			if !IsContainerOf(c.Labels, d.Project()) {
				continue
			}
			addr := c.Labels[LabelResource]
			if _, ok := containers[addr]; !ok {
				if !d.Adopt() {
					continue
				}
				containers[addr] = c.Name
			}
			found[addr] = append(found[addr], Removal{Node: node, Container: c.Name})
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(containers)) {
		rems := found[addr]
		sort.Slice(rems, func(i, j int) bool { return rems[i].Node < rems[j].Node })
		nodes := hosts[addr]
		for _, rm := range rems {
			nodes = hostplan.AppendUnique(nodes, rm.Node)
		}
		name := plan.ParseAddress(addr).Instance()
		w := &kind.Work{Address: addr, Type: Type, Hosts: nodes,
			Do: &ClusterWork{Name: name, ContainerName: containers[addr], Start: map[string]bool{}, Remove: rems}}
		d.Add(w, name, len(rems) > 0)
	}
}

// At is the configuration's cluster at addr, nil when none.
func At(cfg *Blocks, addr string) *RayCluster {
	if cfg == nil {
		return nil
	}
	if a := plan.ParseAddress(addr); a.Type == Type {
		return cfg.RayClusters[a.Instance()]
	}
	return nil
}

// ClusterStatus is what status shows of a cluster: Ray's node table as its
// head answered it.
type ClusterStatus struct {
	Address  string          `json:"address"`
	Head     string          `json:"head"`
	Ray      []RayNodeStatus `json:"ray_nodes"`
	RayError string          `json:"ray_error,omitempty"`
	// AuthMode is the authentication the head's Ray runs with, as its
	// dashboard says (RayAuthMode; "" when not read).
	AuthMode string `json:"auth_mode,omitempty"`
	// Exposure lists, per node, every TCP port listening beyond the
	// node's loopback and fabric address (Exposures).
	Exposure []Exposure `json:"exposure"`
}

// RayNodeStatus is one row of Ray's node table.
type RayNodeStatus struct {
	NodeIP string  `json:"node_ip"`
	State  string  `json:"state"`
	IsHead bool    `json:"is_head"`
	GPUs   float64 `json:"gpus"`
}

// Status shows each cluster's node table; a node that is not ALIVE (and
// has no ALIVE row of the same address: a DEAD row beside an ALIVE one is
// the node's earlier life) is a problem.
func (Kind) Status(q kind.StatusQuery) []kind.Status {
	cfg := View(q.Config)
	var out []kind.Status
	for _, rc := range sortedClusters(cfg) {
		sc := ClusterStatus{Address: rc.Addr, Head: rc.Head, Ray: []RayNodeStatus{}}
		var problems []string
		if hf := q.Facts.Hosts[rc.Head]; hf != nil {
			table := RayTable(hf, rc)
			sc.RayError = table.Err
			alive := map[string]bool{}
			for _, n := range table.Alive() {
				alive[n.NodeIP] = true
			}
			for _, n := range table.List {
				sc.Ray = append(sc.Ray, RayNodeStatus{NodeIP: n.NodeIP, State: n.State, IsHead: n.IsHead, GPUs: n.GPUs()})
				if n.State != "ALIVE" && !alive[n.NodeIP] {
					msg := fmt.Sprintf("%s: Ray node %s is %s", rc.Addr, n.NodeIP, n.State)
					if n.StateMessage != "" {
						msg += ": " + firstLineOr(n.StateMessage, "no answer")
					}
					problems = append(problems, msg)
				}
			}
			sort.Slice(sc.Ray, func(i, j int) bool { return sc.Ray[i].NodeIP < sc.Ray[j].NodeIP })
		}
		sc.Exposure = Exposures(q.Config, q.Facts, rc)
		sc.AuthMode = RayAuthMode(q.Facts.Hosts[rc.Head], rc)
		if rc.Auth == AuthToken && (sc.AuthMode == AuthModeDisabled || sc.AuthMode == AuthModeUnsupported) {
			problems = append(problems, fmt.Sprintf("%s is open: its Ray does not run token authentication (%s)", rc.Addr, sc.AuthMode))
		}
		out = append(out, kind.Status{Address: rc.Addr, Value: sc, Problems: problems, Render: sc.render})
	}
	return out
}

// render prints the cluster's node table.
func (c ClusterStatus) render(w io.Writer) {
	fmt.Fprintf(w, "\nRay (%s, head %s):\n", c.Address, c.Head)
	if len(c.Ray) == 0 {
		fmt.Fprintf(w, "  no node table: %s\n", hostplan.FirstNonEmpty(c.RayError, "-"))
	}
	for _, n := range c.Ray {
		role := ""
		if n.IsHead {
			role = "head"
		}
		fmt.Fprintf(w, "  %-16s %-6s %-4s %g GPU\n", n.NodeIP, n.State, role, n.GPUs)
	}
	if c.AuthMode != "" {
		fmt.Fprintf(w, "  authentication: %s\n", c.AuthMode)
	}
	if len(c.Exposure) > 0 {
		fmt.Fprintf(w, "Listening beyond loopback and the fabric:\n")
	}
	for _, e := range c.Exposure {
		fmt.Fprintf(w, "  %-8s %-22s %-18s %s\n", e.Node, e.Addr, hostplan.FirstNonEmpty(e.Process, "?"), e.Auth)
	}
}

// firstLineOr is the first line of s, trimmed, or none when empty.
func firstLineOr(s, none string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return none
	}
	return s
}

// checkClusterLimits is ray_cluster's part of the checks: the image is a
// reference docker can pull (imageref, the parser the observation and
// apply use), and the values docker run receives fit.
func checkClusterLimits(b *config.Block) {
	rc := b.Value().(*RayCluster)
	if b.IsSet("image") && strings.TrimSpace(rc.Image) != "" && !b.Decl().IsUnknown("image") {
		if _, err := imageref.Parse(rc.Image); err != nil {
			b.Error("image", "Invalid image reference", err.Error()+".")
		}
	}
	vals := hostplan.EnvValues(b, "env", rc.Env)
	vals = append(vals, hostplan.ListValues(b, "docker_args", rc.DockerArgs)...)
	vals = append(vals, hostplan.ListValues(b, "volumes", rc.Volumes)...)
	hostplan.CheckArgLimits(b, vals, 2, false)
	// The secret env's file must fit the container's tmpfs (SecretsMax):
	// the known values are checked; unknown ones only add to them.
	var secret []string
	for k := range rc.Env {
		what := fmt.Sprintf("env[%q]", k)
		if b.Decl().IsSensitive(what) && !b.Decl().IsUnknown(what) {
			secret = append(secret, k)
		}
	}
	slices.Sort(secret)
	if err := CheckSecretsFit(secret, rc.Env); err != nil {
		b.Error("env", "Secret env too large for its container", "It reaches the container in a file of its own tmpfs: "+err.Error()+".")
	}
}
