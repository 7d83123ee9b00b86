//go:build linux

package lab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/labslots"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources"
)

// TestMain lets Up re-execute this test binary as the lab's supervisor,
// runs the lab tests side by side, at most labPool's size at once (see
// upLab), and removes the simnode they built.
func TestMain(m *testing.M) {
	if code, ok := SupervisorMain(os.Args[1:]); ok {
		os.Exit(code)
	}
	labslots.Main(m, defaultLabSlots, &labPool, func() {
		if testSimnode.path != "" {
			os.RemoveAll(filepath.Dir(testSimnode.path))
		}
	})
}

// defaultLabSlots is how many labs this package's tests keep up at once
// unless RAYFORM_E2E_LABS says otherwise: what a 2-core, 24 GB machine
// carries with cmd/e2e's lab tests running beside this package.
const defaultLabSlots = 3

// labPool limits the labs that are up at once (upLab).
var labPool *labslots.Pool

func TestConfigDefaults(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "rflab" || c.Nodes != 2 || c.FabricIfname != "enp1s0f1np1" || *c.GPUs != 1 ||
		c.GPUModel != "NVIDIA GB10" || c.MemoryGiB != 119.70 || !*c.Unified || !strings.HasSuffix(c.Dir, "rayform-lab-rflab") {
		t.Errorf("defaults = %+v", c)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"bad name", Config{Name: "Bad_Name"}, "lab name"},
		{"too many nodes", Config{Nodes: 65}, "-nodes 65"},
		{"negative nodes", Config{Nodes: -1}, "-nodes -1"},
		{"long ifname", Config{FabricIfname: "enp1s0f1np1xxxxxx"}, "interface name"},
		{"ifname eth0", Config{FabricIfname: "eth0"}, "interface name"},
		{"mtu", Config{FabricMTU: 100}, "MTU"},
		{"loss", Config{Loss: 101}, "-loss"},
		{"delay", Config{Delay: -time.Second}, "-delay"},
		{"long dir", Config{Dir: "/tmp/" + strings.Repeat("x", 80)}, "too long for unix socket"},
		{"root dir", Config{Dir: "/"}, "refusing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.withDefaults()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("withDefaults() error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestNodes(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		check     func(t *testing.T, nodes []Node)
		wantError string
	}{
		{
			name: "seeds addresses",
			cfg:  Config{Nodes: 3},
			check: func(t *testing.T, nodes []Node) {
				want := [][3]string{
					{"spark1", "10.1.230.180", "192.168.200.12"},
					{"spark2", "10.1.230.181", "192.168.200.13"},
					{"spark3", "10.1.230.182", "192.168.200.14"},
				}
				for i, w := range want {
					n := nodes[i]
					if n.Name != w[0] || n.MgmtIP != w[1] || n.FabricIP != w[2] || n.Head != (i == 0) || n.Netns != "rflab-"+w[0] {
						t.Errorf("node %d = %+v, want %v", i, n, w)
					}
				}
			},
		},
		{
			name: "overrides",
			cfg: Config{Overrides: []string{"spark2.fabric-ifname=enP2p1s0f1np1", "spark2.gpus=0", "spark2.toolkit=false",
				"spark1.memory-gib=128", "spark1.unified=false", "spark1.gpu-model=NVIDIA H200"}, Cut: []string{"spark2"}},
			check: func(t *testing.T, nodes []Node) {
				s1, s2 := nodes[0], nodes[1]
				if s2.FabricIfname != "enP2p1s0f1np1" || s2.GPUs != 0 || s2.Toolkit || !s2.Cut {
					t.Errorf("spark2 = %+v", s2)
				}
				if s1.MemoryGiB != 128 || s1.Unified || s1.GPUModel != "NVIDIA H200" || s1.FabricIfname != "enp1s0f1np1" || s1.Cut {
					t.Errorf("spark1 = %+v", s1)
				}
			},
		},
		{name: "unknown node", cfg: Config{Overrides: []string{"spark3.gpus=1"}}, wantError: `no node "spark3"`},
		{name: "unknown key", cfg: Config{Overrides: []string{"spark1.cpus=1"}}, wantError: "unknown key"},
		{name: "bad syntax", cfg: Config{Overrides: []string{"spark1gpus=1"}}, wantError: "NODE.KEY=VALUE"},
		{name: "bad gpus", cfg: Config{Overrides: []string{"spark1.gpus=x"}}, wantError: "want a count"},
		{name: "cut unknown", cfg: Config{Cut: []string{"spark9"}}, wantError: "-cut"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.cfg.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := c.nodes()
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("nodes() error = %v, want %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, nodes)
		})
	}
}

func TestRDMAName(t *testing.T) {
	for in, want := range map[string]string{
		"enp1s0f1np1":   "rocep1s0f1",
		"enP2p1s0f1np1": "roceP2p1s0f1",
		"enp1s0f0np0":   "rocep1s0f0",
		"ib0":           "roce_ib0",
	} {
		if got := rdmaName(in); got != want {
			t.Errorf("rdmaName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSSHDConfigSetEnvOnOneLine(t *testing.T) {
	c, _ := Config{Name: "x"}.withDefaults()
	nodes, _ := c.nodes()
	cfg := nodes[0].sshdConfig("/k")
	if n := strings.Count(cfg, "SetEnv "); n != 1 {
		t.Fatalf("sshd_config has %d SetEnv lines, want 1 (sshd uses only the first):\n%s", n, cfg)
	}
	for _, want := range []string{"DOCKER_HOST=\"unix://", "SIMNODE_HARDWARE=", "PATH=\"" + nodes[0].BinDir + ":", "ListenAddress 10.1.230.180:22"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("sshd_config lacks %q:\n%s", want, cfg)
		}
	}
}

func TestHardwareJSON(t *testing.T) {
	tests := []struct {
		name      string
		overrides []string
		check     func(t *testing.T, hw hardware)
	}{
		{"gb10", nil, func(t *testing.T, hw hardware) {
			if len(hw.GPUs) != 1 || hw.GPUs[0].Name != "NVIDIA GB10" || hw.GPUs[0].MemoryMiB != 0 || !hw.UnifiedMemory || hw.MemoryMiB != 122572 {
				t.Errorf("hardware = %+v", hw)
			}
			if len(hw.RDMA) != 1 || hw.RDMA[0].Netdev != "enp1s0f1np1" || hw.RDMA[0].HCA != "rocep1s0f1" {
				t.Errorf("rdma = %+v", hw.RDMA)
			}
		}},
		{"discrete", []string{"spark1.unified=false", "spark1.gpus=2", "spark1.memory-gib=141"}, func(t *testing.T, hw hardware) {
			if len(hw.GPUs) != 2 || hw.GPUs[1].MemoryMiB != 141*1024 || hw.UnifiedMemory || hw.GPUs[0].UUID == hw.GPUs[1].UUID {
				t.Errorf("hardware = %+v", hw)
			}
		}},
		{"no gpus", []string{"spark1.gpus=0"}, func(t *testing.T, hw hardware) {
			if hw.GPUs == nil || len(hw.GPUs) != 0 {
				t.Errorf("gpus = %#v, want an empty list", hw.GPUs)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := Config{Overrides: tt.overrides}.withDefaults()
			nodes, err := c.nodes()
			if err != nil {
				t.Fatal(err)
			}
			b, err := nodes[0].hardwareJSON("lab", map[string]string{"weight_load": "1s"})
			if err != nil {
				t.Fatal(err)
			}
			var hw hardware
			if err := json.Unmarshal(b, &hw); err != nil {
				t.Fatal(err)
			}
			if hw.Timing["weight_load"] != "1s" {
				t.Errorf("timing = %v", hw.Timing)
			}
			tt.check(t, hw)
		})
	}
}

// TestRayformHCLValidates loads the generated rayform.hcl with rayform's own
// configuration loader.
func TestRayformHCLValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"pair", Config{}, []string{`host          = "10.1.230.180"`, "tensor_parallel_size   = 2", `interface = "enp1s0f1np1"`, "workers        = [node.spark2]"}},
		{"single", Config{Nodes: 1}, []string{"workers        = []", "tensor_parallel_size   = 1"}},
		// The lab hub's tiny model has 2 layers: at most 2 pipeline stages.
		{"four with pp", Config{Nodes: 4}, []string{"pipeline_parallel_size = 2", "tensor_parallel_size   = 1", "model                  = model.tiny.source"}},
		{"per-node interfaces", Config{Overrides: []string{"spark2.fabric-ifname=enP2p1s0f1np1"}, FabricMTU: 9000},
			[]string{`spark2 = "enP2p1s0f1np1"`, "mtu       = 9000"}},
		{"no docker", Config{NoDocker: true}, []string{`network "fabric"`}},
		{"real vllm", Config{RealVLLM: true}, []string{`source   = "rayform-lab/tiny-llama"`, "tensor_parallel_size   = 2", `"--kv-cache-memory-bytes", "64M"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.cfg.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := c.nodes()
			if err != nil {
				t.Fatal(err)
			}
			l := &Lab{Name: c.Name, Dir: c.Dir, ClientNetns: c.Name + "-client", Nodes: nodes, Docker: !c.NoDocker,
				SSHConfig: c.Dir + "/ssh_config", KnownHosts: c.Dir + "/known_hosts", Key: c.Dir + "/id_ed25519"}
			if c.RealVLLM {
				l.RealRay, l.RealVLLM, l.Torch, l.HubLlamaDir = true, true, true, "/tmp/rayform-lab-cache/models/tiny-llama-KEY"
			}
			src := l.rayformHCL()
			for _, w := range tt.want {
				if !strings.Contains(src, w) {
					t.Errorf("rayform.hcl lacks %q:\n%s", w, src)
				}
			}
			if _, diags := config.LoadFiles(map[string][]byte{"rayform.hcl": []byte(src)}, config.Options{Kinds: resources.Kinds().Schemas()}); diags.HasErrors() {
				t.Errorf("rayform.hcl does not load: %v\n%s", diags, src)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b`: "/tmp/a b",
		`/plain`:      "/plain",
		`/x\011y\134`: "/x\ty\\",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInLabCgroup(t *testing.T) {
	tests := []struct {
		cgroup string
		want   bool
	}{
		{"4:pids:/rflab-spark1/abc", true},
		{"4:pids:/rflab-spark12", true},
		{"4:pids:/rflab-sparkx", false},
		{"4:pids:/rflab-spark1x/abc", false},
		{"0::/user.slice", false},
	}
	for _, tt := range tests {
		if got := cgroupLinesMatch(tt.cgroup, "/rflab-spark"); got != tt.want {
			t.Errorf("cgroup %q in lab = %v, want %v", tt.cgroup, got, tt.want)
		}
	}
}
