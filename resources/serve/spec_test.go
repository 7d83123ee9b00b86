package serve

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/servefiles"
)

// startServe runs spec's StartScript with sh, with its serve directory
// moved to dir and a PATH of bin, as docker exec -d would in the head
// container. The fake vllm on PATH says "ready" on the fifo, then reads
// stdin (so it lives until killed); startServe returns once it has.
func startServe(t *testing.T, spec ServeSpec, dir, bin string) *exec.Cmd {
	t.Helper()
	fifo := filepath.Join(dir, "ready.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	vllm := "#!/bin/sh\necho ready > " + fifo + "\nexec cat\n"
	if err := os.WriteFile(filepath.Join(bin, "vllm"), []byte(vllm), 0o755); err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(spec.StartScript(), servefiles.Dir, dir)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"PATH=" + bin}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	f, err := os.Open(fifo) // blocks until vllm opens it for writing
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if line, err := bufio.NewReader(f).ReadString('\n'); line != "ready\n" {
		t.Fatalf("vllm: %q, %v", line, err)
	}
	return cmd
}

// hostLockTest is the probe's test of the lock on the host: 75 while
// locked, 0 when free.
func hostLockTest(t *testing.T, lock string) int {
	t.Helper()
	err := exec.Command("sh", "-c", `flock -n -s -E 75 9 9<"$1"`, "probe", lock).Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// linkTools returns a directory of links to the named tools.
func linkTools(t *testing.T, tools ...string) string {
	t.Helper()
	bin := t.TempDir()
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s is not installed", tool)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// TestStartScriptHoldsTheLock runs the serve start script through sh with
// util-linux's flock(1): the exec'd vllm holds the lock for its life.
func TestStartScriptHoldsTheLock(t *testing.T) {
	bin := linkTools(t, "flock", "cat", "mkdir", "rm")
	dir := t.TempDir()
	spec := ServeSpec{Resource: "vllm_serve.qwen", Name: "qwen", Args: []string{"vllm", "serve", "m"}}
	cmd := startServe(t, spec, dir, bin)

	rec, err := os.ReadFile(filepath.Join(dir, "serve-qwen.json"))
	if err != nil || !strings.Contains(string(rec), `"spec_hash":"`+spec.Hash()+`"`) {
		t.Fatalf("record: %q, %v", rec, err)
	}
	pid, err := os.ReadFile(filepath.Join(dir, "serve-qwen.pid"))
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(cmd.Process.Pid) {
		t.Fatalf("pid file %q, %v; want the pid of the exec'd process %d", pid, err, cmd.Process.Pid)
	}
	lock := filepath.Join(dir, "serve-qwen.lock")
	if code := hostLockTest(t, lock); code != 75 {
		t.Fatalf("while vllm runs the host's flock test exits %d, want 75", code)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := hostLockTest(t, lock); code != 0 {
		t.Fatalf("after vllm was killed the host's flock test exits %d, want 0", code)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "serve-qwen.log")); len(log) != 0 {
		t.Fatalf("unexpected log: %s", log)
	}
}

// TestStartScriptWithoutFlock: an image without flock still starts the
// serve, says so in the log and leaves no lock file (the probe then asks
// the container).
func TestStartScriptWithoutFlock(t *testing.T) {
	bin := linkTools(t, "cat", "mkdir", "rm")
	dir := t.TempDir()
	spec := ServeSpec{Resource: "vllm_serve.qwen", Name: "qwen", Args: []string{"vllm", "serve", "m"}}
	startServe(t, spec, dir, bin)
	if _, err := os.Stat(filepath.Join(dir, "serve-qwen.lock")); !os.IsNotExist(err) {
		t.Fatalf("a lock file exists without flock: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "serve-qwen.json")); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "serve-qwen.log"))
	if !strings.Contains(string(log), "rayform: no lock for vllm serve qwen") {
		t.Fatalf("log: %q", log)
	}
}

// TestServeHostDirOfAnyNode: every node name, including for_each keys like
// gpu["h1"], gives a directory the probe accepts, and different names give
// different directories.
func TestServeHostDirOfAnyNode(t *testing.T) {
	nodes := []string{"spark1", `gpu["h1"]`, `gpu["h 1"]`, `gpu["h_1"]`, `gpu_"h1"_`, ".", "..", "", "a/b", "a_b"}
	seen := map[string]string{}
	for _, n := range nodes {
		dir := servefiles.Host("lab", n, "rayform-main")
		spec := observe.HostSpec{Records: []observe.RecordProbe{{Name: "serve-qwen", HostDir: dir, Container: "rayform-main", Dir: servefiles.Dir}}}
		if err := spec.Validate(); err != nil {
			t.Errorf("node %q: %s: %v", n, dir, err)
		}
		if strings.Count(dir, "/") != 6 {
			t.Errorf("node %q: %s is not one segment per name", n, dir)
		}
		if other, ok := seen[dir]; ok {
			t.Errorf("nodes %q and %q share %s", other, n, dir)
		}
		seen[dir] = n
	}
}

// TestJudgeModels: the one judgment of vLLM's /v1/models list, which plan
// (modelsDrift) and apply's verification (verifyHTTP) both call.
func TestJudgeModels(t *testing.T) {
	spec := ServeSpec{ServedName: "llama", MaxModelLen: 32768}
	tests := []struct {
		name   string
		models []Model
		where  string
		want   string
	}{
		{"served as declared", []Model{{ID: "llama", MaxModelLen: 32768}}, "", ""},
		{"another model", []Model{{ID: "qwen"}}, "", "vLLM serves qwen; want llama"},
		{"nothing served", nil, ` on gpu["h1"]`, `vLLM on gpu["h1"] serves (none); want llama`},
		{"another max_model_len", []Model{{ID: "llama", MaxModelLen: 16384}}, "", "vLLM serves llama with max_model_len 16384; want 32768"},
	}
	for _, tt := range tests {
		if got := judgeModels(tt.models, spec, tt.where); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := judgeModels([]Model{{ID: "llama", MaxModelLen: 16384}}, ServeSpec{ServedName: "llama"}, ""); got != "" {
		t.Errorf("no declared max_model_len: %q, want agreement", got)
	}
}
