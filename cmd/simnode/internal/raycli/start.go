package raycli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/click"
	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/netx"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
	"github.com/rayform/rayform/cmd/simnode/internal/wire"
)

// Line numbers of scripts.py (Ray 2.53) that record-style lines cite.
const (
	lnLocalIP      = "scripts.py:1068"
	lnStarted      = "scripts.py:1096"
	lnNextSteps    = "scripts.py:1099"
	lnWorkerIP     = "scripts.py:1152"
	lnWorkerOK     = "scripts.py:1168"
	lnBlock        = "scripts.py:1187"
	lnUnexpected   = "scripts.py:1216"
	lnUsageStats   = "usage_lib.py:447"
	lnGCSWarning   = "utils.py:1401"
	lnStopSummary  = "scripts.py:1311"
	lnAbort        = "scripts.py:999"
	usageStatsText = "Usage stats collection is enabled by default without user confirmation because this terminal is detected to be non-interactive. To disable this, add `--disable-usage-stats` to the command that starts the cluster, or run the following command: `ray disable-usage-stats` before starting the cluster. See https://docs.ray.io/en/master/cluster/usage-stats.html for more details."
)

// nodeResources computes what the raylet registers from `ray start`'s
// flags; see NodeResources.
func nodeResources(h *hw.Hardware, v *click.Values, ip string, head bool, custom map[string]float64) map[string]float64 {
	o := ResourceOptions{CPUs: -1, GPUs: -1, ObjectStore: -1, Memory: -1}
	if v.IsSet("num_cpus") {
		o.CPUs = v.IntValue("num_cpus")
	}
	if v.IsSet("num_gpus") {
		o.GPUs = v.IntValue("num_gpus")
	}
	if v.IsSet("object_store_memory") {
		o.ObjectStore = int64(v.IntValue("object_store_memory"))
	}
	if v.IsSet("memory") {
		o.Memory = int64(v.IntValue("memory"))
	}
	return NodeResources(h, o, ip, head, custom)
}

// ResourceOptions override detected resources; negative means detect.
type ResourceOptions struct {
	CPUs, GPUs          int
	ObjectStore, Memory int64
}

// NodeResources computes what a raylet registers: CPU, GPU, memory,
// object_store_memory (30% of available memory), node:<ip>, the head
// marker, the accelerator type and custom resources.
func NodeResources(h *hw.Hardware, o ResourceOptions, ip string, head bool, custom map[string]float64) map[string]float64 {
	res := map[string]float64{}
	cpus := runtime.NumCPU()
	if h != nil {
		cpus = h.CPUs
	}
	if o.CPUs >= 0 {
		cpus = o.CPUs
	}
	res["CPU"] = float64(cpus)
	gpus := 0
	if h != nil {
		gpus = len(h.GPUs)
	}
	if o.GPUs >= 0 {
		gpus = o.GPUs
	}
	if gpus > 0 {
		res["GPU"] = float64(gpus)
		if h != nil && len(h.GPUs) > 0 {
			name := strings.TrimPrefix(h.GPUs[0].Name, "NVIDIA ")
			if f := strings.Fields(name); len(f) > 0 {
				res["accelerator_type:"+f[0]] = 1
			}
		}
	}
	var avail float64 = 16 << 30
	if h != nil {
		avail = float64((h.MemoryMiB - h.BaseUsed()) * hw.MiB)
	}
	obj := 0.3 * avail
	if o.ObjectStore >= 0 {
		obj = float64(o.ObjectStore)
	}
	mem := avail - obj
	if o.Memory >= 0 {
		mem = float64(o.Memory)
	}
	res["memory"] = float64(int64(mem))
	res["object_store_memory"] = float64(int64(obj))
	res["node:"+ip] = 1
	if head {
		res["node:__internal_head__"] = 1
	}
	for k, x := range custom {
		res[k] = x
	}
	return res
}

func start(ctx context.Context, p *sim.Proc, v *click.Values) int {
	log := newCLILogger(p, v.Str("log_style"))
	abort := func(format string, args ...any) int {
		log.Error(lnAbort, format, args...)
		return 1
	}
	head := v.Flag("head")
	custom := map[string]float64{}
	if s := v.Str("resources"); s != "" {
		if err := json.Unmarshal([]byte(s), &custom); err != nil {
			log.Error(lnAbort, "`--resources` is not a valid JSON string.")
			return abort(`Valid values look like this: ` + "`" + `--resources='{"CustomResource3": 1, "CustomResource2": 2}'` + "`")
		}
	}
	labels := map[string]string{}
	if s := v.Str("labels"); s != "" {
		if err := json.Unmarshal([]byte(s), &labels); err != nil {
			log.Error(lnAbort, "`--labels` is not a valid JSON string.")
			return abort(`Valid values look like this: ` + "`" + `--labels='{"gpu_type": "A100", "region": "us"}'` + "`")
		}
	}
	h, err := hw.Load(p.Env)
	if err != nil && !errors.Is(err, hw.ErrNoDriver) {
		return abort("%v", err)
	}
	tm, err := hw.LoadTiming(h, p.Env)
	if err != nil {
		return abort("%v", err)
	}
	tempDir := v.Str("temp_dir")
	if tempDir != "" && !head {
		log.Warning(lnAbort, "`--temp-dir=%s` option will be ignored. `--head` is a required flag to use `--temp-dir`. temp_dir is only configurable from a head node. All the worker nodes will use the same temp_dir as a head node. ", tempDir)
		tempDir = ""
	}
	root := rayRoot(p.Env, tempDir)
	nodeIP := v.Str("node_ip_address")
	hostname := p.Hostname

	cfg := daemonConfig{Head: head, Timing: tm.Map()}
	if head {
		if !v.Flag("disable_usage_stats") && p.Env.Get("RAY_USAGE_STATS_ENABLED") != "0" {
			log.Print(lnUsageStats, "%s", usageStatsText)
		}
		log.Newline()
		port := 6379
		if v.IsSet("port") {
			port = v.IntValue("port")
		}
		if port == 0 {
			l, err := net.Listen("tcp", "0.0.0.0:0")
			if err != nil {
				return abort("%v", err)
			}
			port = l.Addr().(*net.TCPAddr).Port
			l.Close()
		}
		if nodeIP == "" {
			nodeIP = netx.RayNodeIP(ctx, "8.8.8.8:53", hostname)
		}
		log.Print(lnLocalIP, "Local node IP: %s", nodeIP)
		def := net.JoinHostPort(nodeIP, strconv.Itoa(port))
		if cur := readCurrentCluster(root); cur == def && gcsAlive(ctx, cur) {
			fmt.Fprintf(p.Stderr, "ConnectionError: Ray is trying to start at %s, but is already running at %s. Please specify a different port using the `--port` flag of `ray start` command.\n", def, cur)
			return 1
		}
		l, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", port))
		if err != nil {
			fmt.Fprintf(p.Stderr, "RuntimeError: Failed to start GCS. Last 1 lines of error files:\nFailed to bind to address 0.0.0.0:%d: %v\n", port, err)
			return 1
		}
		l.Close()
		cfg.Port = port
		cfg.GCSAddr = def
		cfg.SessionName = sessionName(p.Now(), p.Pid)
		cfg.Dashboard = true
		if b, ok := v.BoolValue("include_dashboard"); ok {
			cfg.Dashboard = b
		}
		cfg.DashboardHost = "127.0.0.1"
		if s := v.Str("dashboard_host"); s != "" {
			cfg.DashboardHost = s
		}
		cfg.DashboardPort = 8265
		if v.IsSet("dashboard_port") {
			cfg.DashboardPort = v.IntValue("dashboard_port")
		}
	} else {
		address := v.Str("address")
		if address == "" {
			return abort("`--address` is a required flag unless starting a head node with `--head`.")
		}
		for _, f := range []string{"port", "redis_shard_ports", "include_dashboard"} {
			if v.IsSet(f) {
				return abort("`--%s` should only be specified when starting head node with `--head`.", strings.ReplaceAll(f, "_", "-"))
			}
		}
		if address == "auto" {
			address = readCurrentCluster(root)
		}
		if !strings.Contains(address, ":") {
			address += ":6379"
		}
		addr, err := canonicalAddress(ctx, address)
		if err != nil {
			return abort("Cannot canonicalize address `--address=%s`.", v.Str("address"))
		}
		if nodeIP == "" {
			nodeIP = netx.RayNodeIP(ctx, addr, hostname)
		}
		log.Print(lnWorkerIP, "Local node IP: %s", nodeIP)
		c, err := ConnectGCS(ctx, p, addr, tm, gcs.Hello{Role: "client"}, nil)
		if err != nil {
			return 1
		}
		cfg.SessionName = c.Welcome.SessionName
		c.Close()
		cfg.GCSAddr = addr
	}
	name := v.Str("node_name")
	if name == "" {
		name = nodeIP
	}
	cfg.Node = gcs.NodeInfo{NodeIP: nodeIP, NodeName: name, IsHead: head, Resources: nodeResources(h, v, nodeIP, head, custom), Labels: labels, Hostname: hostname, RayletPID: p.Pid}
	sessionDir, err := makeSession(root, cfg.SessionName)
	if err != nil {
		return abort("%v", err)
	}
	cfg.SessionDir = sessionDir
	b, _ := json.MarshalIndent(cfg, "", "  ")
	cfgPath := filepath.Join(sessionDir, "simnode-daemon-"+strconv.Itoa(p.Pid)+".json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return abort("%v", err)
	}
	block := v.Flag("block")
	cmd, status, err := spawnDaemon(p, cfgPath, sessionDir, !block)
	if err != nil {
		fmt.Fprintln(p.Stderr, err)
		return 1
	}
	if !strings.HasPrefix(status, "ok") {
		fmt.Fprintf(p.Stderr, "RuntimeError: %s\n", strings.TrimPrefix(status, "error "))
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return 1
	}
	if err := os.WriteFile(currentClusterFile(root), []byte(cfg.GCSAddr), 0o644); err != nil {
		return abort("%v", err)
	}
	printStarted(log, &cfg, v.IsSet("node_ip_address"))
	if !block {
		_ = cmd.Process.Release()
		return 0
	}
	return blockForever(ctx, log, cmd)
}

func gcsAlive(ctx context.Context, addr string) bool {
	c, err := gcs.Dial(ctx, addr, time.Second, gcs.Hello{Role: "client"}, nil)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// ConnectGCS is what `ray start --address` (and ray.init) do before
// anything else: keep trying the GCS for gcs_connect_timeout per attempt,
// printing Ray's lines for each failed attempt, and give up after
// gcs_retries attempts.
func ConnectGCS(ctx context.Context, p *sim.Proc, addr string, tm *hw.Timing, hello gcs.Hello, handler wire.Handler) (*gcs.Client, error) {
	per := tm.Get("gcs_connect_timeout")
	var last error
	for attempt := 0; attempt < tm.GCSRetries; attempt++ {
		deadline := time.Now().Add(per)
		for {
			c, err := gcs.Dial(ctx, addr, time.Until(deadline), hello, handler)
			if err == nil {
				return c, nil
			}
			last = err
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if time.Now().Add(50 * time.Millisecond).After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(min(200*time.Millisecond, time.Until(deadline))):
			}
			if !time.Now().Before(deadline) {
				break
			}
		}
		secs := int(per.Round(time.Second) / time.Second)
		fmt.Fprintln(p.Stderr, pylog.RayCpp(p.Now(), 'E', p.Pid, p.Pid, "gcs_rpc_client.h:179", fmt.Sprintf("Failed to connect to GCS at address %s within %d seconds.", addr, secs)))
		fmt.Fprintln(p.Stderr, pylog.RayCpp(p.Now(), 'W', p.Pid, p.Pid, "gcs_client.cc:178", "Failed to get cluster ID from GCS server: TimedOut: Timed out while waiting for GCS to become available."))
		fmt.Fprintln(p.Stderr, pylog.RayRecord(p.Now(), "WARNING", lnGCSWarning, fmt.Sprintf("Unable to connect to GCS (ray head) at %s. Check that (1) Ray with matching version started successfully at the specified address, (2) this node can reach the specified address, and (3) there is no firewall setting preventing access.", addr)))
	}
	fmt.Fprintf(p.Stderr, "Traceback (most recent call last):\n  File \"/usr/local/bin/ray\", line 8, in <module>\n    sys.exit(main())\n  File \"/usr/local/lib/python3.12/dist-packages/ray/_private/node.py\", line 368, in __init__\n    session_name = ray._private.utils.internal_kv_get_with_retry(\nConnectionError: Could not read 'session_name' from GCS. Did GCS start successfully?\n")
	if last == nil {
		last = errors.New("gcs unreachable")
	}
	return nil, last
}

// spawnDaemon re-executes simnode as the node's Ray daemon and waits for
// its readiness line.
func spawnDaemon(p *sim.Proc, cfgPath, sessionDir string, detach bool) (*exec.Cmd, string, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, "", err
	}
	defer pr.Close()
	out, err := os.OpenFile(filepath.Join(sessionDir, "logs", "simnode-daemon.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		pw.Close()
		return nil, "", err
	}
	defer out.Close()
	cmd := exec.Command(p.Exe, DaemonCommand, cfgPath)
	cmd.Args[0] = "raylet"
	cmd.Env = p.Env.List()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Dir = "/"
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, "", fmt.Errorf("start raylet: %w", err)
	}
	pw.Close()
	line, _ := bufio.NewReader(pr).ReadString('\n')
	line = strings.TrimSpace(line)
	if line == "" {
		line = "error raylet exited before registering; see " + filepath.Join(sessionDir, "logs", "simnode-daemon.out")
	}
	return cmd, line, nil
}

func printStarted(log *cliLogger, cfg *daemonConfig, explicitIP bool) {
	const msg = "Ray runtime started."
	log.Newline()
	log.Success(lnStarted, "%s", strings.Repeat("-", len(msg)))
	log.Success("scripts.py:1097", "%s", msg)
	log.Success("scripts.py:1098", "%s", strings.Repeat("-", len(msg)))
	log.Newline()
	if !cfg.Head {
		log.Print(lnWorkerOK, "To terminate the Ray runtime, run")
		log.Print("scripts.py:1169", "  ray stop")
		return
	}
	end := log.Group(lnNextSteps, "Next steps")
	defer end()
	log.Print("scripts.py:1102", "To add another node to this Ray cluster, run")
	log.Print("scripts.py:1105", "  ray start --address='%s'", cfg.GCSAddr)
	log.Newline()
	log.Print("scripts.py:1114", "To connect to this Ray cluster:")
	log.indent++
	log.Print("scripts.py:1116", "import ray")
	if explicitIP {
		log.Print("scripts.py:1117", "ray.init(_node_ip_address='%s')", cfg.Node.NodeIP)
	} else {
		log.Print("scripts.py:1117", "ray.init()")
	}
	log.indent--
	url := ""
	if cfg.Dashboard {
		host := cfg.DashboardHost
		if host == "0.0.0.0" {
			host = cfg.Node.NodeIP
		}
		url = net.JoinHostPort(host, strconv.Itoa(cfg.DashboardPort))
		log.Newline()
		log.Print("scripts.py:1129", "To submit a Ray job using the Ray Jobs CLI:")
		log.Print("scripts.py:1130", "  RAY_ADDRESS='http://%s' ray job submit --working-dir . -- python my_script.py", url)
		log.Newline()
		log.Print("scripts.py:1139", "See https://docs.ray.io/en/latest/cluster/running-applications/job-submission/index.html ")
		log.Print("scripts.py:1143", "for more information on submitting Ray jobs to the Ray cluster.")
	}
	log.Newline()
	log.Print("scripts.py:1148", "To terminate the Ray runtime, run")
	log.Print("scripts.py:1149", "  ray stop")
	log.Newline()
	log.Print("scripts.py:1152", "To view the status of the cluster, use")
	log.Print("scripts.py:1153", "  ray status")
	if url != "" {
		log.Newline()
		log.Print("scripts.py:1157", "To monitor and debug Ray, view the dashboard at ")
		log.Print("scripts.py:1158", "  %s", url)
		log.Newline()
		log.Print("scripts.py:1165", "If connection to the dashboard fails, check your firewall settings and network configuration.")
	}
}

// blockForever is `ray start --block`: wait for a signal or an unexpected
// exit of the Ray processes (SIGTERM-terminated ones are graceful, as in
// Ray, and keep the command blocking).
func blockForever(ctx context.Context, log *cliLogger, cmd *exec.Cmd) int {
	log.Newline()
	end := log.Group(lnBlock, "--block")
	log.Print(lnBlock, "This command will now block forever until terminated by a signal.")
	log.Print(lnBlock, "Running subprocesses are monitored and a message will be printed if any of them terminate unexpectedly. Subprocesses exit with SIGTERM will be treated as graceful, thus NOT reported.")
	end()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		return 0
	case s := <-sigs:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if s == syscall.SIGTERM {
			return 128 + int(syscall.SIGTERM)
		}
		return 128 + int(syscall.SIGINT)
	case err := <-exited:
		code := 0
		graceful := err == nil
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
				if ws.Signaled() {
					code = -int(ws.Signal())
					graceful = ws.Signal() == syscall.SIGTERM
				} else {
					code = ws.ExitStatus()
					graceful = code == 128+int(syscall.SIGTERM)
				}
			}
		}
		if graceful {
			// Ray keeps blocking; so do we, until a signal arrives.
			select {
			case <-ctx.Done():
				return 0
			case s := <-sigs:
				return 128 + int(s.(syscall.Signal))
			}
		}
		log.Newline()
		log.Error(lnUnexpected, "Some Ray subprocesses exited unexpectedly:")
		log.Error(lnUnexpected, "  raylet [exit code=%d]", code)
		log.Newline()
		log.Error(lnUnexpected, "Remaining processes will be killed.")
		return 1
	}
}
