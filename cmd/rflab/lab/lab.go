//go:build linux

package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Addressing of the lab networks, as in the seeds (10.1.230.180 is the head's
// management address, 192.168.200.12 its fabric address).
const (
	MgmtPrefix     = "10.1.230."
	MgmtClientHost = 1   // client (and default gateway) 10.1.230.1
	MgmtFirstHost  = 180 // first node 10.1.230.180
	FabricPrefix   = "192.168.200."
	FabricFirst    = 12 // head 192.168.200.12, workers .13, .14, ...
	RegistryPort   = 5000
	// MgmtIfname is the management interface inside every node namespace.
	MgmtIfname = "eth0"
	// MaxNodes bounds the node count (management addresses .180-.243).
	MaxNodes = 64
)

// Default node hardware: one DGX Spark (1 × NVIDIA GB10, 119.70 GiB unified).
const (
	DefaultName         = "rflab"
	DefaultNodes        = 2
	DefaultFabricIfname = "enp1s0f1np1"
	DefaultFabricMTU    = 1500
	DefaultGPUs         = 1
	DefaultGPUModel     = "NVIDIA GB10"
	DefaultMemoryGiB    = 119.70
	DefaultBigImageMiB  = 256
)

// Image names served by the lab registry. Each node's dockerd uses the lab
// registry as its registry mirror, so these unqualified Docker Hub names pull
// through it; the same repositories are also reachable fully qualified as
// 10.1.230.1:5000/<name> (an insecure registry for every node).
const (
	// ImageRayVLLM plays the seeds' image: vLLM and Ray (simnode) in one image.
	ImageRayVLLM = "hellohal2064/vllm-qwen3.5-gb10:latest"
	// ImageNoRay is a vLLM image without Ray, as vLLM images from 0.18/0.19 on.
	ImageNoRay = "vllm/vllm-openai:v0.19.0"
	// ImageBig is ImageRayVLLM plus a large incompressible layer (slow to pull).
	ImageBig = "rayformlab/vllm-large:latest"
)

// Config is what Up builds. The zero value plus a Simnode path is a valid
// two-node DGX Spark lab.
type Config struct {
	// Name is the lab id; every namespace, directory and process of the lab
	// carries it. Default "rflab".
	Name string
	// Dir is the state directory (default /tmp/rayform-lab-<Name>). Down removes it.
	Dir string
	// CacheDir keeps built image layers between labs (default
	// /tmp/rayform-lab-cache); Down leaves it.
	CacheDir string
	// Nodes is the number of nodes (default 2, at most MaxNodes).
	Nodes int
	// NoDocker skips dockerd and the registry (a transport-only lab).
	NoDocker bool
	// FabricIfname names every node's fabric interface (default enp1s0f1np1).
	FabricIfname string
	// FabricMTU is the fabric interfaces' MTU (default 1500).
	FabricMTU int
	// GPUs, GPUModel, MemoryGiB and Unified describe every node's hardware.
	// Defaults: 1 × NVIDIA GB10 with 119.70 GiB of unified memory. GPUs and
	// Unified are pointers so 0 and false can be told from unset.
	GPUs      *int
	GPUModel  string
	MemoryGiB float64
	Unified   *bool
	// Overrides change one node: "spark2.fabric-ifname=enP2p1s0f1np1",
	// "spark2.gpus=0", "spark2.toolkit=false" (no nvidia-container-runtime-hook),
	// "spark1.memory-gib=128", "spark1.gpu-model=NVIDIA H100", "spark1.unified=false",
	// "spark2.model-disk=16M" (that node's model disk; see ModelDisk).
	Overrides []string
	// Delay is added to every packet a node sends on its management link.
	Delay time.Duration
	// Loss drops that percentage (0-100) of what a node sends on its management link.
	Loss float64
	// Timing overrides simnode's simulated durations on every node (keys of
	// simnode's hardware "timing": weight_load, graph_capture, c10d_timeout,
	// tokens_per_second, ...), e.g. {"weight_load": "1s"}.
	Timing map[string]string
	// Cut lists nodes whose fabric port is down from the start.
	Cut []string
	// ModelDisk, when positive, is the size in bytes of every node's model
	// disk: the node's model cache (ModelCacheMount) is a tmpfs of that
	// size, so staging a model can fill it. Zero: a directory on the lab
	// directory's filesystem.
	ModelDisk int64
	// NoModelSeed leaves every node's model cache empty; by default Up
	// places a complete copy of HubRepoTiny on the head (Lab.Seeded).
	NoModelSeed bool
	// HubBigMiB is the size of the lab hub's HubRepoBig (default
	// DefaultHubBigMiB).
	HubBigMiB int
	// BigImageMiB is the size of ImageBig's filler layer (default 256).
	BigImageMiB int
	// Torch puts this machine's python3 and python3-torch (Debian's CPU
	// build, real c10d and Gloo) into ImageRayVLLM and ImageBig, so that
	// rayform's data-plane check runs real PyTorch in the Ray containers
	// (about 600 MiB per node unpacked). Without it the lab's rayform.hcl
	// turns the check off.
	Torch bool
	// RealRay puts the real Ray (ray[default] RayVersion from PyPI, pinned
	// in labimage/ray-lock.txt) into ImageRayVLLM and ImageBig instead of
	// simnode's model of it: `ray start`, the GCS, raylets, the dashboard
	// and `ray list nodes` are Ray's own, and Ray counts the node's GPUs
	// through the image's libnvidia-ml.so.1 shim. Implies Torch. Without it
	// the lab runs simnode's Ray (the fast mode).
	RealRay bool
	// RealVLLM puts the real vLLM (VLLMVersion's CPU build from PyPI,
	// pinned in labimage/vllm-lock.txt; see vllm.go) into ImageRayVLLM and
	// ImageBig on top of the real Ray, which it implies: `vllm serve` in
	// the Ray containers is vLLM's own. The lab hub then also serves
	// HubRepoLlama, a tiny Llama that vLLM loads and runs, and the lab's
	// rayform.hcl serves it. Without it simnode plays vLLM.
	RealVLLM bool
	// Simnode is the simnode binary (built with CGO_ENABLED=0). Required.
	Simnode string
	// Busybox is a statically linked busybox (default /usr/bin/busybox).
	Busybox string
	// SupervisorCommand is the argv that runs Supervise; Up appends the lab
	// directory. Default: this executable with SuperviseCommand (rflab's
	// hidden subcommand; a test binary dispatches it in TestMain with
	// SupervisorMain).
	SupervisorCommand []string
	// Events, when set, receives progress events.
	Events func(Event)
}

// Event reports one finished step of Up, Down or a node operation.
type Event struct {
	Step    string
	Detail  string
	Elapsed time.Duration
}

var (
	nameRE   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	ifnameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,14}$`)
)

// withDefaults validates c and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if !nameRE.MatchString(c.Name) {
		return c, fmt.Errorf("lab name %q: want a lowercase letter then up to 19 of [a-z0-9-]", c.Name)
	}
	if c.Dir == "" {
		c.Dir = DefaultDir(c.Name)
	}
	if !filepath.IsAbs(c.Dir) {
		abs, err := filepath.Abs(c.Dir)
		if err != nil {
			return c, fmt.Errorf("lab dir %q: %w", c.Dir, err)
		}
		c.Dir = abs
	}
	c.Dir = filepath.Clean(c.Dir)
	if c.Dir == "/" || c.Dir == os.TempDir() {
		return c, fmt.Errorf("lab dir %q: refusing a system directory (Down removes it)", c.Dir)
	}
	// The longest unix socket dockerd's containerd creates under the lab dir.
	if sock := filepath.Join(c.Dir, "spark64", "exec", "containerd", "containerd.sock.ttrpc"); len(sock) > 100 {
		return c, fmt.Errorf("lab dir %q is too long for unix socket paths (%d > 100 bytes for %s)", c.Dir, len(sock), sock)
	}
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(os.TempDir(), "rayform-lab-cache")
	}
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		return c, fmt.Errorf("-nodes %d: want 1 to %d", c.Nodes, MaxNodes)
	}
	if c.FabricIfname == "" {
		c.FabricIfname = DefaultFabricIfname
	}
	if err := checkIfname(c.FabricIfname); err != nil {
		return c, err
	}
	if c.FabricMTU == 0 {
		c.FabricMTU = DefaultFabricMTU
	}
	if c.FabricMTU < 576 || c.FabricMTU > 65535 {
		return c, fmt.Errorf("fabric MTU %d: want 576 to 65535", c.FabricMTU)
	}
	if c.GPUs == nil {
		n := DefaultGPUs
		c.GPUs = &n
	}
	if *c.GPUs < 0 {
		return c, fmt.Errorf("-gpus %d: want 0 or more", *c.GPUs)
	}
	if c.GPUModel == "" {
		c.GPUModel = DefaultGPUModel
	}
	if c.MemoryGiB == 0 {
		c.MemoryGiB = DefaultMemoryGiB
	}
	if c.MemoryGiB < 0 {
		return c, fmt.Errorf("-memory-gib %v: want a positive size", c.MemoryGiB)
	}
	if c.Unified == nil {
		t := true
		c.Unified = &t
	}
	if c.Delay < 0 || c.Delay > 10*time.Second {
		return c, fmt.Errorf("-delay %v: want 0 to 10s", c.Delay)
	}
	if c.Loss < 0 || c.Loss > 100 {
		return c, fmt.Errorf("-loss %v: want a percentage from 0 to 100", c.Loss)
	}
	if c.BigImageMiB == 0 {
		c.BigImageMiB = DefaultBigImageMiB
	}
	if c.BigImageMiB < 1 || c.BigImageMiB > 8192 {
		return c, fmt.Errorf("big image size %d MiB: want 1 to 8192", c.BigImageMiB)
	}
	if c.ModelDisk < 0 {
		return c, fmt.Errorf("-model-disk %d: want a positive size", c.ModelDisk)
	}
	if c.HubBigMiB == 0 {
		c.HubBigMiB = DefaultHubBigMiB
	}
	if c.HubBigMiB < 8 || c.HubBigMiB > 1<<20 {
		return c, fmt.Errorf("hub big repository size %d MiB: want 8 to %d", c.HubBigMiB, 1<<20)
	}
	if c.Busybox == "" {
		c.Busybox = "/usr/bin/busybox"
	}
	return c, nil
}

// DefaultDir is the state directory of the lab called name when none is given.
func DefaultDir(name string) string {
	return filepath.Join(os.TempDir(), "rayform-lab-"+name)
}

func checkIfname(name string) error {
	if !ifnameRE.MatchString(name) || name == "lo" || name == MgmtIfname {
		return fmt.Errorf("interface name %q: want up to 15 of [A-Za-z0-9_.-], not lo or %s", name, MgmtIfname)
	}
	return nil
}

// NodeName is the name of node i (0-based): spark1, spark2, ...
func NodeName(i int) string { return "spark" + strconv.Itoa(i+1) }

// MgmtIP is node i's management address (10.1.230.180 + i).
func MgmtIP(i int) string { return MgmtPrefix + strconv.Itoa(MgmtFirstHost+i) }

// FabricIP is node i's fabric address (192.168.200.12 + i).
func FabricIP(i int) string { return FabricPrefix + strconv.Itoa(FabricFirst+i) }

// ClientIP is the client's management address, the nodes' default gateway.
func ClientIP() string { return MgmtPrefix + strconv.Itoa(MgmtClientHost) }

// RegistryAddr is the lab registry's host:port on the management network.
func RegistryAddr() string { return ClientIP() + ":" + strconv.Itoa(RegistryPort) }

// nodes computes the node list from a defaulted config, applying Overrides
// and Cut.
func (c Config) nodes() ([]Node, error) {
	out := make([]Node, c.Nodes)
	index := map[string]int{}
	for i := range out {
		name := NodeName(i)
		index[name] = i
		dir := filepath.Join(c.Dir, name)
		out[i] = Node{
			Name:         name,
			Head:         i == 0,
			Netns:        c.Name + "-" + name,
			MgmtIfname:   MgmtIfname,
			MgmtIP:       MgmtIP(i),
			FabricIfname: c.FabricIfname,
			FabricIP:     FabricIP(i),
			FabricMTU:    c.FabricMTU,
			GPUs:         *c.GPUs,
			GPUModel:     c.GPUModel,
			MemoryGiB:    c.MemoryGiB,
			Unified:      *c.Unified,
			Toolkit:      true,
			Dir:          dir,
			BinDir:       filepath.Join(dir, "bin"),
			Home:         filepath.Join(dir, "home"),
			Hardware:     filepath.Join(dir, "hardware.json"),
			ModelDisk:    c.ModelDisk,
		}
		if !c.NoDocker {
			out[i].DockerHost = "unix://" + filepath.Join(dir, "docker.sock")
		}
	}
	for _, o := range c.Overrides {
		node, kv, ok := strings.Cut(o, ".")
		key, val, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 {
			return nil, fmt.Errorf("override %q: want NODE.KEY=VALUE, e.g. spark2.fabric-ifname=enP2p1s0f1np1", o)
		}
		i, found := index[node]
		if !found {
			return nil, fmt.Errorf("override %q: no node %q in a %d-node lab", o, node, c.Nodes)
		}
		if err := out[i].set(key, val); err != nil {
			return nil, fmt.Errorf("override %q: %w", o, err)
		}
	}
	for _, name := range c.Cut {
		i, found := index[name]
		if !found {
			return nil, fmt.Errorf("-cut %q: no such node in a %d-node lab", name, c.Nodes)
		}
		out[i].Cut = true
	}
	return out, nil
}

func (n *Node) set(key, val string) error {
	switch key {
	case "fabric-ifname":
		if err := checkIfname(val); err != nil {
			return err
		}
		n.FabricIfname = val
	case "gpus":
		v, err := strconv.Atoi(val)
		if err != nil || v < 0 {
			return fmt.Errorf("gpus %q: want a count", val)
		}
		n.GPUs = v
	case "gpu-model":
		n.GPUModel = val
	case "memory-gib":
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("memory-gib %q: want a positive number", val)
		}
		n.MemoryGiB = v
	case "model-disk":
		v, err := ParseSize(val)
		if err != nil {
			return err
		}
		n.ModelDisk = v
	case "unified", "toolkit":
		v, err := strconv.ParseBool(val)
		if err != nil {
			return fmt.Errorf("%s %q: want true or false", key, val)
		}
		if key == "unified" {
			n.Unified = v
		} else {
			n.Toolkit = v
		}
	default:
		return fmt.Errorf("unknown key %q (want fabric-ifname, gpus, gpu-model, memory-gib, unified, toolkit or model-disk)", key)
	}
	return nil
}
