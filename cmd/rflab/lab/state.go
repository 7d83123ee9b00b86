//go:build linux

package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rayform/rayform/engine/state/jsonfile"
)

// StateFile is the name of the topology file in the lab directory.
const StateFile = "lab.json"

// Lab describes a running lab; it is what lab.json holds.
type Lab struct {
	Name string `json:"name"`
	Dir  string `json:"dir"`
	// ClientNetns is where rayform and the tests run (no route out of the lab).
	ClientNetns string `json:"client_netns"`
	// ClientIP is the client's management address and the nodes' gateway.
	ClientIP string `json:"client_ip"`
	// FabricNetns holds the fabric switch (a bridge, no addresses).
	FabricNetns string `json:"fabric_netns"`
	// Registry is host:port of the lab registry ("" without Docker).
	Registry string `json:"registry,omitempty"`
	// Images maps a role (ray-vllm, no-ray, big) to the image name to use.
	Images map[string]string `json:"images,omitempty"`
	Docker bool              `json:"docker"`
	// Torch is set when the Ray image has python3 and torch (Config.Torch).
	Torch bool `json:"torch,omitempty"`
	// RealRay is set when the Ray image carries the real Ray (Config.RealRay).
	RealRay bool   `json:"real_ray,omitempty"`
	Nodes   []Node `json:"nodes"`
	// Delay and Loss are applied to every node's management egress.
	Delay time.Duration `json:"delay_ns,omitempty"`
	Loss  float64       `json:"loss_percent,omitempty"`
	// Timing is simnode's timing overrides in every node's hardware.json.
	Timing map[string]string `json:"timing,omitempty"`
	// ModelDisk is the size of every node's model cache (a tmpfs), 0 for
	// a directory on the lab directory's filesystem (Config.ModelDisk).
	ModelDisk int64 `json:"model_disk,omitempty"`
	// HubEndpoint is the lab hub's URL, HF_ENDPOINT for the nodes and the
	// client ("http://" + HubAddr()); its gated repository's token is
	// HubToken(), never in this file. HubBigMiB is HubRepoBig's size
	// (LabHubRepos(HubBigMiB) are the hub's repositories).
	HubEndpoint string `json:"hub_endpoint,omitempty"`
	HubBigMiB   int    `json:"hub_big_mib,omitempty"`
	// Seeded is the model lab up placed on the head's cache, nil when
	// none (Config.NoModelSeed).
	Seeded *SeededModel `json:"seeded_model,omitempty"`
	// Files written for clients of the lab.
	SSHConfig  string `json:"ssh_config"`
	KnownHosts string `json:"known_hosts"`
	Key        string `json:"identity_file"`
	RayformHCL string `json:"rayform_hcl"`
	// ClientHome is a HOME for the client namespace whose ~/.ssh holds the
	// lab's ssh config, known_hosts and key.
	ClientHome string `json:"client_home"`
	// Supervisor is the pid of the lab's supervisor process and its socket.
	SupervisorPID    int    `json:"supervisor_pid"`
	SupervisorSocket string `json:"supervisor_socket"`
	Created          time.Time
}

// Node is one simulated host.
type Node struct {
	Name string `json:"name"`
	Head bool   `json:"head,omitempty"`
	// Netns is the node's network namespace (/var/run/netns/<Netns>).
	Netns        string `json:"netns"`
	MgmtIfname   string `json:"mgmt_ifname"`
	MgmtIP       string `json:"mgmt_ip"`
	FabricIfname string `json:"fabric_ifname"`
	FabricIP     string `json:"fabric_ip"`
	FabricMTU    int    `json:"fabric_mtu"`
	// Hardware simulated by simnode (Hardware is the node's hardware.json).
	GPUs      int     `json:"gpus"`
	GPUModel  string  `json:"gpu_model"`
	MemoryGiB float64 `json:"memory_gib"`
	Unified   bool    `json:"unified"`
	// Toolkit reports whether nvidia-container-runtime-hook is on dockerd's
	// PATH (without it `docker run --gpus all` fails as on a host without the
	// NVIDIA container toolkit).
	Toolkit bool `json:"toolkit"`
	// Dir holds the node's files; BinDir is first on its PATH; Home is HOME
	// of SSH sessions.
	Dir      string `json:"dir"`
	BinDir   string `json:"bin_dir"`
	Home     string `json:"home"`
	Hardware string `json:"hardware"`
	// DockerHost is the node's dockerd ("" without Docker); SSH sessions get
	// it as DOCKER_HOST.
	DockerHost string `json:"docker_host,omitempty"`
	// Cut is true while the node's fabric port is down; PoweredOff while the
	// node is off.
	// ModelDisk is the size of the node's model disk (a tmpfs at its
	// ModelCacheHostDir), 0 for no limit (Config.ModelDisk, or the
	// override NODE.model-disk=SIZE).
	ModelDisk  int64 `json:"model_disk,omitempty"`
	Cut        bool  `json:"cut,omitempty"`
	PoweredOff bool  `json:"powered_off,omitempty"`
}

// NetnsPath is the bind mount of the node's network namespace.
func (n Node) NetnsPath() string { return netnsPath(n.Netns) }

func netnsPath(name string) string { return filepath.Join("/var/run/netns", name) }

// Node returns the node called name.
func (l *Lab) Node(name string) (*Node, error) {
	for i := range l.Nodes {
		if l.Nodes[i].Name == name {
			return &l.Nodes[i], nil
		}
	}
	names := make([]string, len(l.Nodes))
	for i, n := range l.Nodes {
		names[i] = n.Name
	}
	return nil, fmt.Errorf("lab %s has no node %q (nodes: %v)", l.Name, name, names)
}

// ErrNotUp is returned by Load when the lab directory holds no lab.json.
var ErrNotUp = errors.New("lab is not up")

// Load reads the lab in dir.
func Load(dir string) (*Lab, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotUp)
	}
	if err != nil {
		return nil, fmt.Errorf("read lab state: %w", err)
	}
	var l Lab
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, StateFile), err)
	}
	return &l, nil
}

// save writes lab.json atomically.
func (l *Lab) save() error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return fmt.Errorf("encode lab state: %w", err)
	}
	return jsonfile.WriteAtomic(filepath.Join(l.Dir, StateFile), append(b, '\n'), 0o644)
}

// SeededModel is a complete copy of a lab hub repository that lab up
// placed in one node's model cache, as huggingface_hub's snapshot_download
// would have: HubRepoTiny's "main" on the head, so that staging has a
// source and the other nodes have nothing.
type SeededModel struct {
	// Repo is the repository id (HubRepoTiny), Revision "main", Commit
	// what it resolves to (refs/main in the cache).
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	Commit   string `json:"commit"`
	// Bytes is the size of all its files.
	Bytes int64 `json:"bytes"`
	// Node is the node holding it (the head); CacheDir the hub cache it is
	// in as the nodes see it (ModelCacheDir): the copy is
	// CacheDir/models--ORG--NAME on Node, and Node's ModelCacheHostDir()
	// + "/hub/models--ORG--NAME" from the root mount namespace.
	Node     string `json:"node"`
	CacheDir string `json:"cache_dir"`
}
