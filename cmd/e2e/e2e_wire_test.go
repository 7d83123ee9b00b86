//go:build linux

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2ESecretsStayOnTheirNode is issue 38 item 4: vLLM's Ray executor
// copies the driver's HF_TOKEN and VLLM_* variables to every worker, in
// clear over the fabric (vllm/ray/ray_env.py; before, rayform's
// non-carry-over list held only the network's pins, and the serve's
// VLLM_API_KEY went to spark2 that way). With every secret name in the
// list, the fabric carries neither the serve's key nor the cluster's
// HF_TOKEN, each worker reads its own from its node's container, and the
// serve still answers with its key. The wire is captured on spark2's
// fabric port (tcpdump) from before the apply until after a completion;
// the serve's own log line of what it copies says the same.
func TestE2ESecretsStayOnTheirNode(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Skip("tcpdump is not installed (.ci/install-deps test installs it)")
	}
	l := startLab(t, "rfe2ewire")
	const apiKey, hfToken = "rfKEYa61c7be0f3d4e2", "hf_rfTOKENc81e9a3b5d7f"
	cfg := clusterConfig("enp1s0f1np1", seedImage, false, 0.85)
	cfg = strings.Replace(cfg, "  dataplane_check = false\n", "  dataplane_check = false\n  env = { HF_TOKEN = var.hf_token }\n", 1)
	cfg = strings.Replace(cfg, "  ready_timeout          = \"2m\"\n", "  ready_timeout          = \"2m\"\n  api_key                = var.api_key\n", 1)
	cfg += `
variable "hf_token" {
  type      = string
  sensitive = true
  default   = "` + hfToken + `"
}

variable "api_key" {
  type      = string
  sensitive = true
  default   = "` + apiKey + `"
}
`
	dir := l.config(cfg)

	pcap := filepath.Join(t.TempDir(), "fabric.pcap")
	capture := exec.Command("ip", "netns", "exec", l.name+"-spark2", "tcpdump", "-i", "enp1s0f1np1", "-U", "-s", "0", "-w", pcap)
	capErr := &syncBuffer{}
	capture.Stderr = capErr
	if err := capture.Start(); err != nil {
		t.Fatal(err)
	}
	// tcpdump says it listens once its capture is open.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(capErr.String(), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("tcpdump did not start: %s", capErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = capture.Process.Signal(os.Interrupt)
			_ = capture.Wait()
		}
	}
	t.Cleanup(stop)

	mustCode(t, "apply", l.rayform("", "-chdir="+dir, "apply", "-auto-approve"), exitOK)
	out, err := l.ssh("spark1", `curl -sS -m 10 http://192.168.200.12:8000/v1/completions -H 'Authorization: Bearer `+apiKey+`' -H 'Content-Type: application/json' -d '{"model":"qwen3.5-122b","prompt":"Hello","max_tokens":4}'`)
	if err != nil || !strings.Contains(out, `"text"`) {
		t.Fatalf("completion with the key: %v\n%s", err, out)
	}
	stop()

	n := 0
	if m := regexp.MustCompile(`(\d+) packets captured`).FindStringSubmatch(capErr.String()); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if n < 100 {
		t.Fatalf("the capture of spark2's fabric port saw too little to prove anything: %s", capErr.String())
	}
	wire, err := os.ReadFile(pcap)
	if err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string]string{"the serve's api_key": apiKey, "the cluster's HF_TOKEN": hfToken} {
		if bytes.Contains(wire, []byte(secret)) {
			t.Errorf("%s crossed the fabric to spark2 (%d bytes captured)", name, len(wire))
		}
	}

	// The serve's log says what vLLM copies to the workers.
	log, err := l.ssh("spark1", "docker exec rayform-spark cat /tmp/rayform/serve/serve-qwen.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "Copying the following environment variables to workers") &&
			(strings.Contains(line, "VLLM_API_KEY") || strings.Contains(line, "HF_TOKEN")) {
			t.Errorf("vLLM copies a secret to the workers: %s", line)
		}
	}
	if !strings.Contains(log, "RAY_NON_CARRY_OVER_ENV_VARS from config") {
		t.Errorf("the serve's log does not show vLLM reading rayform's non-carry-over list:\n%s", log)
	}
	// spark2's worker has its own HF_TOKEN, from its node's container.
	if env, err := l.ssh("spark2", "docker exec rayform-spark sh -c 'tr \"\\0\" \"\\n\" < /proc/1/environ'"); err != nil || !strings.Contains(env, "HF_TOKEN="+hfToken) {
		t.Errorf("spark2's container lacks its own HF_TOKEN: %v", err)
	}
	mustCode(t, "destroy", l.rayform("", "-chdir="+dir, "destroy", "-auto-approve"), exitOK)
}
