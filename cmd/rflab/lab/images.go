//go:build linux

package lab

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/state/jsonfile"
)

// Images are built here, without Docker: each layer is a deterministic tar
// (busybox with its applets, simnode with its ray/vllm/flock names, or an
// incompressible filler) compressed into a blob in the cache directory; an
// image is a Docker v2 schema 2 manifest over such blobs. Up then lays the
// blobs out in the registry's filesystem storage (hard links, so a second
// lab costs nothing) and the registry serves them; every pull by a node's
// dockerd is a real pull over the management network.

const (
	imageFormat = "rayform-lab-image-v2"
	mediaLayer  = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	mediaConfig = "application/vnd.docker.container.image.v1+json"
	mediaV2     = "application/vnd.docker.distribution.manifest.v2+json"
)

// layerEpoch is the mtime of every file in the lab's images.
var layerEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// blobRef is a content-addressed blob in the cache.
type blobRef struct {
	Digest string `json:"digest"` // sha256:<hex> of the blob
	Size   int64  `json:"size"`
	DiffID string `json:"diff_id,omitempty"` // layers: sha256 of the uncompressed tar
}

// builtImage is one image ready to be served: its manifest and every blob.
type builtImage struct {
	Repo     string
	Tags     []string
	Manifest blobRef
	Blobs    []blobRef // config and layers
}

// imageCache builds and keeps blobs under dir.
type imageCache struct {
	dir string
}

func (c imageCache) blobPath(digest string) string {
	return filepath.Join(c.dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

// layer returns the cached layer called key, building it with fill if needed.
func (c imageCache) layer(key string, level int, fill func(*tar.Writer) error) (blobRef, error) {
	meta := filepath.Join(c.dir, "layers", key+".json")
	if b, err := os.ReadFile(meta); err == nil {
		var ref blobRef
		if json.Unmarshal(b, &ref) == nil {
			if st, err := os.Stat(c.blobPath(ref.Digest)); err == nil && st.Size() == ref.Size {
				return ref, nil
			}
		}
	}
	for _, d := range []string{filepath.Join(c.dir, "layers"), filepath.Join(c.dir, "blobs", "sha256")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return blobRef{}, fmt.Errorf("image cache: %w", err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Join(c.dir, "blobs"), "layer-*")
	if err != nil {
		return blobRef{}, fmt.Errorf("image cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	blobHash, diffHash := sha256.New(), sha256.New()
	counter := &countWriter{}
	gz, err := gzip.NewWriterLevel(io.MultiWriter(tmp, blobHash, counter), level)
	if err != nil {
		tmp.Close()
		return blobRef{}, err
	}
	tw := tar.NewWriter(io.MultiWriter(gz, diffHash))
	err = fill(tw)
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return blobRef{}, fmt.Errorf("build layer %s: %w", key, err)
	}
	ref := blobRef{Digest: digestOf(blobHash), Size: counter.n, DiffID: digestOf(diffHash)}
	if err := os.Rename(tmp.Name(), c.blobPath(ref.Digest)); err != nil {
		return blobRef{}, fmt.Errorf("store layer %s: %w", key, err)
	}
	b, _ := json.Marshal(ref)
	if err := jsonfile.WriteAtomic(meta, b, 0o644); err != nil {
		return blobRef{}, err
	}
	return ref, nil
}

// prune removes layers (and their blobs) built by other image format
// versions, whose keys do not start with keep, unless a kept layer has the
// same blob; the big filler would otherwise stay in the cache for good.
func (c imageCache) prune(keep string) {
	metas, _ := filepath.Glob(filepath.Join(c.dir, "layers", "*.json"))
	read := func(m string) string {
		var ref blobRef
		if b, err := os.ReadFile(m); err == nil && json.Unmarshal(b, &ref) == nil {
			return ref.Digest
		}
		return ""
	}
	kept := map[string]bool{}
	for _, m := range metas {
		if strings.HasPrefix(filepath.Base(m), keep) {
			kept[read(m)] = true
		}
	}
	for _, m := range metas {
		if strings.HasPrefix(filepath.Base(m), keep) {
			continue
		}
		if d := read(m); d != "" && !kept[d] {
			_ = os.Remove(c.blobPath(d))
		}
		_ = os.Remove(m)
	}
}

// pruneOthers removes the layers whose keys start with prefix but are not
// prefix+keep (an old torch layer after the packages changed), and their
// blobs unless the kept layer has the same one: a key that changed with
// the same content (the torch layer's key follows dpkg's status file, which
// any apt-get run touches) rebuilds the very blob the old key named.
func (c imageCache) pruneOthers(prefix, keep string) {
	metas, _ := filepath.Glob(filepath.Join(c.dir, "layers", prefix+"*.json"))
	read := func(m string) string {
		var ref blobRef
		if b, err := os.ReadFile(m); err == nil && json.Unmarshal(b, &ref) == nil {
			return ref.Digest
		}
		return ""
	}
	kept := read(filepath.Join(c.dir, "layers", prefix+keep+".json"))
	for _, m := range metas {
		if filepath.Base(m) == prefix+keep+".json" {
			continue
		}
		if d := read(m); d != "" && d != kept {
			_ = os.Remove(c.blobPath(d))
		}
		_ = os.Remove(m)
	}
}

// putBlob stores small content (configs, manifests) in the cache.
func (c imageCache) putBlob(data []byte) (blobRef, error) {
	sum := sha256.Sum256(data)
	ref := blobRef{Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
	path := c.blobPath(ref.Digest)
	if st, err := os.Stat(path); err == nil && st.Size() == ref.Size {
		return ref, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return blobRef{}, fmt.Errorf("image cache: %w", err)
	}
	return ref, jsonfile.WriteAtomic(path, data, 0o644)
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func digestOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func fileDigest(path string) (string, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), b, nil
}

// checkStatic fails unless path is a statically linked ELF executable (it
// runs inside scratch images that have no dynamic loader).
func checkStatic(path, what string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s %s is dynamically linked; it must be static (busybox-static; CGO_ENABLED=0 go build)", what, path)
		}
	}
	return nil
}

// tarEntries writes entries sorted by name.
type tarEntry struct {
	name     string
	typ      byte
	mode     int64
	linkname string
	data     []byte
}

func writeEntries(tw *tar.Writer, entries []tarEntry) error {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.linkname,
			ModTime: layerEpoch, Uname: "root", Gname: "root", Format: tar.FormatPAX,
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
		}
	}
	return nil
}

// baseEntries is a minimal root filesystem: busybox with every applet, a
// bash stand-in, /etc/passwd and the directories images expect.
func baseEntries(busybox []byte, applets []string) []tarEntry {
	var es []tarEntry
	dir := func(name string, mode int64) {
		es = append(es, tarEntry{name: name + "/", typ: tar.TypeDir, mode: mode})
	}
	file := func(name string, mode int64, data string) {
		es = append(es, tarEntry{name: name, typ: tar.TypeReg, mode: mode, data: []byte(data)})
	}
	for _, d := range []string{"bin", "dev", "etc", "etc/simnode", "home", "opt", "proc", "run", "sbin", "sys",
		"usr", "usr/bin", "usr/local", "usr/local/bin", "usr/sbin", "var", "var/log", "workspace"} {
		dir(d, 0o755)
	}
	dir("root", 0o700)
	dir("tmp", 0o1777)
	dir("var/tmp", 0o1777)
	es = append(es, tarEntry{name: "bin/busybox", typ: tar.TypeReg, mode: 0o755, data: busybox})
	hasBash := false
	for _, a := range applets {
		a = strings.TrimPrefix(a, "/")
		if a == "" || a == "bin/busybox" {
			continue
		}
		if a == "bin/bash" {
			hasBash = true
		}
		es = append(es, tarEntry{name: a, typ: tar.TypeSymlink, mode: 0o777, linkname: "/bin/busybox"})
	}
	if !hasBash {
		// busybox has no bash applet; launch scripts run `bash -c "..."`.
		file("bin/bash", 0o755, "#!/bin/sh\n# bash stand-in of the rayform lab image (busybox ash)\nexec /bin/sh \"$@\"\n")
	}
	file("etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
	file("etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n")
	file("etc/nsswitch.conf", 0o644, "hosts: files dns\n")
	file("etc/os-release", 0o644, "PRETTY_NAME=\"rayform lab image (busybox + simnode)\"\nID=rayform-lab\n")
	return es
}

// simnodeEntries installs simnode as /usr/local/bin/simnode plus the names
// it plays inside images.
func simnodeEntries(simnode []byte, withRay bool) []tarEntry {
	es := []tarEntry{
		{name: "usr/local/bin/simnode", typ: tar.TypeReg, mode: 0o755, data: simnode},
		{name: "usr/local/bin/vllm", typ: tar.TypeSymlink, mode: 0o777, linkname: "simnode"},
		// On a GPU host the NVIDIA container toolkit mounts nvidia-smi into
		// --gpus containers; here it is in the image and finds the GPUs the
		// hook copied in (without --gpus it finds no driver).
		{name: "usr/bin/nvidia-smi", typ: tar.TypeSymlink, mode: 0o777, linkname: "/usr/local/bin/simnode"},
		// util-linux's flock(1), which vLLM's Ubuntu images have and
		// Debian's busybox-static lacks: rayform's serve start script
		// holds a lock with it that the host probes.
		{name: "usr/local/bin/flock", typ: tar.TypeSymlink, mode: 0o777, linkname: "simnode"},
	}
	if withRay {
		es = append(es, tarEntry{name: "usr/local/bin/ray", typ: tar.TypeSymlink, mode: 0o777, linkname: "simnode"})
	}
	return es
}

// fillerLayer writes one file of mib MiB of deterministic incompressible bytes.
func fillerLayer(mib int) func(*tar.Writer) error {
	return func(tw *tar.Writer) error {
		if err := writeEntries(tw, []tarEntry{{name: "opt/", typ: tar.TypeDir, mode: 0o755}}); err != nil {
			return err
		}
		size := int64(mib) << 20
		h := &tar.Header{Name: "opt/lab-filler.bin", Typeflag: tar.TypeReg, Mode: 0o644, Size: size,
			ModTime: layerEpoch, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		var seed [32]byte
		copy(seed[:], imageFormat+"/filler")
		rng := rand.NewChaCha8(seed)
		buf := make([]byte, 1<<20)
		for range mib {
			_, _ = rng.Read(buf)
			if _, err := tw.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
}

// imageDef is one image of the lab.
type imageDef struct {
	role       string
	name       string // repo:tag
	extraTags  []string
	layers     []blobRef
	entrypoint []string
	cmd        []string
	env        []string // beyond PATH
}

// realRayEnv is the Ray images' environment with the real Ray. Both are
// the lab's, not rayform's: Ray's usage-stats reporter would try to reach
// Ray's server (the lab has no route out; this keeps it from trying), and
// the dashboard's module processes, each importing Ray, miss Ray's 30 s
// readiness timeout on a loaded 2-core machine.
var realRayEnv = []string{"RAY_USAGE_STATS_ENABLED=0", "RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT=300"}

// imageOptions chooses what the Ray images carry beyond busybox and simnode.
type imageOptions struct {
	// torch: this machine's python3 and python3-torch (see torch.go).
	torch bool
	// realRay: the real Ray (see ray.go) instead of simnode's ray; implies
	// torch, whose python3 runs it.
	realRay bool
	// rayStats, when set, receives what building the Ray layer cost (left
	// zero when the layer came from the cache).
	rayStats *RayBuildStats
}

// buildImages builds (or finds cached) the lab's three images. With torch,
// ImageRayVLLM and ImageBig also carry this machine's python3 and
// python3-torch (see torch.go); with realRay, the real Ray too (ray.go).
func buildImages(ctx context.Context, cacheDir, busyboxPath, simnodePath string, bigMiB int, opt imageOptions) ([]builtImage, error) {
	cache := imageCache{dir: cacheDir}
	if err := checkStatic(busyboxPath, "busybox"); err != nil {
		return nil, err
	}
	if err := checkStatic(simnodePath, "simnode"); err != nil {
		return nil, err
	}
	bbSum, busybox, err := fileDigest(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("read busybox: %w", err)
	}
	out, err := run(ctx, "", busyboxPath, "--list-full")
	if err != nil {
		return nil, fmt.Errorf("list busybox applets: %w", err)
	}
	applets := strings.Fields(string(out))
	snSum, simnode, err := fileDigest(simnodePath)
	if err != nil {
		return nil, fmt.Errorf("read simnode: %w", err)
	}
	base, err := cache.layer(imageFormat+"-base-"+bbSum[:16], gzip.BestSpeed, func(tw *tar.Writer) error {
		return writeEntries(tw, baseEntries(busybox, applets))
	})
	if err != nil {
		return nil, err
	}
	withRay, err := cache.layer(imageFormat+"-simnode-ray-"+snSum[:16], gzip.BestSpeed, func(tw *tar.Writer) error {
		return writeEntries(tw, simnodeEntries(simnode, true))
	})
	if err != nil {
		return nil, err
	}
	noRay, err := cache.layer(imageFormat+"-simnode-noray-"+snSum[:16], gzip.BestSpeed, func(tw *tar.Writer) error {
		return writeEntries(tw, simnodeEntries(simnode, false))
	})
	if err != nil {
		return nil, err
	}
	filler, err := cache.layer(fmt.Sprintf("%s-filler-%dmib", imageFormat, bigMiB), gzip.NoCompression, fillerLayer(bigMiB))
	if err != nil {
		return nil, err
	}
	rayLayers := []blobRef{base, withRay}
	if opt.realRay {
		// simnode still plays vllm, nvidia-smi and flock; ray is Ray's own.
		rayLayers = []blobRef{base, noRay}
	}
	if opt.torch || opt.realRay {
		key, err := torchKey()
		if err != nil {
			return nil, err
		}
		layer, err := cache.layer(imageFormat+"-torch-"+key, gzip.BestSpeed, func(tw *tar.Writer) error {
			set, err := collectTorch(ctx)
			if err != nil {
				return err
			}
			return set.write(tw)
		})
		if err != nil {
			return nil, err
		}
		rayLayers = append(rayLayers, layer)
		cache.pruneOthers(imageFormat+"-torch-", key)
	}
	if opt.realRay {
		key, err := rayKey()
		if err != nil {
			return nil, err
		}
		var stats RayBuildStats
		layer, err := cache.layer(imageFormat+"-ray-"+key, gzip.BestSpeed, func(tw *tar.Writer) error {
			return buildRayLayer(ctx, tw, filepath.Join(cacheDir, "ray-wheels"), cacheDir, &stats)
		})
		if err != nil {
			return nil, err
		}
		if opt.rayStats != nil {
			*opt.rayStats = stats
		}
		rayLayers = append(rayLayers, layer)
		cache.pruneOthers(imageFormat+"-ray-", key)
	}
	cache.prune(imageFormat + "-")
	var rayEnv []string
	if opt.realRay {
		rayEnv = realRayEnv
	}
	defs := []imageDef{
		{role: "ray-vllm", name: ImageRayVLLM, layers: rayLayers, cmd: []string{"/bin/bash"}, env: rayEnv},
		{role: "no-ray", name: ImageNoRay, extraTags: []string{"latest"}, layers: []blobRef{base, noRay},
			entrypoint: []string{"vllm", "serve"}},
		{role: "big", name: ImageBig, layers: append(append([]blobRef{}, rayLayers...), filler), cmd: []string{"/bin/bash"}, env: rayEnv},
	}
	var images []builtImage
	for _, d := range defs {
		img, err := d.build(cache)
		if err != nil {
			return nil, err
		}
		images = append(images, img)
	}
	return images, nil
}

func (d imageDef) build(cache imageCache) (builtImage, error) {
	diffIDs := make([]string, len(d.layers))
	history := make([]map[string]any, len(d.layers))
	for i, l := range d.layers {
		diffIDs[i] = l.DiffID
		history[i] = map[string]any{"created": layerEpoch, "created_by": "rayform lab (" + d.role + " layer " + fmt.Sprint(i) + ")"}
	}
	config := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      layerEpoch,
		"config": map[string]any{
			"Env":        append([]string{"PATH=" + stdPath}, d.env...),
			"Entrypoint": d.entrypoint,
			"Cmd":        d.cmd,
			"WorkingDir": "/workspace",
			"Labels":     map[string]string{"org.opencontainers.image.title": d.name, "dev.rayform.lab.role": d.role},
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": diffIDs},
		"history": history,
	}
	cb, err := json.Marshal(config)
	if err != nil {
		return builtImage{}, err
	}
	cref, err := cache.putBlob(cb)
	if err != nil {
		return builtImage{}, err
	}
	type desc struct {
		MediaType string `json:"mediaType"`
		Size      int64  `json:"size"`
		Digest    string `json:"digest"`
	}
	manifest := struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		Config        desc   `json:"config"`
		Layers        []desc `json:"layers"`
	}{SchemaVersion: 2, MediaType: mediaV2, Config: desc{mediaConfig, cref.Size, cref.Digest}}
	for _, l := range d.layers {
		manifest.Layers = append(manifest.Layers, desc{mediaLayer, l.Size, l.Digest})
	}
	mb, err := json.MarshalIndent(manifest, "", "   ")
	if err != nil {
		return builtImage{}, err
	}
	mref, err := cache.putBlob(mb)
	if err != nil {
		return builtImage{}, err
	}
	repo, tag, _ := strings.Cut(d.name, ":")
	return builtImage{
		Repo:     repo,
		Tags:     append([]string{tag}, d.extraTags...),
		Manifest: mref,
		Blobs:    append([]blobRef{cref}, d.layers...),
	}, nil
}

// populateRegistry lays the images out in the registry's filesystem storage
// (the layout distribution's filesystem driver uses), linking blobs from the
// cache.
func populateRegistry(cacheDir, root string, images []builtImage) error {
	cache := imageCache{dir: cacheDir}
	v2 := filepath.Join(root, "docker", "registry", "v2")
	link := func(path, digest string) error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, []byte(digest), 0o644)
	}
	putBlob := func(ref blobRef) error {
		hexd := strings.TrimPrefix(ref.Digest, "sha256:")
		dst := filepath.Join(v2, "blobs", "sha256", hexd[:2], hexd, "data")
		if _, err := os.Stat(dst); err == nil {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		src := cache.blobPath(ref.Digest)
		if err := os.Link(src, dst); err == nil {
			return nil
		}
		return copyFile(src, dst)
	}
	for _, img := range images {
		repo := filepath.Join(v2, "repositories", filepath.FromSlash(img.Repo))
		for _, b := range append([]blobRef{img.Manifest}, img.Blobs...) {
			if err := putBlob(b); err != nil {
				return fmt.Errorf("registry storage for %s: %w", img.Repo, err)
			}
		}
		for _, b := range img.Blobs {
			hexd := strings.TrimPrefix(b.Digest, "sha256:")
			if err := link(filepath.Join(repo, "_layers", "sha256", hexd, "link"), b.Digest); err != nil {
				return fmt.Errorf("registry storage for %s: %w", img.Repo, err)
			}
		}
		mhex := strings.TrimPrefix(img.Manifest.Digest, "sha256:")
		if err := link(filepath.Join(repo, "_manifests", "revisions", "sha256", mhex, "link"), img.Manifest.Digest); err != nil {
			return fmt.Errorf("registry storage for %s: %w", img.Repo, err)
		}
		for _, tag := range img.Tags {
			t := filepath.Join(repo, "_manifests", "tags", tag)
			if err := link(filepath.Join(t, "current", "link"), img.Manifest.Digest); err != nil {
				return fmt.Errorf("registry storage for %s:%s: %w", img.Repo, tag, err)
			}
			if err := link(filepath.Join(t, "index", "sha256", mhex, "link"), img.Manifest.Digest); err != nil {
				return fmt.Errorf("registry storage for %s:%s: %w", img.Repo, tag, err)
			}
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// registryConfig renders the registry's config.yml.
func registryConfig(root, addr string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, `version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
`, root, addr)
	return b.String()
}

var errNoSimnode = errors.New("simnode binary not found")
