package observe

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const (
	gb10Image = "hellohal2064/vllm-qwen3.5-gb10:latest"
	envAttr   = "envkeys=GLOO_SOCKET_IFNAME,NCCL_IB_HCA,NCCL_SOCKET_IFNAME,RAY_memory_monitor_refresh_ms,TP_SOCKET_IFNAME,UCX_NET_DEVICES,VLLM_HOST_IP"
)

// headOutput is a healthy DGX Spark head as the probe reports it, built
// from real tool output.
func headOutput(t testing.TB) []byte {
	return newOut().
		sec("meta", "hostname=spark1\narch=aarch64\n", "", 0).
		sec("ip.addr", fixture(t, "ip-addr-head.json"), "", 0).
		sec("ip.route", fixture(t, "ip-route-head.json"), "", 0).
		sec("ip.default", fixture(t, "ip-route-get-default-head.json"), "", 0).
		sec("route.get addr=192.168.200.13", fixture(t, "ip-route-get-peer-head.json"), "", 0).
		sec("rdma", fixture(t, "ibdev2netdev.txt"), "", 0).
		sec("meminfo", fixture(t, "meminfo-gb10.txt"), "", 0).
		sec("gpu", fixture(t, "nvidia-smi-gb10.csv"), "", 0).
		sec("docker.version", fixture(t, "docker-version-ok.json"), "", 0).
		sec("docker.image ref="+gb10Image, fixture(t, "docker-image-inspect.json"), "", 0).
		sec("docker.history ref="+gb10Image, fixture(t, "docker-history.jsonl"), "", 0).
		sec("docker.containers "+envAttr, fixture(t, "docker-ps-head.jsonl")+marker+" part inspect\n"+fixture(t, "docker-inspect-head.json"), "", 0).
		sec("http via=curl url="+testDashURL, fixture(t, "dashboard-nodes.json")+"\n200", "", 0).
		sec("http via=curl url="+testHealthURL, "\n200", "", 0).
		sec("http via=curl url="+testModelsURL, fixture(t, "vllm-models.json")+"\n200", "", 0).
		done()
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		name  string
		out   func(t testing.TB) []byte
		check func(t *testing.T, f *HostFacts)
	}{
		{
			name: "spark-head-gb10",
			out:  headOutput,
			check: func(t *testing.T, f *HostFacts) {
				if !f.UnifiedMemory || len(f.GPUs.List) != 1 || f.GPUs.List[0].MemoryTotalMiB != -1 || f.GPUs.List[0].Name != "NVIDIA GB10" {
					t.Errorf("GB10: unified %v, GPUs %+v", f.UnifiedMemory, f.GPUs)
				}
				if f.DefaultRoute.Src != netip.MustParseAddr("10.1.230.180") || f.DefaultRoute.Dev != "enP7s7" {
					t.Errorf("default route %+v, want the management address Ray would pick", f.DefaultRoute)
				}
				if got := f.Addresses.On("enp1s0f1np1"); len(got) != 2 || got[0] != netip.MustParsePrefix("192.168.200.12/24") {
					t.Errorf("fabric addresses %v", got)
				}
				if l, ok := f.Links.ByName("enp1s0f1np1"); !ok || !l.Up() || l.MTU != 1500 {
					t.Errorf("fabric link %+v", l)
				}
				if len(f.RDMA.List) != 4 || f.RDMA.List[1] != (RDMADevice{"rocep1s0f1", 1, "enp1s0f1np1", true}) {
					t.Errorf("RDMA %+v", f.RDMA)
				}
				if f.Memory.TotalBytes != 125453184*1024 || f.Memory.AvailableBytes != 119304528*1024 {
					t.Errorf("memory %+v", f.Memory)
				}
				if !f.Docker.Available || f.Docker.ServerVersion != "28.2.2" {
					t.Errorf("docker %+v", f.Docker)
				}
				if img := f.Images[0]; !img.Present || !slices.Contains(img.Installs, "ray[default]==2.53.0") {
					t.Errorf("image %+v", img)
				}
				head, ok := f.Containers.ByName("rayform-ray-head")
				if !ok || !head.Running || head.Status != "Up 2 hours" || head.Resource != "ray_cluster.main" ||
					head.SpecHash != "sha256:4f2a9c1e" || !head.GPUs || head.NetworkMode != "host" || head.Labels["com.nvidia.note"] != "a,b" {
					t.Errorf("head container %+v", head)
				}
				if head.Env["VLLM_HOST_IP"] != "192.168.200.12" || head.Env["HF_TOKEN"] != RedactedValue || head.Env["PATH"] != RedactedValue {
					t.Errorf("head env %v", head.Env)
				}
				serve, _ := f.Containers.ByName("rayform-vllm-qwen")
				if serve.Running || serve.ExitCode != 1 || serve.FinishedAt.IsZero() || serve.Env["VLLM_API_KEY"] != RedactedValue {
					t.Errorf("serve container %+v", serve)
				}
				if r := tableOf(f); r.Via != "curl" || r.Status != 200 || r.Err != "" || r.Body != fixture(t, "dashboard-nodes.json") {
					t.Errorf("node table %+v", r)
				}
				if h, m := healthOf(f), modelsOf(f); h.Status != 200 || m.Status != 200 || !strings.Contains(m.Body, `"qwen3.5-122b"`) {
					t.Errorf("health %+v, models %+v", h, m)
				}
				if len(f.RouteChecks) != 1 || f.RouteChecks[0].Dev != "enp1s0f1np1" || f.RouteChecks[0].Src != netip.MustParseAddr("192.168.200.12") {
					t.Errorf("route to worker %+v", f.RouteChecks)
				}
			},
		},
		{
			// The seeds' worker: no route to the head's management address,
			// docker socket not accessible to the SSH user.
			name: "spark-worker-seed",
			out: func(t testing.TB) []byte {
				return newOut().
					sec("meta", "hostname=spark2\narch=aarch64\n", "", 0).
					sec("ip.addr", fixture(t, "ip-addr-worker.json"), "", 0).
					sec("ip.route", fixture(t, "ip-route-worker.json"), "", 0).
					sec("ip.default", "", fixture(t, "ip-route-get-default-worker.stderr"), 2).
					sec("route.get addr=192.168.200.12", fixture(t, "ip-route-get-peer-worker.json"), "", 0).
					sec("route.get addr=10.1.230.180", "", fixture(t, "ip-route-get-mgmt-worker.stderr"), 2).
					sec("tcp addr=192.168.200.12 port=6379", "", "rf_tcp: connect: Connection refused\nrf_tcp: line 1: /dev/tcp/192.168.200.12/6379: Connection refused", 1).
					sec("tcp addr=10.1.230.180 port=6379", "", "", 124).
					sec("rdma", "", "", 0).
					sec("meminfo", fixture(t, "meminfo-gb10.txt"), "", 0).
					sec("gpu", fixture(t, "nvidia-smi-gb10.csv"), "", 0).
					sec("docker.version", fixture(t, "docker-version-permission.json"), fixture(t, "docker-version-permission.stderr"), 1).
					skip("docker.image ref="+gb10Image, "docker unavailable").
					skip("docker.containers "+envAttr, "docker unavailable").
					done()
			},
			check: func(t *testing.T, f *HostFacts) {
				if f.DefaultRoute.Err != "RTNETLINK answers: Network is unreachable" {
					t.Errorf("default route %+v", f.DefaultRoute)
				}
				if len(f.RouteChecks) != 2 || f.RouteChecks[0].Err != "" || f.RouteChecks[1].Err != "RTNETLINK answers: Network is unreachable" {
					t.Errorf("route checks %+v", f.RouteChecks)
				}
				if len(f.TCPChecks) != 2 || f.TCPChecks[0].Open || f.TCPChecks[0].Err != "connection refused" || f.TCPChecks[1].Err != "timed out" {
					t.Errorf("TCP checks %+v", f.TCPChecks)
				}
				if f.Docker.Available || !f.Docker.Installed || !strings.HasPrefix(f.Docker.Err, "permission denied while trying to connect to the Docker daemon socket") {
					t.Errorf("docker %+v", f.Docker)
				}
				if f.Images[0].Err != "not probed: docker unavailable" || f.Containers.Err != "not probed: docker unavailable" {
					t.Errorf("images %+v containers %+v", f.Images, f.Containers)
				}
				if len(f.RDMA.List) != 0 || f.RDMA.Err != "" {
					t.Errorf("no RDMA is not an error: %+v", f.RDMA)
				}
			},
		},
		{
			name: "h200-8gpu-ray-cli",
			out:  h200Output,
			check: func(t *testing.T, f *HostFacts) {
				if f.UnifiedMemory || len(f.GPUs.List) != 8 || f.GPUs.List[7].Index != 7 || f.GPUs.List[7].MemoryTotalMiB != 143771 || f.GPUs.List[7].MemoryFreeMiB != 143156 {
					t.Errorf("H200 GPUs: unified %v %+v", f.UnifiedMemory, f.GPUs)
				}
				if !f.Images[0].Present || f.Images[1].Present || f.Images[1].Err != "" {
					t.Errorf("images %+v", f.Images)
				}
				if r := tableOf(f); r.Via != "exec" || r.Err != "" || !strings.Contains(r.Body, "10.1.230.180") {
					t.Errorf("node table by its fallback command %+v", r)
				}
				if len(f.Containers.List) != 0 || f.Containers.Err != "" {
					t.Errorf("a named container that does not exist is not an error: %+v", f.Containers)
				}
			},
		},
		{
			name: "no-driver-wget",
			out: func(t testing.TB) []byte {
				return newOut().
					sec("meta", "hostname=gpu9\narch=x86_64\n", "", 0).
					sec("ip.addr", fixture(t, "ip-addr-local.json"), "", 0).
					sec("ip.route", fixture(t, "ip-route-local.json"), "", 0).
					sec("ip.default", fixture(t, "ip-route-get-default-head.json"), "", 0).
					sec("rdma", "", "", 0).
					sec("meminfo", fixture(t, "meminfo-h200.txt"), "", 0).
					sec("gpu", fixture(t, "nvidia-smi-nodriver.out"), "", 9).
					sec("docker.version", fixture(t, "docker-version-nodaemon.json"), fixture(t, "docker-version-nodaemon.stderr"), 1).
					sec("http via=wget url="+testDashURL, fixture(t, "dashboard-nodes-truncated.json"),
						"--2026-11-29 23:50:01--  http://127.0.0.1:8265/api/v0/nodes?limit=1000\nConnecting to 127.0.0.1:8265... connected.\nHTTP request sent, awaiting response... \n  HTTP/1.1 200 OK\n  Content-Type: application/json\n", 0).
					sec("http via=wget url="+testHealthURL, "", "--2026-11-29 23:50:01--  http://127.0.0.1:8000/health\nHTTP request sent, awaiting response... \n  HTTP/1.1 503 Service Unavailable\n2026-11-29 23:50:01 ERROR 503: Service Unavailable.", 8).
					sec("http via=wget url="+testModelsURL, "", "--2026-11-29 23:50:01--  http://127.0.0.1:8000/v1/models\nConnecting to 127.0.0.1:8000... failed: Connection refused.", 4).
					done()
			},
			check: func(t *testing.T, f *HostFacts) {
				if len(f.GPUs.List) != 0 || !strings.HasPrefix(f.GPUs.Err, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver") {
					t.Errorf("GPUs %+v", f.GPUs)
				}
				if f.Docker.Err != "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" || f.Docker.ClientVersion != "28.2.2" {
					t.Errorf("docker %+v", f.Docker)
				}
				if r := tableOf(f); r.Via != "wget" || r.Status != 200 || r.Body != fixture(t, "dashboard-nodes-truncated.json") {
					t.Errorf("node table by wget %+v", r)
				}
				if h, m := healthOf(f), modelsOf(f); h.Status != 503 || h.Err != "HTTP 503" || !m.Refused {
					t.Errorf("health %+v, models %+v", h, m)
				}
			},
		},
		{
			name: "malformed-sections",
			out: func(t testing.TB) []byte {
				return newOut().
					sec("meta", "garbage without equals\n", "", 0).
					sec("ip.addr", `[{"ifindex":1,"ifname":"lo","addr_in`, "", 0).
					sec("ip.route", fixture(t, "ip-route-head.json"), "", 0).
					sec("ip.default", "[]", "", 0).
					sec("rdma", "mlx5_0 port one ==> ib0 (Up)\n"+fixture(t, "ibdev2netdev.txt"), "", 0).
					sec("meminfo", "MemTotal: lots\n", "", 0).
					sec("gpu", "0, NVIDIA H200, GPU-x, 143771, 0, 143156, 580.159.04\ngarbage\n", "", 0).
					sec("docker.version", "not json", "", 0).
					sec("docker.image ref=a:1", "{not json", "", 0).
					sec("docker.image ref=b:1", "[]", "Error response from daemon: i/o timeout", 1).
					sec("docker.containers "+envAttr, "{\"ID\":\nnot json\n"+marker+" part inspect\n"+fixture(t, "docker-inspect-head.json"), "", 0).
					sec("http via=curl url="+testDashURL, "<html>oops</html>\n200", "", 0).
					sec("http via=curl url="+testHealthURL, "\n000", "curl: (28) Operation timed out after 2001 milliseconds with 0 bytes received", 28).
					sec("http via=curl url="+testModelsURL, "{\n200", "", 0).
					done()
			},
			check: func(t *testing.T, f *HostFacts) {
				for name, err := range map[string]string{
					"addresses": f.Addresses.Err, "links": f.Links.Err, "default": f.DefaultRoute.Err, "rdma": f.RDMA.Err,
					"memory": f.Memory.Err, "gpus": f.GPUs.Err, "docker": f.Docker.Err, "image a": f.Images[0].Err,
					"image b": f.Images[1].Err, "containers": f.Containers.Err, "health": healthOf(f).Err,
				} {
					if err == "" {
						t.Errorf("malformed %s section gave no Err", name)
					}
				}
				// What could be read still is.
				if len(f.Routes.List) != 3 || len(f.GPUs.List) != 1 || len(f.RDMA.List) != 4 || len(f.Containers.List) != 2 {
					t.Errorf("good parts lost: routes %d GPUs %d RDMA %d containers %d",
						len(f.Routes.List), len(f.GPUs.List), len(f.RDMA.List), len(f.Containers.List))
				}
			},
		},
		{
			name: "truncated",
			out: func(t testing.TB) []byte {
				full := headOutput(t)
				cut := bytes.Index(full, []byte("NVIDIA GB10"))
				return full[:cut]
			},
			check: func(t *testing.T, f *HostFacts) {
				if f.Complete {
					t.Error("truncated output reported complete")
				}
				if !strings.Contains(f.GPUs.Err, "ended inside") || !strings.Contains(f.Docker.Err, "missing") {
					t.Errorf("GPUs %+v docker %+v", f.GPUs, f.Docker)
				}
				if f.Memory.TotalBytes == 0 || len(f.Addresses.List) == 0 {
					t.Errorf("sections before the cut lost: %+v", f.Memory)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.out(t)
			f, err := Parse(out)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, f)
			got := mustJSON(t, f)
			for _, secret := range []string{"hf_SECRETTOKEN", "sk-SECRETKEY", "hf_BAKEDTOKEN"} {
				if bytes.Contains(got, []byte(secret)) {
					t.Errorf("secret %q kept in facts", secret)
				}
			}
			golden(t, "parse-"+tt.name+".json", got)
		})
	}
}

// h200Output is an 8-GPU H200 host whose head registered Ray on its
// management address (the seeds' failure), read with `ray list nodes`.
func h200Output(t testing.TB) []byte {
	return newOut().
		sec("meta", "hostname=h200-a\narch=x86_64\n", "", 0).
		sec("ip.addr", fixture(t, "ip-addr-head.json"), "", 0).
		sec("ip.route", fixture(t, "ip-route-head.json"), "", 0).
		sec("ip.default", fixture(t, "ip-route-get-default-head.json"), "", 0).
		sec("route.get addr=192.168.200.13", fixture(t, "ip-route-get-peer-head.json"), "", 0).
		sec("rdma", fixture(t, "ibdev2netdev.txt"), "", 0).
		sec("meminfo", fixture(t, "meminfo-h200.txt"), "", 0).
		sec("gpu", fixture(t, "nvidia-smi-h200x8.csv"), "", 0).
		sec("docker.version", fixture(t, "docker-version-ok.json"), "", 0).
		sec("docker.image ref=vllm/vllm-openai:v0.17.1", fixture(t, "docker-image-inspect.json"), "", 0).
		sec("docker.history ref=vllm/vllm-openai:v0.17.1", fixture(t, "docker-history-noray.jsonl"), "", 0).
		sec("docker.image ref=rayproject/ray:2.53.0", "[]", "Error response from daemon: No such image: rayproject/ray:2.53.0", 1).
		sec("docker.containers "+envAttr, marker+" part inspect\n", "Error: No such container: rayform-ray-head", 1).
		sec("http via=exec url="+testDashURL, fixture(t, "ray-list-nodes.json"), "2026-11-29 23:50:01,123\tWARNING utils.py:1 -- a warning", 0).
		sec("http via=curl url="+testHealthURL, "\n000", "curl: (7) Failed to connect to 127.0.0.1 port 8000 after 0 ms: Couldn't connect to server", 7).
		sec("http via=curl url="+testModelsURL, "\n000", "curl: (7) Failed to connect to 127.0.0.1 port 8000 after 0 ms: Couldn't connect to server", 7).
		done()
}

func TestParseNotProbeOutputIs(t *testing.T) {
	_, err := Parse([]byte("bash: line 1: sh: command not found\n"))
	if !errors.Is(err, ErrNotProbeOutput) {
		t.Errorf("err = %v, want ErrNotProbeOutput", err)
	}
}

func TestRedactArgs(t *testing.T) {
	got := redactArgs([]string{"serve", "m", "--api-key", "sk-1", "--token=t", "--port", "8000", "--api-key"})
	want := []string{"serve", "m", "--api-key", RedactedValue, "--token=" + RedactedValue, "--port", "8000", "--api-key"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("redactArgs = %q, want %q", got, want)
	}
}

// TestInstalls: the package words of an install command in a build step,
// in the same simple command only, without flags, comments, URLs or
// users.
func TestInstalls(t *testing.T) {
	tests := []struct {
		step string
		want []string
	}{
		{`RUN /bin/sh -c pip install --no-cache-dir "ray[default]==2.53.0" && pip cache purge`, []string{"ray[default]==2.53.0"}},
		{`RUN |1 X=1 /bin/sh -c uv pip install --system ray==2.40.0`, []string{"ray==2.40.0"}},
		{`RUN /bin/sh -c python3 -m pip install -U ray`, []string{"ray"}},
		{`RUN /bin/sh -c pip install vllm raylib # buildkit`, []string{"vllm", "raylib"}},
		{`RUN /bin/sh -c echo install ray later`, nil},
		{`RUN /bin/sh -c pip download ray; install.sh`, nil},
		{`RUN /bin/sh -c pip install git+https://tok@example.com/x.git u@host x`, []string{"x"}},
	}
	for _, tt := range tests {
		if got := installs(tt.step); !slices.Equal(got, tt.want) {
			t.Errorf("installs(%q) = %q, want %q", tt.step, got, tt.want)
		}
	}
}

// TestParseRealH100 reads what rayform's own probe printed on a real H100
// host (testdata/observe/h100, README there for provenance): the GPU facts
// the image judgment reads must come out of the real nvidia-smi's text.
func TestParseRealH100(t *testing.T) {
	f, err := Parse([]byte(fixture(t, "h100/probe.out")))
	if err != nil {
		t.Fatal(err)
	}
	want := GPUFacts{
		List: []GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-485d5152-73b4-0522-3ce3-168526eda750",
			MemoryTotalMiB: 81559, MemoryUsedMiB: 0, MemoryFreeMiB: 81079, Driver: "580.159.04", ComputeCap: "9.0", MIGMode: "Disabled"}},
		CUDA:    "13.0",
		LibCUDA: "/usr/local/nvidia/lib64/libcuda.so.580.159.04",
	}
	if !reflect.DeepEqual(f.GPUs, want) {
		t.Errorf("GPUs:\n got %+v\nwant %+v", f.GPUs, want)
	}
	if f.UnifiedMemory {
		t.Error("an H100 reported as unified memory")
	}
}

// TestParseGPUQueries: each form of the gpu section the probe can print.
func TestParseGPUQueries(t *testing.T) {
	tests := []struct {
		name, stdout string
		rc           int
		want         GPUFacts
	}{
		{"seven-field fallback (a driver without compute_cap)", captured(t, "h100/smi-query7.txt"), 0, GPUFacts{List: []GPU{{Index: 0,
			Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-485d5152-73b4-0522-3ce3-168526eda750", MemoryTotalMiB: 81559, MemoryFreeMiB: 81079, Driver: "580.159.04"}}}},
		{"MIG enabled, NVSwitches, fabric manager failed, a compat libcuda",
			"0, NVIDIA H100 80GB HBM3, GPU-a, 81559, 0, 81079, 535.54.03, 9.0, Enabled\n" +
				marker + " part version\nCUDA Version        : 12.2\n" +
				marker + " part nvswitch\n0000:05:00.0\n0000:06:00.0\n" +
				marker + " part fabricmanager\nLoadState=loaded\nActiveState=failed\n" +
				marker + " part libcuda\n/usr/local/cuda-12.8/compat/libcuda.so.570.86.10\n", 0,
			GPUFacts{List: []GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-a", MemoryTotalMiB: 81559, MemoryFreeMiB: 81079, Driver: "535.54.03", ComputeCap: "9.0", MIGMode: "Enabled"}},
				CUDA: "12.2", NVSwitches: []string{"0000:05:00.0", "0000:06:00.0"}, FabricManager: "failed", LibCUDA: "/usr/local/cuda-12.8/compat/libcuda.so.570.86.10"}},
		{"fabric manager not installed, MIG N/A",
			"0, NVIDIA A100-SXM4-80GB, GPU-b, 81920, 0, 81000, 550.54.15, 8.0, [N/A]\n" +
				marker + " part nvswitch\n0000:05:00.0\n" + marker + " part fabricmanager\nLoadState=not-found\nActiveState=inactive\n", 0,
			GPUFacts{List: []GPU{{Index: 0, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-b", MemoryTotalMiB: 81920, MemoryFreeMiB: 81000, Driver: "550.54.15", ComputeCap: "8.0"}},
				NVSwitches: []string{"0000:05:00.0"}, FabricManager: "not-found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse(newOut().sec("meta", "hostname=x\n", "", 0).sec("gpu", tt.stdout, "", tt.rc).done())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.GPUs, tt.want) {
				t.Errorf("GPUs:\n got %+v\nwant %+v", f.GPUs, tt.want)
			}
		})
	}
}

// captured is the tool output in a capture of testdata/observe/h100: the
// file less run.sh's "$ command" line and its "[exit N]" line.
func captured(t testing.TB, name string) string {
	lines := strings.Split(strings.TrimSuffix(fixture(t, name), "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "$ ") || !strings.HasPrefix(lines[len(lines)-1], "[exit ") {
		t.Fatalf("%s is not a run.sh capture", name)
	}
	return strings.Join(lines[1:len(lines)-1], "\n") + "\n"
}
