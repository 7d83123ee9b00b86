package observe

import (
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"time"
)

// Facts is what Observe learned about every host of a Spec.
type Facts struct {
	// Hosts has one entry per host of the Spec, also for hosts that could not
	// be observed (their Err is set and the other fields are empty).
	Hosts map[string]*HostFacts `json:"hosts"`
	// Errors holds the error of every host that could not be observed at
	// all (unreachable, authentication, probe output unreadable), keyed by
	// host, so callers can classify with errors.Is.
	Errors map[string]error `json:"-"`
	// RoundTrips counts the commands Observe issued per host (at most 2).
	RoundTrips map[string]int `json:"round_trips"`
}

// Err joins the per-host errors in host order, or returns nil.
func (f *Facts) Err() error {
	hosts := make([]string, 0, len(f.Errors))
	for h := range f.Errors {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	errs := make([]error, 0, len(hosts))
	for _, h := range hosts {
		errs = append(errs, f.Errors[h])
	}
	return errors.Join(errs...)
}

// HostFacts is everything one host's probe reported. Every group of facts
// carries an Err: a section that failed (tool missing, daemon down, permission
// denied, timeout, truncated output) leaves its facts empty and says why,
// while the other sections are still parsed.
type HostFacts struct {
	// Host is the node name (set by Observe; empty after Parse).
	Host string `json:"host,omitempty"`
	// Err is set when the host could not be observed at all.
	Err string `json:"err,omitempty"`
	// Complete is false when the probe output ended before its last line
	// (connection dropped, probe killed): facts of missing sections carry an
	// Err.
	Complete bool `json:"complete"`

	Hostname string `json:"hostname,omitempty"`
	Arch     string `json:"arch,omitempty"`

	// Links and Addresses both come from `ip -j addr show`.
	Links     LinkFacts    `json:"links"`
	Addresses AddressFacts `json:"addresses"`
	// Routes is the main IPv4 table (`ip -j route show`).
	Routes RouteFacts `json:"routes"`
	// DefaultRoute is the kernel's answer to "which source address and
	// interface would reach the internet" — the lookup Ray's node IP
	// auto-detection makes (see ProbeScript).
	DefaultRoute DefaultRoute `json:"default_route"`
	RDMA         RDMAFacts    `json:"rdma"`
	// Listening are the listeners on HostSpec.Ports (absent when the
	// spec asked for none).
	Listening ListenFacts `json:"listening,omitzero"`
	Memory    Memory      `json:"memory"`
	// Exec is what the kernel lets one command take in arguments and
	// environment (execve's limits), less the session's own environment.
	Exec Exec     `json:"exec"`
	GPUs GPUFacts `json:"gpus"`
	// UnifiedMemory is true when a GPU reports no dedicated memory ([N/A]
	// on GB10): GPU and CPU share Memory, and Ray's memory monitor sees the
	// model's weights as host memory.
	UnifiedMemory bool           `json:"unified_memory"`
	Docker        Docker         `json:"docker"`
	Images        []Image        `json:"images,omitempty"`
	Containers    ContainerFacts `json:"containers"`
	// HTTP are the answers to HostSpec.HTTP, by URL.
	HTTP map[string]HTTPResult `json:"http,omitempty"`
	// RouteChecks answers, per peer fabric address, which interface and
	// source address this host would use to reach it.
	RouteChecks []RouteCheck `json:"route_checks,omitempty"`
	// TCPChecks are TCP connects to peers' ports (e.g. the head's GCS).
	TCPChecks []TCPCheck `json:"tcp_checks,omitempty"`
	// Records are the answers to HostSpec.Records, by name.
	Records map[string]ProcessRecord `json:"records,omitempty"`
	// Files are the answers to HostSpec.Files, by path, and Clock the
	// host's time when they were read (zero when none were asked).
	Files map[string]FileFacts `json:"files,omitempty"`
	Clock time.Time            `json:"clock,omitzero"`
	// Trees are the answers to HostSpec.Trees, by path.
	Trees map[string]TreeFacts `json:"trees,omitempty"`
	// Reads are the answers to HostSpec.Reads, by ReadProbe.Key.
	Reads map[string]ReadResult `json:"reads,omitempty"`
	// SecretKeys are the answers to HostSpec.SecretKeys: each lock's
	// secret-digest key, by lock name; a missing or malformed key file is
	// absent. A key is never serialized, logged or fingerprinted.
	SecretKeys map[string][]byte `json:"-"`
	// Bearers are the bearer tokens (BearerFile) of the same locks, by
	// lock name; never serialized, logged or fingerprinted either.
	Bearers map[string]string `json:"-"`
}

// Link is one network interface.
type Link struct {
	Index     int      `json:"index"`
	Name      string   `json:"name"`
	MTU       int      `json:"mtu"`
	OperState string   `json:"operstate"` // UP, DOWN, UNKNOWN (loopback), ...
	Flags     []string `json:"flags,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	LinkType  string   `json:"link_type,omitempty"`
	Master    string   `json:"master,omitempty"`
}

// Up reports whether the link is administratively up and has carrier.
func (l Link) Up() bool {
	return slices.Contains(l.Flags, "UP") && slices.Contains(l.Flags, "LOWER_UP")
}

// LinkFacts is the host's interfaces.
type LinkFacts struct {
	List []Link `json:"list,omitempty"`
	Err  string `json:"err,omitempty"`
}

// ByName returns the link called name.
func (f LinkFacts) ByName(name string) (Link, bool) {
	for _, l := range f.List {
		if l.Name == name {
			return l, true
		}
	}
	return Link{}, false
}

// Address is one IP address assigned to an interface.
type Address struct {
	Interface string       `json:"interface"`
	Prefix    netip.Prefix `json:"prefix"` // address and prefix length, e.g. 192.168.200.12/24
	Scope     string       `json:"scope,omitempty"`
}

// AddressFacts is the host's addresses.
type AddressFacts struct {
	List []Address `json:"list,omitempty"`
	Err  string    `json:"err,omitempty"`
}

// On returns the addresses of interface name.
func (f AddressFacts) On(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range f.List {
		if a.Interface == name {
			out = append(out, a.Prefix)
		}
	}
	return out
}

// In returns the addresses that fall inside cidr.
func (f AddressFacts) In(cidr netip.Prefix) []Address {
	var out []Address
	for _, a := range f.List {
		if cidr.Contains(a.Prefix.Addr()) {
			out = append(out, a)
		}
	}
	return out
}

// Route is one entry of a routing table.
type Route struct {
	Dst      string     `json:"dst"` // "default", a prefix or an address
	Gateway  netip.Addr `json:"gateway,omitzero"`
	Dev      string     `json:"dev,omitempty"`
	PrefSrc  netip.Addr `json:"prefsrc,omitzero"`
	Protocol string     `json:"protocol,omitempty"`
	Scope    string     `json:"scope,omitempty"`
	Type     string     `json:"type,omitempty"`
	Metric   int        `json:"metric,omitempty"`
}

// RouteFacts is the host's main routing table.
type RouteFacts struct {
	List []Route `json:"list,omitempty"`
	Err  string  `json:"err,omitempty"`
}

// DefaultRoute is where traffic to the internet would leave from.
type DefaultRoute struct {
	Src     netip.Addr `json:"src,omitzero"`
	Dev     string     `json:"dev,omitempty"`
	Gateway netip.Addr `json:"gateway,omitzero"`
	Err     string     `json:"err,omitempty"`
}

// RDMADevice is one RDMA port and the network device it is bound to, as
// `ibdev2netdev` prints it.
type RDMADevice struct {
	Device string `json:"device"` // e.g. rocep1s0f1
	Port   int    `json:"port"`
	NetDev string `json:"netdev"` // e.g. enp1s0f1np1
	Up     bool   `json:"up"`
}

// ListenFacts are the listening TCP sockets on the ports the spec asked
// about.
type ListenFacts struct {
	List []Listener `json:"list,omitempty"`
	Err  string     `json:"err,omitempty"`
}

// Listener is one listening TCP socket, as ss -ltnp shows it.
type Listener struct {
	Port int    `json:"port"`
	Addr string `json:"addr"` // the local address as ss prints it, e.g. "0.0.0.0:6379"
	// Process and PID name the owner; empty when ss could not see it
	// (another user's process, without root).
	Process string `json:"process,omitempty"`
	PID     int    `json:"pid,omitempty"`
	// Container is the name of the listed container (HostSpec's project
	// or names) the process runs in; empty for one outside them.
	Container string `json:"container,omitempty"`
}

// On returns the listeners on port.
func (l ListenFacts) On(port int) []Listener {
	var out []Listener
	for _, x := range l.List {
		if x.Port == port {
			out = append(out, x)
		}
	}
	return out
}

// RDMAFacts is the host's RDMA ports (empty on a host without RDMA).
type RDMAFacts struct {
	List []RDMADevice `json:"list,omitempty"`
	Err  string       `json:"err,omitempty"`
}

// Memory is the host's memory from /proc/meminfo, in bytes.
type Memory struct {
	TotalBytes     uint64 `json:"total_bytes"`
	AvailableBytes uint64 `json:"available_bytes"`
	Err            string `json:"err,omitempty"`
}

// GPU is one GPU as nvidia-smi reports it. Memory figures are in MiB and -1
// when the GPU does not report them ([N/A] on unified-memory GB10).
type GPU struct {
	Index          int    `json:"index"`
	Name           string `json:"name"`
	UUID           string `json:"uuid,omitempty"`
	MemoryTotalMiB int64  `json:"memory_total_mib"`
	MemoryUsedMiB  int64  `json:"memory_used_mib"`
	MemoryFreeMiB  int64  `json:"memory_free_mib"`
	Driver         string `json:"driver,omitempty"`
	// ComputeCap is the GPU's compute capability as nvidia-smi prints it
	// ("9.0" for H100, "12.1" for GB10); "" when the driver is too old to
	// report it.
	ComputeCap string `json:"compute_cap,omitempty"`
	// MIGMode is nvidia-smi's mig.mode.current: "Enabled", "Disabled", or
	// "" where the GPU has no MIG ([N/A]).
	MIGMode string `json:"mig_mode,omitempty"`
}

// GPUFacts is the host's GPUs. Err says why there are none when nvidia-smi
// is missing or cannot talk to the driver.
type GPUFacts struct {
	List []GPU `json:"list,omitempty"`
	// CUDA is the highest CUDA version the driver supports, as
	// `nvidia-smi --version` reports it ("13.0"); "" when it does not.
	CUDA string `json:"cuda,omitempty"`
	// NVSwitches are the NVSwitch devices the driver lists
	// (/proc/driver/nvidia-nvswitch/devices): where there are any, the
	// GPUs' NVLink fabric needs the fabric manager running.
	NVSwitches []string `json:"nvswitches,omitempty"`
	// FabricManager is the nvidia-fabricmanager unit as systemd reports it
	// (ActiveState: "active", "inactive", "failed", ...; "not-found" when
	// the unit is not installed); "" when the probe did not ask (no
	// NVSwitch) or systemd did not answer.
	FabricManager string `json:"fabric_manager,omitempty"`
	// LibCUDA is the file the dynamic loader resolves libcuda.so.1 to on
	// the host (ldconfig's cache, links followed), e.g.
	// /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05; a CUDA
	// forward-compatibility library shows as a path under .../compat/
	// whose version differs from the driver's.
	LibCUDA string `json:"libcuda,omitempty"`
	// Simulator names the program that answered instead of NVIDIA's
	// nvidia-smi, as its `nvidia-smi --version` says on a "Simulated by"
	// line ("rayform simnode" in rayform's lab), a line NVIDIA's tool
	// never prints; "" for a real nvidia-smi. It is read from that line
	// only, never guessed from a GPU's name or memory.
	Simulator string `json:"simulator,omitempty"`
	Err       string `json:"err,omitempty"`
}

// Docker is the state of the Docker client and daemon.
type Docker struct {
	// Installed is false when the docker client is not on PATH.
	Installed bool `json:"installed"`
	// Available is true when the daemon answered.
	Available bool `json:"available"`
	// ClientVersion and ServerVersion are known only when the probe ran
	// `docker version`, which it does only when it lists no containers
	// (docker ps then proves the daemon).
	ClientVersion string `json:"client_version,omitempty"`
	ServerVersion string `json:"server_version,omitempty"`
	// Err is the client's own words when the daemon did not answer, e.g.
	// "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.
	// Is the docker daemon running?" or a permission-denied on the socket.
	Err string `json:"err,omitempty"`
}

// Image is one image the spec asked about.
type Image struct {
	Ref      string   `json:"ref"`
	Present  bool     `json:"present"`
	ID       string   `json:"id,omitempty"`
	RepoTags []string `json:"repo_tags,omitempty"`
	Arch     string   `json:"arch,omitempty"`
	// Command is the image's entrypoint then command (its config), the
	// values of secret flags redacted as in Container.Cmd; Installs are
	// the package words its build steps install with pip, uv, conda or
	// mamba ("ray[default]==2.53.0"), newest first, without flags and
	// without words that hold a URL or a user (git+https://token@...):
	// what a kind reads of an image's content without running it, which
	// would not be read-only.
	Command  []string `json:"command,omitempty"`
	Installs []string `json:"installs,omitempty"`
	// Env holds the values of the image's CUDA variables (ImageEnvKeys)
	// from its config; no other value leaves the host.
	Env map[string]string `json:"env,omitempty"`
	Err string            `json:"err,omitempty"`
}

// RedactedValue replaces the value of every container environment variable
// not on the allow-list.
const RedactedValue = "(sensitive value)"

// Container is one of rayform's containers (labelled with the project, or
// named in the spec).
type Container struct {
	ID    string `json:"id"`
	Name  string `json:"name"` // without the leading "/"
	Image string `json:"image"`
	// ImageID is the sha256 id of the image the container runs.
	ImageID string `json:"image_id,omitempty"`
	// Status is docker ps's human text, e.g. "Up 2 hours", "Exited (1) 3 minutes ago".
	Status     string    `json:"status,omitempty"`
	State      string    `json:"state"` // created, running, exited, ...
	Running    bool      `json:"running"`
	ExitCode   int       `json:"exit_code"`
	OOMKilled  bool      `json:"oom_killed,omitempty"`
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	Restarts   int       `json:"restarts,omitempty"`
	// Inspected is true when `docker inspect` of the container was read. A
	// container the probe knew to be current (see HostSpec.SpecHashes) is
	// known from `docker ps` alone: ID, name, image, state, status and
	// labels; the fields above from ExitCode and below from Env are empty.
	Inspected bool `json:"inspected"`

	Labels map[string]string `json:"labels,omitempty"`
	// Resource and SpecHash are the rayform.resource and rayform.spec-hash
	// labels.
	Resource string `json:"resource,omitempty"`
	SpecHash string `json:"spec_hash,omitempty"`
	// Env holds every variable of the container's config: values of
	// allow-listed keys as set, every other value replaced by RedactedValue
	// (on the host already: the value never crosses the wire).
	Env        map[string]string `json:"env,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	// Cmd is the container's command with values of secret flags such as
	// --api-key replaced by RedactedValue.
	Cmd         []string `json:"cmd,omitempty"`
	NetworkMode string   `json:"network_mode,omitempty"`
	IpcMode     string   `json:"ipc_mode,omitempty"`
	Privileged  bool     `json:"privileged,omitempty"`
	ShmSize     int64    `json:"shm_size,omitempty"`
	// GPUs is true when the container was started with --gpus (a device
	// request with the "gpu" capability).
	GPUs bool `json:"gpus,omitempty"`
}

// ContainerFacts is rayform's containers on the host.
type ContainerFacts struct {
	List []Container `json:"list,omitempty"`
	Err  string      `json:"err,omitempty"`
}

// ByName returns the container called name.
func (f ContainerFacts) ByName(name string) (Container, bool) {
	for _, c := range f.List {
		if c.Name == name {
			return c, true
		}
	}
	return Container{}, false
}

// HTTPCheck is the answer of one local HTTP endpoint.
type HTTPCheck struct {
	// Status is the HTTP status, 0 when no response came.
	Status int `json:"status,omitempty"`
	// Refused is true when nothing listens on the port (for vLLM: not
	// started, or still loading weights).
	Refused bool `json:"refused,omitempty"`
	// TimedOut is true when the port accepted the connection but no
	// response came within the probe's bound (2 s): for vLLM, a process
	// that listens but is hung (stopped, deadlocked), not one loading
	// weights, whose port is still closed.
	TimedOut bool `json:"timed_out,omitempty"`
	// HeldBy names the process holding the port ("nc (pid 4242)") when it
	// is not the probe's Owner: the request was not sent.
	HeldBy string `json:"held_by,omitempty"`
	// Oversized is true when the answer was longer than HTTPBodyMax: it
	// was not read (no body), and says nothing of the server's state.
	Oversized bool `json:"oversized,omitempty"`
	// Incomplete is true when the answer began but did not end: the
	// transfer broke or timed out after the status came, or the probe's
	// output ended inside it.
	Incomplete bool   `json:"incomplete,omitempty"`
	Err        string `json:"err,omitempty"`
}

// Unread reports an answer the probe could not read whole: too slow
// (TimedOut), too large (Oversized) or cut short (Incomplete). What the
// server would have said is unknown; it is never a judgment of the
// server (a reading that is slow, oversized or malformed is "could not
// read", never drift).
func (c HTTPCheck) Unread() bool { return c.TimedOut || c.Oversized || c.Incomplete }

// RouteCheck is the kernel's route to one peer fabric address.
type RouteCheck struct {
	// Peer is the peer's node name (set by Observe).
	Peer    string     `json:"peer,omitempty"`
	Addr    netip.Addr `json:"addr"`
	Dev     string     `json:"dev,omitempty"`
	Src     netip.Addr `json:"src,omitzero"`
	Gateway netip.Addr `json:"gateway,omitzero"`
	// Err is set when there is no route ("RTNETLINK answers: Network is
	// unreachable") or the peer's address could not be learned.
	Err string `json:"err,omitempty"`
}

// TCPCheck is a TCP connect from this host to a peer's port.
type TCPCheck struct {
	Peer string     `json:"peer,omitempty"`
	Addr netip.Addr `json:"addr"`
	Port int        `json:"port"`
	Open bool       `json:"open"`
	Err  string     `json:"err,omitempty"`
}

// Record is what apply writes beside an object it created (a serve's record
// file, a container's label) so that a later plan can tell what the object
// was made from: the spec's hash and the attributes as applied.
type Record struct {
	Resource string `json:"resource,omitempty"`
	SpecHash string `json:"spec_hash,omitempty"`
	// Attrs are the attribute values as JSON; a sensitive value appears
	// only as its digest, and its path is in Sensitive.
	Attrs     map[string]json.RawMessage `json:"attrs,omitempty"`
	Sensitive []string                   `json:"sensitive,omitempty"`
}

// ProcessRecord is what apply wrote beside a process (see RecordProbe),
// and whether that process still runs.
type ProcessRecord struct {
	// Found is false when there is no record (never started, or the
	// container was recreated).
	Found    bool   `json:"found"`
	Resource string `json:"resource,omitempty"`
	SpecHash string `json:"spec_hash,omitempty"`
	// Attrs are the process's attributes as last applied, each as JSON text,
	// for showing what changed; sensitive values appear only as digests.
	Attrs map[string]string `json:"attrs,omitempty"`
	// Sensitive lists the paths of Attrs holding such digests, e.g.
	// `env["HF_TOKEN"]`.
	Sensitive []string `json:"sensitive,omitempty"`
	Alive     bool     `json:"alive"`
	Err       string   `json:"err,omitempty"`
}
