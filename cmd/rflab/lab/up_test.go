//go:build linux

package lab

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
	rfssh "github.com/rayform/rayform/engine/transport/ssh"
)

// TestTwoNodeLab brings up a DGX Spark pair and checks it from the client
// namespace as rayform would see it.
func TestTwoNodeLab(t *testing.T) {
	l := upLab(t, Config{Name: testLabName("rfl-pair")})
	ctx := context.Background()

	hw := map[string]hardware{}
	for _, n := range l.Nodes {
		b, err := os.ReadFile(n.Hardware)
		if err != nil {
			t.Fatal(err)
		}
		var h hardware
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatal(err)
		}
		hw[n.Name] = h
	}

	t.Run("ssh with the lab's ssh_config and known_hosts", func(t *testing.T) {
		for _, n := range l.Nodes {
			if got := strings.TrimSpace(sshOK(t, l, n.Name, "hostname")); got != n.Name {
				t.Errorf("ssh %s hostname = %q", n.Name, got)
			}
		}
	})

	t.Run("unknown host key is refused", func(t *testing.T) {
		out, err := sshErr(t, l, "spark1", "true", "-o", "UserKnownHostsFile=/dev/null")
		if err == nil || !strings.Contains(out, "Host key verification failed") {
			t.Errorf("ssh without known host key: err=%v out=%q, want a host key verification failure", err, out)
		}
	})

	t.Run("session environment", func(t *testing.T) {
		for _, n := range l.Nodes {
			out := sshOK(t, l, n.Name, `echo "$DOCKER_HOST|$SIMNODE_HARDWARE|$(command -v nvidia-smi)"`)
			want := n.DockerHost + "|" + n.Hardware + "|" + filepath.Join(n.BinDir, "nvidia-smi")
			if strings.TrimSpace(out) != want {
				t.Errorf("%s session env = %q, want %q", n.Name, strings.TrimSpace(out), want)
			}
		}
	})

	t.Run("reachability", func(t *testing.T) {
		head, _ := l.Node("spark1")
		fabricAddr := listenIn(t, head, head.FabricIP+":0")
		mgmtAddr := listenIn(t, head, head.MgmtIP+":0")
		tests := []struct {
			from, addr string
			want       bool
		}{
			{"spark2", fabricAddr, true},         // workers reach the head on the fabric
			{"spark2", mgmtAddr, false},          // but not on its management address
			{"spark2", "10.1.230.180:22", false}, // not even its sshd
			{ClientName, mgmtAddr, true},         // the client reaches management addresses
			{ClientName, "10.1.230.181:22", true},
			{ClientName, fabricAddr, false}, // the client has no fabric address
			{"spark1", "10.1.230.181:22", false},
			{"spark2", RegistryAddr(), true}, // nodes reach the registry
		}
		for _, tt := range tests {
			t.Run(tt.from+" to "+tt.addr, func(t *testing.T) {
				t.Parallel() // an unanswered ARP takes 3s to fail
				err := dialFrom(l, tt.from, tt.addr)
				if (err == nil) != tt.want {
					t.Errorf("dial %s from %s: err=%v, want reachable=%v", tt.addr, tt.from, err, tt.want)
				}
			})
		}
	})

	t.Run("default route source is the management address", func(t *testing.T) {
		for _, n := range l.Nodes {
			var local string
			// A UDP "connect" sends nothing; it only picks the route and source,
			// as Ray's address auto-detection does.
			if err := inNetns(n.NetnsPath(), func() error {
				c, err := net.Dial("udp", "10.255.255.255:9")
				if err != nil {
					return err
				}
				defer c.Close()
				local, _, _ = net.SplitHostPort(c.LocalAddr().String())
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if local != n.MgmtIP {
				t.Errorf("%s default route source = %s, want %s", n.Name, local, n.MgmtIP)
			}
		}
	})

	t.Run("docker info answers per node", func(t *testing.T) {
		for _, n := range l.Nodes {
			out := strings.TrimSpace(sshOK(t, l, n.Name, `docker info --format '{{.Name}}|{{.DockerRootDir}}|{{.Labels}}'`))
			want := n.Name + "|" + filepath.Join(n.Dir, "docker") + "|"
			if !strings.HasPrefix(out, want) || !strings.Contains(out, "dev.rayform.lab.node="+n.Name) {
				t.Errorf("docker info on %s = %q, want %q...", n.Name, out, want)
			}
		}
	})

	t.Run("meminfo covered for sshd, not for dockerd", func(t *testing.T) {
		st, err := newSupClient(l.SupervisorSocket).procs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pids := map[string]int{}
		for _, p := range st {
			pids[p.ID] = p.PID
		}
		for _, n := range l.Nodes {
			for what, covered := range map[string]bool{"sshd": true, "dockerd": false} {
				id := nodeProcID(n.Name, what)
				b, err := os.ReadFile("/proc/" + strconv.Itoa(pids[id]) + "/mountinfo")
				if err != nil || pids[id] == 0 {
					t.Fatalf("mountinfo of %s (pid %d): %v", id, pids[id], err)
				}
				if got := strings.Contains(string(b), " /proc/meminfo "); got != covered {
					t.Errorf("%s: /proc/meminfo is a mount point = %v, want %v", id, got, covered)
				}
			}
		}
	})

	t.Run("vllm serve offline reads the seeded model on the head only", func(t *testing.T) {
		// The serve as rayform starts it after staging: HF_HUB_OFFLINE=1,
		// the node's cache mounted at the container's default hub cache.
		args := "--gpus all --network host -e HF_HUB_OFFLINE=1 -v " + ModelCacheDir + ":/root/.cache/huggingface/hub " +
			ImageRayVLLM + " vllm serve " + HubRepoTiny + " --port 0 --max-model-len 1024"
		snap := "/root/.cache/huggingface/hub/models--rayform-lab--tiny/snapshots/" + l.Seeded.Commit
		// The head's serve starts on the seeded snapshot: its first lines
		// tell, then it is removed.
		sshOK(t, l, "spark1", "docker run -d --name offline "+args)
		t.Cleanup(func() { _, _ = sshErr(t, l, "spark1", "docker rm -f offline") })
		sshOK(t, l, "spark1", `timeout 120 sh -c 'docker logs -f offline 2>&1 | grep -m1 -e "Resolved architecture" -e Error'; true`)
		out := sshOK(t, l, "spark1", "docker logs offline 2>&1")
		for _, want := range []string{"HF_HUB_OFFLINE is True, replace model_id [" + HubRepoTiny + "] to model_path [" + snap + "]", "Resolved architecture: Qwen2ForCausalLM"} {
			if !strings.Contains(out, want) {
				t.Errorf("vllm serve on spark1 lacks %q:\n%s", want, out)
			}
		}
		out, err := sshErr(t, l, "spark2", "docker run --rm "+args)
		if err == nil || !strings.Contains(out, "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder") {
			t.Errorf("vllm serve on spark2 (no copy): %v\n%s", err, out)
		}
	})

	t.Run("docker run --gpus all sees the node's GPU", func(t *testing.T) {
		for _, n := range l.Nodes {
			out := sshOK(t, l, n.Name, "docker run --rm --gpus all --network host "+ImageRayVLLM+
				" nvidia-smi --query-gpu=name,uuid --format=csv,noheader")
			want := n.GPUModel + ", " + hw[n.Name].GPUs[0].UUID
			if !strings.Contains(out, want) {
				t.Errorf("nvidia-smi in a --gpus container on %s:\n%s\nwant %q", n.Name, out, want)
			}
		}
		if hw["spark1"].GPUs[0].UUID == hw["spark2"].GPUs[0].UUID {
			t.Error("both nodes have the same GPU UUID")
		}
	})

	t.Run("containers see their node's model cache", func(t *testing.T) {
		sshOK(t, l, "spark1", "mkdir -p "+ModelCacheDir+" && echo spark1-copy > "+ModelCacheDir+"/marker")
		for _, tt := range []struct{ node, want string }{{"spark1", "spark1-copy"}, {"spark2", "absent"}} {
			out := sshOK(t, l, tt.node, "docker run --rm --network host -v "+ModelCacheMount+":/root/.cache/huggingface "+ImageRayVLLM+
				" sh -c 'cat /root/.cache/huggingface/hub/marker 2>/dev/null || echo absent'")
			if got := strings.TrimSpace(out); got != tt.want {
				t.Errorf("a container on %s reads %q from its bind mount of %s, want %q", tt.node, got, ModelCacheMount, tt.want)
			}
		}
	})

	t.Run("pulls go through the lab registry", func(t *testing.T) {
		out := sshOK(t, l, "spark2", "docker pull "+RegistryAddr()+"/"+ImageNoRay+" && docker pull "+ImageNoRay)
		if !strings.Contains(out, "Status: Downloaded newer image for "+RegistryAddr()+"/"+ImageNoRay) {
			t.Errorf("qualified pull: %s", out)
		}
		log, err := os.ReadFile(filepath.Join(l.Dir, "registry", "registry.log"))
		if err != nil {
			t.Fatal(err)
		}
		// The mirrored pull of the unqualified Docker Hub name asked the lab registry.
		re := regexp.MustCompile(`10\.1\.230\.181 - - .*"GET /v2/` + regexp.QuoteMeta(strings.Split(ImageRayVLLM, ":")[0]) + `/manifests/`)
		if !re.Match(log) {
			t.Errorf("registry log has no manifest GET for %s from spark2:\n%s", ImageRayVLLM, tail(filepath.Join(l.Dir, "registry", "registry.log"), 10))
		}
	})

	t.Run("the image without Ray has no ray", func(t *testing.T) {
		out, err := sshErr(t, l, "spark1", "docker run --rm --network host --entrypoint /bin/bash "+ImageNoRay+" -c 'ray start --head'; echo exit=$?")
		if err != nil || !strings.Contains(out, "ray: not found") || !strings.Contains(out, "exit=127") {
			t.Errorf("ray in %s: err=%v out=%q, want `ray: not found` and exit 127", ImageNoRay, err, out)
		}
	})

	t.Run("cut takes the fabric port down", func(t *testing.T) {
		head, _ := l.Node("spark1")
		addr := listenIn(t, head, head.FabricIP+":0")
		if err := l.Cut(ctx, "spark2", true); err != nil {
			t.Fatal(err)
		}
		if err := dialFrom(l, "spark2", addr); err == nil {
			t.Error("spark2 reached the head's fabric address while cut")
		}
		if err := l.Cut(ctx, "spark2", false); err != nil {
			t.Fatal(err)
		}
		if err := dialFrom(l, "spark2", addr); err != nil {
			t.Errorf("spark2 after uncut: %v", err)
		}
	})

	t.Run("up again is a no-op", func(t *testing.T) {
		again, err := Up(ctx, Config{Name: testLabName("rfl-pair"), Simnode: simnodeBinary(t)})
		if err != nil {
			t.Fatal(err)
		}
		if again.SupervisorPID != l.SupervisorPID {
			t.Errorf("second Up rebuilt the lab (supervisor %d, was %d)", again.SupervisorPID, l.SupervisorPID)
		}
		if err := again.Health(ctx); err != nil {
			t.Errorf("Health: %v", err)
		}
	})

	t.Run("a different shape is refused while up", func(t *testing.T) {
		_, err := Up(ctx, Config{Name: testLabName("rfl-pair"), Nodes: 3, Simnode: simnodeBinary(t)})
		if err == nil || !strings.Contains(err.Error(), "different shape") {
			t.Errorf("Up with 3 nodes over a 2-node lab: %v", err)
		}
	})

	t.Run("lab.json describes the topology", func(t *testing.T) {
		got, err := Load(l.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if got.ClientNetns != l.Name+"-client" || len(got.Nodes) != 2 || got.Nodes[1].FabricIP != "192.168.200.13" ||
			got.Registry != "10.1.230.1:5000" || got.SupervisorPID == 0 {
			t.Errorf("lab.json = %+v", got)
		}
	})
}

// TestNodeLifecycle reboots and powers off a node, and checks a node without
// the NVIDIA container toolkit. The other node's containers live through
// both (issue 12, finding 10: they were killed with the node's).
func TestNodeLifecycle(t *testing.T) {
	l := upLab(t, Config{Name: testLabName("rfl-life"), Nodes: 2, Overrides: []string{"spark1.toolkit=false"}})
	sshOK(t, l, "spark2", "docker run -d --name neighbour --stop-timeout 1 "+ImageRayVLLM+" sleep 600")
	neighbourRuns := func(t *testing.T, after string) {
		t.Helper()
		if out := sshOK(t, l, "spark2", `docker inspect -f '{{.State.Status}}' neighbour`); strings.TrimSpace(out) != "running" {
			t.Errorf("spark2's container after %s of spark1: %q, want running", after, out)
		}
	}
	ctx := context.Background()

	t.Run("--gpus without the toolkit fails as docker does", func(t *testing.T) {
		out, err := sshErr(t, l, "spark1", "docker run --rm --gpus all "+ImageRayVLLM+" true")
		if err == nil || !strings.Contains(out, `could not select device driver "" with capabilities: [[gpu]]`) {
			t.Errorf("docker run --gpus all without the hook: err=%v\n%s", err, out)
		}
	})

	sshOK(t, l, "spark1", "docker run -d --name plain --stop-timeout 1 --network host "+ImageRayVLLM+" sleep 600 && "+
		"docker run -d --name always --stop-timeout 1 --restart always --network host "+ImageRayVLLM+" sleep 600")

	t.Run("reboot stops containers and restarts daemons", func(t *testing.T) {
		if err := l.Reboot(ctx, "spark1"); err != nil {
			t.Fatal(err)
		}
		out := sshOK(t, l, "spark1", `docker inspect -f '{{.Name}} {{.State.Status}}' plain always`)
		if !strings.Contains(out, "/plain exited") || !strings.Contains(out, "/always running") {
			t.Errorf("after reboot:\n%s\nwant plain exited and always running (restart policy)", out)
		}
		if err := l.Health(ctx); err != nil {
			t.Errorf("Health after reboot: %v", err)
		}
		neighbourRuns(t, "a reboot")
	})

	t.Run("power off", func(t *testing.T) {
		if err := l.PowerOff(ctx, "spark1"); err != nil {
			t.Fatal(err)
		}
		n, _ := l.Node("spark1")
		if left := procsInNetns(n.NetnsPath()); len(left) > 0 {
			t.Errorf("processes still run on a powered-off node: %v", left)
		}
		if err := dialFrom(l, ClientName, n.MgmtIP+":22"); err == nil {
			t.Error("sshd of a powered-off node answers")
		}
		if err := l.Health(ctx); err != nil {
			t.Errorf("Health with a node off: %v", err)
		}
		neighbourRuns(t, "a power-off")
	})

	t.Run("power on keeps state", func(t *testing.T) {
		if err := l.PowerOn(ctx, "spark1"); err != nil {
			t.Fatal(err)
		}
		out := sshOK(t, l, "spark1", `docker ps -a --format '{{.Names}}' | sort | tr '\n' ' '`)
		if strings.TrimSpace(out) != "always plain" {
			t.Errorf("containers after power on: %q", out)
		}
	})
}

// TestTransportOnlyLab checks a lab without Docker: per-node fabric names,
// MTU, and a node cut from the start.
func TestTransportOnlyLab(t *testing.T) {
	l := upLab(t, Config{Name: testLabName("rfl-ssh"), Nodes: 3, NoDocker: true, FabricMTU: 9000,
		Overrides: []string{"spark3.fabric-ifname=enP2p1s0f1np1"}, Cut: []string{"spark2"}})
	tests := []struct {
		node, ifname string
		up           bool
	}{
		{"spark1", "enp1s0f1np1", true},
		{"spark2", "enp1s0f1np1", false},
		{"spark3", "enP2p1s0f1np1", true},
	}
	t.Run("rayform's SSH transport with the client home", func(t *testing.T) {
		// What rayform does in the client namespace with HOME=ClientHome: its
		// defaults (~/.ssh/config, known_hosts, strict checking) reach the nodes.
		d, err := rfssh.NewDialer(rfssh.Options{
			Home: l.ClientHome, SystemConfigFile: "none", AgentSocket: "none",
			NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return dialIn(ctx, netnsPath(l.ClientNetns), network, addr)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for host, want := range map[string]string{"spark1": "spark1", "10.1.230.182": "spark3"} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			conn, err := d.Dial(ctx, host)
			if err != nil {
				cancel()
				t.Fatalf("dial %s: %v", host, err)
			}
			res, err := conn.Run(ctx, transport.Cmd{Argv: []string{"hostname"}})
			cancel()
			if err != nil || strings.TrimSpace(string(res.Stdout)) != want {
				t.Errorf("%s: hostname = %q, %v; want %s", host, res.Stdout, err, want)
			}
		}
	})
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			out, err := labRun(t, l, tt.node, "ip", "-j", "link", "show", tt.ifname)
			if err != nil {
				t.Fatalf("ip link show %s: %v\n%s", tt.ifname, err, out)
			}
			var links []struct {
				MTU   int      `json:"mtu"`
				Flags []string `json:"flags"`
			}
			if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
				t.Fatalf("parse %q: %v", out, err)
			}
			carrier := !strings.Contains(strings.Join(links[0].Flags, ","), "NO-CARRIER")
			if links[0].MTU != 9000 || carrier != tt.up {
				t.Errorf("%s %s: mtu %d flags %v, want mtu 9000 carrier=%v", tt.node, tt.ifname, links[0].MTU, links[0].Flags, tt.up)
			}
			if got := strings.TrimSpace(sshOK(t, l, tt.node, "ibdev2netdev")); got != rdmaName(tt.ifname)+" port 1 ==> "+tt.ifname+" (Up)" &&
				got != rdmaName(tt.ifname)+" port 1 ==> "+tt.ifname+" (Down)" {
				t.Errorf("ibdev2netdev on %s = %q", tt.node, got)
			}
		})
	}
}

// TestDownRefusesForeignDir checks that Down never removes a directory
// that is not a lab's.
func TestDownRefusesForeignDir(t *testing.T) {
	requireLab(t, false)
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious.txt")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Down(context.Background(), Config{Name: testLabName("rfl-foreign"), Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "not a lab's") {
		t.Errorf("Down on a foreign directory: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("Down removed a foreign file: %v", err)
	}
}

// TestDownWhenNothingIsUp checks that Down is idempotent.
func TestDownWhenNothingIsUp(t *testing.T) {
	requireLab(t, false)
	cfg := Config{Name: testLabName("rfl-none"), Dir: filepath.Join(t.TempDir(), "lab")}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := Down(ctx, cfg)
		cancel()
		if err != nil {
			t.Errorf("Down #%d of a lab that is not up: %v", i+1, err)
		}
	}
}

// BenchmarkUp reports how long Up takes for 2 and 32 nodes with Docker (the
// image cache warm after the first run). Run it with
//
//	go test -run '^$' -bench BenchmarkUp -benchtime 1x ./cmd/rflab/lab
func BenchmarkUp(b *testing.B) {
	for _, nodes := range []int{2, 32} {
		b.Run("nodes="+strconv.Itoa(nodes), func(b *testing.B) {
			requireLab(b, true)
			cfg := Config{Name: testLabName("rfl-bench"), Nodes: nodes, Simnode: simnodeBinary(b)}
			var total time.Duration
			for range b.N {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				start := time.Now()
				_, err := Up(ctx, cfg)
				total += time.Since(start)
				b.StopTimer()
				downAndCheck(b, cfg)
				cancel()
				if err != nil {
					b.Fatalf("Up: %v", err)
				}
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/up")
		})
	}
}
