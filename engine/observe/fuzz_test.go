package observe

import (
	"reflect"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes: it must never panic, and must be
// deterministic. The seeds are small (one per kind of section) so the
// fuzzer's minimizer stays fast.
func FuzzParse(f *testing.F) {
	f.Add([]byte(newOut().
		sec("meta", "hostname=h\narch=aarch64", "", 0).
		sec("ip.addr", `[{"ifindex":2,"ifname":"e","flags":["UP","LOWER_UP"],"mtu":1500,"operstate":"UP","addr_info":[{"family":"inet","local":"192.168.200.12","prefixlen":24}]}]`, "", 0).
		sec("ip.route", `[{"dst":"default","gateway":"10.1.230.1","dev":"e"}]`, "", 0).
		sec("ip.default", "", "RTNETLINK answers: Network is unreachable", 2).
		sec("rdma", "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)", "", 0).
		sec("meminfo", "MemTotal: 1 kB\nMemAvailable: 1 kB", "", 0).
		sec("gpu", "0, NVIDIA GB10, GPU-1, [N/A], [N/A], [N/A], 580.126.09", "", 0).
		sec("docker.version", `{"Client":{"Version":"28"},"Server":null}`, "Cannot connect", 1).
		done()))
	f.Add([]byte(newOut().
		sec("docker.image ref=a:1", `{"Id":"sha256:1","Config":{"Entrypoint":["ray"],"Env":["A"]}}`, "", 0).
		sec("docker.history ref=a:1", `"RUN pip install ray==2.53.0"`, "", 0).
		sec("docker.containers envkeys=VLLM_HOST_IP", `{"ID":"1","Names":"n","Labels":"a=b,c","State":"running","Status":"Up"}`+"\n"+marker+" part inspect\n"+
			`{"Id":"1","Name":"/n","State":{"Status":"running","Running":true,"StartedAt":"2026-11-28T23:31:03Z"},"Config":{"Env":["VLLM_HOST_IP=1","HF_TOKEN"],"Cmd":["--api-key","x"]},"HostConfig":{"DeviceRequests":[{"Capabilities":[["gpu"]]}]}}`, "", 0).
		done()))
	f.Add([]byte(newOut().
		sec("http via=curl url="+testDashURL, `{"result":true,"data":{"result":{"total":1,"num_after_truncation":1,"result":[{"node_ip":"1.2.3.4","state":"ALIVE","resources_total":{"GPU":1.0,"memory":"1.5 GiB"}}]}}}`+"\n200", "", 0).
		sec("http via=exec url="+testDashURL, `[{"node_ip":"1.2.3.4","state":"DEAD","state_message":"x"}]`, "", 0).
		sec("http via=wget url="+testHealthURL, "", "  HTTP/1.1 503 Service Unavailable", 8).
		sec("http via=curl url="+testModelsURL, `{"data":[{"id":"m","max_model_len":8}]}`+"\n200", "", 0).
		sec("route.get addr=192.168.200.12", `[{"dst":"192.168.200.12","dev":"e","prefsrc":"192.168.200.13"}]`, "", 0).
		sec("tcp addr=192.168.200.12 port=6379", "", "Connection refused", 1).
		skip("docker.image ref=b:1", "docker unavailable").
		done()))
	f.Add([]byte(marker + " probe 1\n" + marker + " begin\n" + marker + " stderr\n" + marker + " end x\n" + marker + " skip\n" + marker + " begin gpu\n0, a"))
	f.Fuzz(func(t *testing.T, out []byte) {
		a, errA := Parse(out)
		b, errB := Parse(out)
		if (errA == nil) != (errB == nil) || errA == nil && (a == nil || !reflect.DeepEqual(a, b)) {
			t.Fatalf("Parse is not deterministic on %q", out)
		}
	})
}
