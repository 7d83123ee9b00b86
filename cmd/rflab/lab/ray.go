//go:build linux

package lab

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The Ray layer puts the real Ray (ray[default] at RayVersion, from PyPI,
// every dependency pinned by version and hash in labimage/ray-lock.txt)
// into the Ray + vLLM image, on top of the torch layer's python3 (Debian's
// 3.11, the interpreter the wheels are installed for). It is built like the
// torch layer, without Docker: pip downloads the wheels into the lab cache
// (cacheDir/ray-wheels; offline once they are there), installs them with
// --root into a staging directory (/usr/local/lib/python3.11/dist-packages
// and the /usr/local/bin entry points, `ray` among them, compiled modules
// included), and the layer is that tree plus every shared library its
// native parts load (ldd's closure of the wheels' extension modules and of
// Ray's gcs_server and raylet) and the lab's libnvidia-ml.so.1 (see
// labimage/libnvidia-ml.c), compiled here with cc, through which Ray counts
// the node's simulated GPUs as it counts a real host's.

// RayVersion is the Ray the lab image carries: the seeds' (2.53.0).
const RayVersion = "2.53.0"

//go:embed labimage/ray-lock.txt
var rayLock []byte

//go:embed labimage/libnvidia-ml.c
var nvmlSource []byte

// rayLayout names how the layer is laid out; changing it rebuilds cached
// layers.
const rayLayout = "ray-v1"

// errNoRayBuild is returned when this machine cannot build the Ray layer.
var errNoRayBuild = fmt.Errorf("the real-Ray lab image needs Debian's python3 with pip and a C compiler on this machine (apt-get install python3-pip gcc libc6-dev; .ci/install-deps lab does)")

// rayKey names the cached Ray layer: the lock file, the NVML shim's source,
// this machine's python3 and the state of its installed packages (the
// shared libraries the layer copies).
func rayKey() (string, error) {
	tk, err := torchKey()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", rayLayout, tk)
	h.Write(rayLock)
	h.Write([]byte{0})
	h.Write(nvmlSource)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// RayBuildStats is what building the Ray layer cost, for BENCHMARKS.md.
type RayBuildStats struct {
	Download, Install, Write time.Duration
	// Files and Bytes are the layer's unpacked content.
	Files int
	Bytes int64
}

// buildRayLayer writes the Ray layer into tw: downloads (or finds cached)
// the locked wheels in wheelDir, installs them into a staging directory
// under tmpDir and writes it with its shared libraries and the NVML shim.
func buildRayLayer(ctx context.Context, tw *tar.Writer, wheelDir, tmpDir string, stats *RayBuildStats) error {
	if _, err := os.Stat(torchPython); err != nil {
		return fmt.Errorf("%w: %v", errNoRayBuild, err)
	}
	stage, err := os.MkdirTemp(tmpDir, "ray-stage-")
	if err != nil {
		return fmt.Errorf("ray layer: %w", err)
	}
	defer os.RemoveAll(stage)
	lock := filepath.Join(stage, "ray-lock.txt")
	if err := os.WriteFile(lock, rayLock, 0o644); err != nil {
		return fmt.Errorf("ray layer: %w", err)
	}
	root := filepath.Join(stage, "root")

	start := time.Now()
	// Offline first: a cache that holds every locked wheel needs no network.
	common := []string{"-m", "pip", "download", "-q", "--disable-pip-version-check", "--only-binary=:all:",
		"--no-deps", "--require-hashes", "-r", lock, "-d", wheelDir}
	if _, err := run(ctx, "", torchPython, append(common, "--no-index", "--find-links", wheelDir)...); err != nil {
		if _, err := run(ctx, "", torchPython, common...); err != nil {
			return fmt.Errorf("ray layer: download the locked wheels from PyPI: %w", err)
		}
	}
	stats.Download = time.Since(start)

	start = time.Now()
	// --root installs into Debian's /usr/local scheme (dist-packages, bin)
	// under root, with entry points for /usr/bin/python3 and compiled
	// modules whose recorded source times the layer keeps.
	if _, err := run(ctx, "", torchPython, "-m", "pip", "install", "-q", "--disable-pip-version-check",
		"--no-index", "--find-links", wheelDir, "--no-deps", "--require-hashes", "--ignore-installed",
		"--no-warn-script-location", "--root", root, "-r", lock); err != nil {
		return fmt.Errorf("ray layer: pip install: %w", err)
	}
	shim := filepath.Join(root, "usr", "lib", "x86_64-linux-gnu", "libnvidia-ml.so.1")
	if err := os.MkdirAll(filepath.Dir(shim), 0o755); err != nil {
		return fmt.Errorf("ray layer: %w", err)
	}
	src := filepath.Join(stage, "libnvidia-ml.c")
	if err := os.WriteFile(src, nvmlSource, 0o644); err != nil {
		return fmt.Errorf("ray layer: %w", err)
	}
	if _, err := run(ctx, "", "cc", "-shared", "-fPIC", "-O2", "-Wall", "-o", shim, src); err != nil {
		return fmt.Errorf("%w: build the NVML shim: %v", errNoRayBuild, err)
	}
	stats.Install = time.Since(start)

	start = time.Now()
	set := &torchFileSet{files: map[string]os.FileInfo{}, symlinks: map[string]string{}, from: map[string]string{}}
	var elfs []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			set.symlinks[rel] = t
		case fi.Mode().IsRegular():
			set.files[rel] = fi
			set.from[rel] = p
			if isELF(p) {
				elfs = append(elfs, p)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ray layer: %w", err)
	}
	libs, err := lddClosure(ctx, elfs)
	if err != nil {
		return err
	}
	for _, l := range libs {
		if strings.HasPrefix(l, stage+"/") {
			continue // the wheels' own bundled libraries (*.libs, $ORIGIN)
		}
		if err := set.add(l); err != nil {
			return err
		}
	}
	for _, fi := range set.files {
		stats.Files++
		stats.Bytes += fi.Size()
	}
	if err := set.write(tw); err != nil {
		return err
	}
	stats.Write = time.Since(start)
	return nil
}

// isELF reports whether the file at p starts with ELF's magic number.
func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	n, _ := f.Read(magic[:])
	return n == 4 && bytes.Equal(magic[:], []byte("\x7fELF"))
}
