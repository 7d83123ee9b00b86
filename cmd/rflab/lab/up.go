//go:build linux

package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayform/rayform/engine/state/jsonfile"
)

// tools are the host programs the lab runs, resolved to absolute paths.
type tools struct {
	ip, nsenter, unshare, sh, sshd, dockerd, registry, iptablesRestore string
}

// hostTools checks that the host can run a lab and resolves the programs.
func hostTools(docker, delay bool) (tools, error) {
	if runtime.GOOS != "linux" {
		return tools{}, fmt.Errorf("the lab needs Linux (network namespaces), not %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return tools{}, errors.New("the lab needs root: it creates network namespaces and runs sshd and dockerd (try sudo)")
	}
	var t tools
	var missing []string
	look := func(dst *string, name, pkg string) {
		p, err := exec.LookPath(name)
		if err != nil {
			for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
				if _, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
					p, err = filepath.Join(dir, name), nil
					break
				}
			}
		}
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", name, pkg))
			return
		}
		*dst = p
	}
	look(&t.ip, "ip", "iproute2")
	look(&t.nsenter, "nsenter", "util-linux")
	look(&t.unshare, "unshare", "util-linux")
	look(&t.sh, "sh", "dash")
	look(&t.sshd, "sshd", "openssh-server")
	if docker {
		look(&t.dockerd, "dockerd", "docker.io")
		look(&t.registry, "docker-registry", "docker-registry")
	}
	if delay {
		look(&t.iptablesRestore, "iptables-restore", "iptables")
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("the lab needs: %s", strings.Join(missing, ", "))
	}
	return t, nil
}

func (c Config) emit(start time.Time, step, detail string) {
	if c.Events != nil {
		c.Events(Event{Step: step, Detail: detail, Elapsed: time.Since(start)})
	}
}

// Up brings the lab described by cfg up and returns it. It is idempotent: if
// the lab is already up and healthy with the same shape it is returned as is;
// a broken lab of the same name is torn down and rebuilt. On failure Up tears
// down what it made.
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t, err := hostTools(!cfg.NoDocker, cfg.Delay > 0 || cfg.Loss > 0)
	if err != nil {
		return nil, err
	}
	if cfg.Simnode == "" {
		return nil, fmt.Errorf("%w: build it (CGO_ENABLED=0 go build -o bin/simnode ./cmd/simnode) and pass its path", errNoSimnode)
	}
	nodes, err := cfg.nodes()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if old, err := Load(cfg.Dir); err == nil {
		if herr := old.Health(ctx); herr == nil {
			if old.sameShape(cfg, nodes) {
				cfg.emit(start, "up", "already up")
				return old, nil
			}
			return nil, fmt.Errorf("lab %s is already up in %s with a different shape (%d nodes); run `rflab down -name %s` first", old.Name, old.Dir, len(old.Nodes), old.Name)
		} else {
			cfg.emit(start, "repair", "existing lab is unhealthy ("+herr.Error()+"); rebuilding")
		}
	}
	if err := Down(ctx, cfg); err != nil {
		return nil, fmt.Errorf("clear leftovers of lab %s: %w", cfg.Name, err)
	}
	l, err := up(ctx, cfg, t, nodes, start)
	if err != nil {
		// Keep the logs of what failed out of the directory Down removes.
		derr := Down(context.WithoutCancel(ctx), cfg)
		return nil, errors.Join(err, derr)
	}
	cfg.emit(start, "up", fmt.Sprintf("%d nodes", len(l.Nodes)))
	return l, nil
}

// sameShape reports whether the running lab was built from an equivalent config.
func (l *Lab) sameShape(cfg Config, nodes []Node) bool {
	if len(l.Nodes) != len(nodes) || l.Docker != !cfg.NoDocker || l.Delay != cfg.Delay || l.Loss != cfg.Loss ||
		!maps.Equal(l.Timing, cfg.Timing) || l.ModelDisk != cfg.ModelDisk ||
		(l.Seeded == nil) != cfg.NoModelSeed || l.HubBigMiB != cfg.HubBigMiB || l.RealVLLM != (cfg.RealVLLM && !cfg.NoDocker) {
		return false
	}
	for i, n := range nodes {
		o := l.Nodes[i]
		if o.FabricIfname != n.FabricIfname || o.FabricMTU != n.FabricMTU || o.GPUs != n.GPUs ||
			o.GPUModel != n.GPUModel || o.MemoryGiB != n.MemoryGiB || o.Unified != n.Unified || o.Toolkit != n.Toolkit || o.ModelDisk != n.ModelDisk {
			return false
		}
	}
	return true
}

func up(ctx context.Context, cfg Config, t tools, nodes []Node, start time.Time) (*Lab, error) {
	l := &Lab{
		Name:             cfg.Name,
		Dir:              cfg.Dir,
		ClientNetns:      cfg.Name + "-client",
		ClientIP:         ClientIP(),
		FabricNetns:      cfg.Name + "-fabric",
		Docker:           !cfg.NoDocker,
		Torch:            (cfg.Torch || cfg.RealRay || cfg.RealVLLM) && !cfg.NoDocker,
		RealRay:          (cfg.RealRay || cfg.RealVLLM) && !cfg.NoDocker,
		RealVLLM:         cfg.RealVLLM && !cfg.NoDocker,
		Nodes:            nodes,
		Delay:            cfg.Delay,
		Loss:             cfg.Loss,
		Timing:           cfg.Timing,
		ModelDisk:        cfg.ModelDisk,
		HubEndpoint:      "http://" + HubAddr(),
		HubBigMiB:        cfg.HubBigMiB,
		SSHConfig:        filepath.Join(cfg.Dir, "ssh_config"),
		KnownHosts:       filepath.Join(cfg.Dir, "known_hosts"),
		Key:              filepath.Join(cfg.Dir, "id_ed25519"),
		RayformHCL:       filepath.Join(cfg.Dir, "rayform.hcl"),
		ClientHome:       filepath.Join(cfg.Dir, "client-home"),
		SupervisorSocket: filepath.Join(cfg.Dir, supervisorSock),
		Created:          time.Now().UTC().Truncate(time.Second),
	}
	if l.Docker {
		l.Registry = RegistryAddr()
		l.Images = map[string]string{"ray-vllm": ImageRayVLLM, "no-ray": ImageNoRay, "big": ImageBig}
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "bin"), 0o755); err != nil {
		return nil, fmt.Errorf("create lab dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, markerFile), []byte(cfg.Name+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("mark lab dir: %w", err)
	}
	simnode := filepath.Join(cfg.Dir, "bin", "simnode")
	if err := copyFile(cfg.Simnode, simnode); err != nil {
		return nil, fmt.Errorf("install simnode from %s: %w", cfg.Simnode, err)
	}
	if err := os.Chmod(simnode, 0o755); err != nil {
		return nil, err
	}

	// Images build (or come from the cache) while the network is wired.
	var images []builtImage
	var rayStats, vllmStats RayBuildStats
	imgErr := make(chan error, 1)
	if l.Docker {
		go func() {
			var err error
			images, err = buildImages(ctx, cfg.CacheDir, cfg.Busybox, simnode, cfg.BigImageMiB,
				imageOptions{torch: l.Torch, realRay: l.RealRay, realVLLM: l.RealVLLM, rayStats: &rayStats, vllmStats: &vllmStats})
			if err == nil && l.RealVLLM {
				// After the images: the vLLM layer's build put the
				// script's wheels into the cache.
				l.HubLlamaDir, err = makeTinyLlama(ctx, cfg.CacheDir)
			}
			imgErr <- err
		}()
	} else {
		imgErr <- nil
	}

	if err := l.wire(ctx); err != nil {
		<-imgErr
		return nil, err
	}
	cfg.emit(start, "network", fmt.Sprintf("%d namespaces, management %s0/24, fabric %s0/24", len(nodes)+2, MgmtPrefix, FabricPrefix))

	hostKeys, err := l.writeNodeFiles(simnode, cfg.Timing)
	if err != nil {
		<-imgErr
		return nil, err
	}
	if err := <-imgErr; err != nil {
		return nil, fmt.Errorf("build lab images: %w", err)
	}
	if rayStats.Files > 0 {
		cfg.emit(start, "ray layer", fmt.Sprintf("ray %s built: download %s, pip install %s, layer %s; %d files, %.0f MiB unpacked",
			RayVersion, rayStats.Download.Round(time.Millisecond), rayStats.Install.Round(time.Millisecond),
			rayStats.Write.Round(time.Millisecond), rayStats.Files, float64(rayStats.Bytes)/(1<<20)))
	}
	if vllmStats.Files > 0 {
		cfg.emit(start, "vllm layer", fmt.Sprintf("vllm %s built: download %s, pip install %s, layer %s; %d files, %.0f MiB unpacked",
			VLLMVersion, vllmStats.Download.Round(time.Millisecond), vllmStats.Install.Round(time.Millisecond),
			vllmStats.Write.Round(time.Millisecond), vllmStats.Files, float64(vllmStats.Bytes)/(1<<20)))
	}
	if l.Docker {
		regRoot := filepath.Join(cfg.Dir, "registry")
		if err := populateRegistry(cfg.CacheDir, filepath.Join(regRoot, "data"), images); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(regRoot, "config.yml"), []byte(registryConfig(filepath.Join(regRoot, "data"), l.Registry)), 0o644); err != nil {
			return nil, fmt.Errorf("write registry config: %w", err)
		}
		cfg.emit(start, "images", fmt.Sprintf("%d images in the registry storage", len(images)))
	}

	pid, err := startSupervisor(ctx, cfg.SupervisorCommand, cfg.Dir)
	if err != nil {
		return nil, err
	}
	l.SupervisorPID = pid
	// Record what exists so far: Down can tear down a half-built lab.
	if err := l.save(); err != nil {
		return nil, err
	}
	sup := newSupClient(l.SupervisorSocket)
	if l.Docker {
		if err := l.startRegistry(ctx, sup, t); err != nil {
			return nil, err
		}
	}
	if err := l.startHub(ctx, sup); err != nil {
		return nil, err
	}
	if err := l.startNodes(ctx, sup, t, l.Nodes); err != nil {
		return nil, err
	}
	if !cfg.NoModelSeed {
		if err := l.seedModel(); err != nil {
			return nil, err
		}
		cfg.emit(start, "model", fmt.Sprintf("%s (%.0f MiB) in %s's cache only", l.Seeded.Repo, float64(l.Seeded.Bytes)/(1<<20), l.Seeded.Node))
	}
	cfg.emit(start, "daemons", fmt.Sprintf("sshd%s on %d nodes", map[bool]string{true: " and dockerd", false: ""}[l.Docker], len(nodes)))
	if l.Delay > 0 || l.Loss > 0 {
		if err := l.applyImpairments(ctx, sup, t); err != nil {
			return nil, err
		}
		cfg.emit(start, "impair", fmt.Sprintf("delay %v, loss %v%% on management egress", l.Delay, l.Loss))
	}
	if err := l.writeClientFiles(hostKeys); err != nil {
		return nil, err
	}
	if err := l.save(); err != nil {
		return nil, err
	}
	return l, nil
}

// wire creates the namespaces, links, bridges, addresses and routes.
func (l *Lab) wire(ctx context.Context) error {
	var add []string
	add = append(add, "netns add "+l.ClientNetns, "netns add "+l.FabricNetns)
	for _, n := range l.Nodes {
		add = append(add, "netns add "+n.Netns)
	}
	if err := ipBatch(ctx, "", add); err != nil {
		return fmt.Errorf("create namespaces: %w", err)
	}
	// No IPv6 in the lab: no router solicitations, no DAD noise.
	if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil {
		for _, ns := range append([]string{l.ClientNetns, l.FabricNetns}, l.nodeNetns()...) {
			for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
				if err := writeSysctl(netnsPath(ns), k, "1"); err != nil {
					return err
				}
			}
		}
	}
	for k, v := range map[string]string{"net/ipv4/ip_forward": "1", "net/ipv4/icmp_ratelimit": "0"} {
		if err := writeSysctl(netnsPath(l.ClientNetns), k, v); err != nil {
			return err
		}
	}
	// Links are created directly in their namespaces: the root namespace
	// never holds a lab interface.
	var links []string
	for _, n := range l.Nodes {
		links = append(links,
			fmt.Sprintf("link add %s-m netns %s type veth peer name %s netns %s", n.Name, l.ClientNetns, n.MgmtIfname, n.Netns),
			fmt.Sprintf("link add %s-f netns %s type veth peer name %s netns %s", n.Name, l.FabricNetns, n.FabricIfname, n.Netns))
	}
	if err := ipBatch(ctx, "", links); err != nil {
		return fmt.Errorf("create links: %w", err)
	}
	client := []string{
		"link set lo up",
		"link add mgmt0 type bridge",
		"link set mgmt0 up",
		fmt.Sprintf("addr add %s/24 dev mgmt0", l.ClientIP),
		// The client is the nodes' gateway but routes nothing: whatever a
		// node sends it for another address (a DNS server, Docker Hub, a
		// peer) is refused at once with ICMP "administratively prohibited"
		// (EHOSTUNREACH, fatal even for Go's UDP DNS client) instead of
		// vanishing into a timeout.
		"rule add pref 100 iif mgmt0 prohibit",
	}
	fabric := []string{
		"link set lo up",
		"link add fabric0 type bridge",
		"link set fabric0 up",
	}
	for _, n := range l.Nodes {
		// Isolated ports: nodes reach the client (gateway, registry) but not
		// each other's management addresses.
		client = append(client,
			fmt.Sprintf("link set %s-m master mgmt0", n.Name),
			fmt.Sprintf("link set dev %s-m type bridge_slave isolated on", n.Name),
			fmt.Sprintf("link set %s-m up", n.Name))
		fabric = append(fabric, fmt.Sprintf("link set %s-f mtu %d master fabric0", n.Name, n.FabricMTU))
		if !n.Cut {
			fabric = append(fabric, fmt.Sprintf("link set %s-f up", n.Name))
		}
	}
	errs := make(chan error, len(l.Nodes)+2)
	var wg sync.WaitGroup
	batch := func(ns string, lines []string) {
		defer wg.Done()
		if err := ipBatch(ctx, ns, lines); err != nil {
			errs <- fmt.Errorf("configure %s: %w", ns, err)
		}
	}
	wg.Add(2)
	go batch(l.ClientNetns, client)
	go batch(l.FabricNetns, fabric)
	for _, n := range l.Nodes {
		lines := []string{
			"link set lo up",
			fmt.Sprintf("link set %s up", n.MgmtIfname),
			fmt.Sprintf("addr add %s/24 dev %s", n.MgmtIP, n.MgmtIfname),
			fmt.Sprintf("link set %s mtu %d up", n.FabricIfname, n.FabricMTU),
			fmt.Sprintf("addr add %s/24 dev %s", n.FabricIP, n.FabricIfname),
			fmt.Sprintf("route add default via %s dev %s", l.ClientIP, n.MgmtIfname),
		}
		wg.Add(1)
		go batch(n.Netns, lines)
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func (l *Lab) nodeNetns() []string {
	out := make([]string, len(l.Nodes))
	for i, n := range l.Nodes {
		out[i] = n.Netns
	}
	return out
}

// writeNodeFiles writes keys, configs, hardware and bin directories, and
// creates each node's UTS namespace (its hostname). It returns the nodes'
// host public keys.
func (l *Lab) writeNodeFiles(simnode string, timing map[string]string) (map[string]string, error) {
	clientPub, err := ensureKey(l.Key, "rayform-lab-"+l.Name)
	if err != nil {
		return nil, err
	}
	authorized := filepath.Join(l.Dir, "authorized_keys")
	if err := os.WriteFile(authorized, []byte(clientPub+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write authorized_keys: %w", err)
	}
	// Debian's sshd refuses to start without its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("create /run/sshd: %w", err)
	}
	hostKeys := map[string]string{}
	for _, n := range l.Nodes {
		for _, d := range []string{n.Dir, n.BinDir, n.Home} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("create %s: %w", d, err)
			}
		}
		pub, err := ensureKey(filepath.Join(n.Dir, "ssh_host_ed25519_key"), "root@"+n.Name)
		if err != nil {
			return nil, err
		}
		hostKeys[n.Name] = pub
		if err := os.WriteFile(filepath.Join(n.Dir, "sshd_config"), []byte(n.sshdConfig(authorized)), 0o644); err != nil {
			return nil, fmt.Errorf("write sshd_config of %s: %w", n.Name, err)
		}
		hw, err := n.hardwareJSON(l.Name, timing)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(n.Hardware, hw, 0o644); err != nil {
			return nil, fmt.Errorf("write hardware of %s: %w", n.Name, err)
		}
		tools := []string{"nvidia-smi", "ibdev2netdev", "simnode"}
		if n.Toolkit {
			tools = append(tools, "nvidia-container-runtime-hook")
		}
		for _, name := range tools {
			p := filepath.Join(n.BinDir, name)
			_ = os.Remove(p)
			if err := os.Symlink(simnode, p); err != nil {
				return nil, fmt.Errorf("link %s: %w", p, err)
			}
		}
		if l.Docker {
			if err := os.WriteFile(filepath.Join(n.Dir, "daemon.json"), n.daemonJSON(l), 0o644); err != nil {
				return nil, fmt.Errorf("write daemon.json of %s: %w", n.Name, err)
			}
		}
		if err := newUTS(filepath.Join(n.Dir, "uts"), n.Name); err != nil {
			return nil, fmt.Errorf("hostname namespace of %s: %w", n.Name, err)
		}
	}
	return hostKeys, nil
}

// newUTS creates a UTS namespace with the given hostname and keeps it alive
// by bind-mounting it on path.
func newUTS(path, hostname string) error {
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with its new namespace
		if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		if err := unix.Sethostname([]byte(hostname)); err != nil {
			errc <- fmt.Errorf("sethostname: %w", err)
			return
		}
		if err := unix.Mount("/proc/thread-self/ns/uts", path, "", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	return <-errc
}

// daemonJSON renders the node's dockerd configuration.
func (n Node) daemonJSON(l *Lab) []byte {
	cfg := map[string]any{
		"data-root":           filepath.Join(n.Dir, "docker"),
		"exec-root":           filepath.Join(n.Dir, "exec"),
		"hosts":               []string{n.DockerHost},
		"pidfile":             filepath.Join(n.Dir, "docker.pid"),
		"iptables":            false,
		"ip-forward":          false,
		"ip-masq":             false,
		"bridge":              "none",
		"userland-proxy":      false,
		"shutdown-timeout":    3,
		"cgroup-parent":       l.Name + "-" + n.Name,
		"registry-mirrors":    []string{"http://" + l.Registry},
		"insecure-registries": []string{l.Registry},
		"storage-driver":      "overlay2",
		"log-level":           "warn",
		"labels":              []string{"dev.rayform.lab=" + l.Name, "dev.rayform.lab.node=" + n.Name},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return append(b, '\n')
}

func (l *Lab) startRegistry(ctx context.Context, sup *supClient, t tools) error {
	spec := procSpec{
		ID:   "registry",
		Argv: []string{t.nsenter, "--net=" + netnsPath(l.ClientNetns), "--", t.registry, "serve", filepath.Join(l.Dir, "registry", "config.yml")},
		Env:  []string{"PATH=" + stdPath},
		Log:  filepath.Join(l.Dir, "registry", "registry.log"),
	}
	if _, err := sup.start(ctx, spec); err != nil {
		return err
	}
	hc := l.clientHTTP()
	return waitFor(ctx, "registry on "+l.Registry, 30*time.Second, func(ctx context.Context) error {
		if err := l.procAlive(ctx, sup, "registry"); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.Registry+"/v2/", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		return nil
	})
}

// clientHTTP is an HTTP client whose connections are made from the client
// namespace.
func (l *Lab) clientHTTP() *http.Client {
	ns := netnsPath(l.ClientNetns)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialIn(ctx, ns, network, addr)
		},
		DisableKeepAlives: true,
	}}
}

// procAlive fails (permanently) when the supervisor reports id has exited.
func (l *Lab) procAlive(ctx context.Context, sup *supClient, id string) error {
	st, err := sup.procs(ctx)
	if err != nil {
		return err
	}
	for _, p := range st {
		if p.ID == id && !p.Running {
			return backoffStop{fmt.Errorf("%s exited (%s): %s", id, p.Exit, tail(p.Log, 15))}
		}
	}
	return nil
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 64<<10 {
		_, _ = f.Seek(-64<<10, io.SeekEnd)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func nodeProcID(node, what string) string { return node + "/" + what }

// startNodes starts sshd (and dockerd) on the nodes and waits until they answer.
func (l *Lab) startNodes(ctx context.Context, sup *supClient, t tools, nodes []Node) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(nodes))
	// startAndAwait starts p and, beside the other nodes' processes, waits
	// until it is alive and answers (ready), for at most timeout.
	startAndAwait := func(p procSpec, what string, timeout time.Duration, ready func(context.Context) error) error {
		if _, err := sup.start(ctx, p); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := waitFor(ctx, what, timeout, func(ctx context.Context) error {
				if err := l.procAlive(ctx, sup, p.ID); err != nil {
					return err
				}
				return ready(ctx)
			}); err != nil {
				errs <- err
			}
		}()
		return nil
	}
	for _, n := range nodes {
		uts := "--uts=" + filepath.Join(n.Dir, "uts")
		// Written at every boot: MemFree and the copied lines follow the host.
		if err := n.writeMeminfo(); err != nil {
			return err
		}
		if err := n.prepareModelCache(n.ModelDisk); err != nil {
			return err
		}
		// sshd (and so every session) sees the node's simulated
		// /proc/meminfo; dockerd below keeps the real one.
		sshd := procSpec{
			ID: nodeProcID(n.Name, "sshd"),
			Argv: append([]string{t.nsenter, uts, "--"}, n.withMounts(t.unshare, t.sh, true,
				[]string{t.ip, "netns", "exec", n.Netns, t.sshd, "-D", "-e", "-f", filepath.Join(n.Dir, "sshd_config")})...),
			Env: []string{"PATH=" + stdPath},
			Log: filepath.Join(n.Dir, "sshd.log"),
		}
		if err := startAndAwait(sshd, "sshd on "+n.Name, 30*time.Second, func(ctx context.Context) error { return l.sshBanner(ctx, n) }); err != nil {
			return err
		}
		if !l.Docker {
			continue
		}
		dockerd := procSpec{
			ID: nodeProcID(n.Name, "dockerd"),
			// Its own mount namespace: containers' bind mounts of the
			// model cache see the node's own copy (modelcache.go).
			Argv: append([]string{t.nsenter, uts, "--net=" + n.NetnsPath(), "--"},
				n.withMounts(t.unshare, t.sh, false, []string{t.dockerd, "--config-file", filepath.Join(n.Dir, "daemon.json")})...),
			Env: []string{
				"PATH=" + n.BinDir + ":" + stdPath,
				"SIMNODE_HARDWARE=" + n.Hardware,
				// Anything not in the lab goes to a closed port of the client:
				// dockerd never reaches past the lab, even for a missing image.
				"HTTP_PROXY=http://" + l.ClientIP + ":9",
				"HTTPS_PROXY=http://" + l.ClientIP + ":9",
				"NO_PROXY=" + MgmtPrefix + "0/24," + FabricPrefix + "0/24,localhost,127.0.0.1",
			},
			Log: filepath.Join(n.Dir, "dockerd.log"),
		}
		if err := startAndAwait(dockerd, "dockerd on "+n.Name, 60*time.Second, func(ctx context.Context) error { return dockerPing(ctx, n) }); err != nil {
			return err
		}
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// sshBanner connects to the node's sshd from the client namespace and reads
// its version banner.
func (l *Lab) sshBanner(ctx context.Context, n Node) error {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := dialIn(dctx, netnsPath(l.ClientNetns), "tcp", net.JoinHostPort(n.MgmtIP, "22"))
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read banner of %s: %w", n.MgmtIP, err)
	}
	if !strings.HasPrefix(line, "SSH-2.0-") {
		return fmt.Errorf("%s:22 answered %q, not an SSH banner", n.MgmtIP, line)
	}
	return nil
}

// dockerPing asks the node's dockerd GET /_ping over its socket.
func dockerPing(ctx context.Context, n Node) error {
	sock := strings.TrimPrefix(n.DockerHost, "unix://")
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "OK" {
		return fmt.Errorf("GET /_ping: %s %q", resp.Status, b)
	}
	return nil
}

// writeClientFiles writes ssh_config, known_hosts and rayform.hcl.
func (l *Lab) writeClientFiles(hostKeys map[string]string) error {
	if err := jsonfile.WriteAtomic(l.SSHConfig, []byte(l.sshConfig()), 0o644); err != nil {
		return err
	}
	if err := jsonfile.WriteAtomic(l.KnownHosts, []byte(l.knownHosts(hostKeys)), 0o644); err != nil {
		return err
	}
	if err := jsonfile.WriteAtomic(l.RayformHCL, []byte(l.rayformHCL()), 0o644); err != nil {
		return err
	}
	// The client's home: ~/.ssh holds the lab's ssh config, known_hosts and
	// key, so ssh and rayform run with HOME set to it (as `lab exec client`
	// does) reach the nodes with their default settings.
	dotSSH := filepath.Join(l.ClientHome, ".ssh")
	if err := os.MkdirAll(dotSSH, 0o700); err != nil {
		return fmt.Errorf("create client home: %w", err)
	}
	for name, target := range map[string]string{"config": l.SSHConfig, "known_hosts": l.KnownHosts, "id_ed25519": l.Key, "id_ed25519.pub": l.Key + ".pub"} {
		p := filepath.Join(dotSSH, name)
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return fmt.Errorf("client home: %w", err)
		}
	}
	return nil
}
