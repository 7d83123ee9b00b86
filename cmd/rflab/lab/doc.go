// Package lab brings up a local test lab that looks, from rayform's point of
// view, like a set of DGX Spark class GPU hosts reached over SSH.
//
// # Topology
//
// Every node (spark1 is the head, then spark2, ...) is a Linux network
// namespace NAME-sparkN running the real OpenSSH sshd (its own ed25519 host
// key, its own UTS namespace so `hostname` is the node's name) and, unless
// disabled, its own Debian dockerd (own data root, exec root and socket,
// started with nsenter --net so containers with --network host live on the
// node's addresses). Two networks, as in the seeds:
//
//   - management 10.1.230.0/24 on eth0: nodes .180, .181, ...; the client
//     namespace NAME-client holds the bridge with .1, the nodes' default
//     gateway (so a node's default route source is its management address).
//     The nodes' bridge ports are isolated: a node reaches the client and the
//     registry, never another node's management address. The client routes
//     nothing: anything a node sends it for another address is refused at
//     once (ICMP administratively prohibited), so no traffic leaves the lab.
//   - fabric 192.168.200.0/24 on enp1s0f1np1 (per node configurable): head
//     .12, workers .13, ...; a bridge in the switch namespace NAME-fabric.
//     The client has no fabric address.
//
// The root namespace gets no link or route into the lab; rayform and the
// tests run in the client namespace (`ip netns exec NAME-client ...`).
//
// # Docker, GPUs and images
//
// SSH sessions get DOCKER_HOST (the node's dockerd), SIMNODE_HARDWARE (the
// node's hardware.json in simnode's format) and a PATH that starts with the
// node's bin directory, where nvidia-smi, ibdev2netdev and
// nvidia-container-runtime-hook are links to simnode. dockerd finds the hook
// on its PATH and registers its NVIDIA driver, so `docker run --gpus all`
// works as on a GPU host (and fails with docker's own "could not select
// device driver" on a node built with toolkit=false).
//
// Each node's sshd runs in its own mount namespace where a file rendered
// from the node's simulated memory (119.70 GiB by default) is bind-mounted
// over /proc/meminfo, as LXCFS does for containers: SSH sessions and `lab
// exec` see the node's MemTotal and MemAvailable, not this machine's.
// dockerd and the root namespace keep the real /proc/meminfo.
//
// A real registry (Debian's docker-registry) serves on 10.1.230.1:5000 in the
// client namespace. Its images are built here without Docker (busybox-static
// with its applets and a bash stand-in, plus simnode as ray, vllm and
// nvidia-smi), cached in the cache directory, and laid out in the registry's
// storage: ImageRayVLLM (the seeds' hellohal2064/vllm-qwen3.5-gb10),
// ImageNoRay (no ray) and ImageBig (a large incompressible layer). Every
// node's dockerd has the registry as its registry mirror, so the unqualified
// Docker Hub names pull through it for real; 10.1.230.1:5000/<name> works too.
//
// With Config.RealRay (lab up -ray real) the Ray images carry the real Ray
// 2.53.0 instead of simnode's ray (ray.go: wheels pinned in
// labimage/ray-lock.txt, on the torch layer's python3) and a
// libnvidia-ml.so.1 shim (labimage/libnvidia-ml.c) through which Ray counts
// the GPUs the container toolkit hook gave the container.
//
// The supervisor serves a model hub on 10.1.230.1:5080 (HubAddr) in the
// client namespace: the part of the Hugging Face Hub API huggingface_hub
// uses (hub.go), with generated repositories (LabHubRepos: HubRepoTiny,
// public; HubRepoBig, gated by the token in DIR/hub/token), built and
// hashed on their first request.
//
// Every node has its own model disk: its sshd (so every SSH session and
// `lab exec`) and its dockerd (so its containers' bind mounts) see the
// node's own NODEDIR/huggingface at ModelCacheMount
// (/var/lib/rayform/huggingface; the hub cache ModelCacheDir is its hub/,
// the model kind's default cache_dir), a tmpfs of Config.ModelDisk bytes
// when set (modelcache.go). Unless Config.NoModelSeed, Up places a
// complete copy of HubRepoTiny in the head's cache only, as
// snapshot_download lays it out (Lab.Seeded); the other nodes start
// empty. Lab.HubEndpoint and HubToken are what a model block needs to
// download from the lab hub.
//
// What a test of the model kind uses: Lab.HubEndpoint (HF_ENDPOINT),
// HubToken (reads HubRepoBig, gated) and HubNoAccessToken (403 for it),
// Lab.Seeded (Repo, Revision, Commit, Bytes, Node, CacheDir: the seeded
// copy), ModelCacheDir (every node's hub cache as its SSH sessions and
// containers see it; the model kind's default cache_dir),
// Node.ModelCacheHostDir (the same directory from this machine: check or
// corrupt a node's files there), Node.ModelDisk and Config.ModelDisk /
// the override NODE.model-disk=SIZE (a node's disk that can fill),
// Config.NoModelSeed (no node has the model), and LabHubRepos(HubBigMiB)
// with HubRepo.Files (each file's size and sha256, as the hub serves it).
//
// # Processes and files
//
// All lab processes are children of one supervisor process per lab (see
// Supervise), a child subreaper that reaps them and hosts the NFQUEUE
// handlers that delay management traffic. The lab directory (default
// /tmp/rayform-lab-NAME) holds lab.json (the topology; Load reads it),
// ssh_config, known_hosts, id_ed25519, rayform.hcl and per-node files and
// logs. Down removes every namespace, process, mount, cgroup and file the
// lab made; the image cache is kept.
//
// The package is Linux-only (its files build only on Linux); on other systems
// it is empty.
package lab
