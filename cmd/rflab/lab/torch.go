//go:build linux

package lab

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The torch layer puts this machine's Debian python3 and python3-torch (the
// CPU build: real c10d, Gloo and TCPStore) into the Ray + vLLM image, so
// that rayform's data-plane check runs real PyTorch inside the lab's Ray
// containers. It is built from the files installed here, not downloaded:
// the interpreter, its standard library, torch and the few packages torch
// imports, and every shared library they load (ldd's closure, with the
// symlinks that lead to each one, /etc/alternatives included), plus
// /etc/ld.so.cache. Debian's libtorch links OpenCV and FFmpeg, so the
// layer is about 600 MiB unpacked; it is cached like the other layers.

// torchPython is the interpreter the layer is built from.
const torchPython = "/usr/bin/python3"

// errNoTorch is returned when this machine has no python3-torch.
var errNoTorch = fmt.Errorf("the torch lab image needs Debian's python3-torch on this machine (apt-get install python3-torch)")

// torchPackages are the dist-packages entries the check imports (torch
// imports numpy, typing_extensions, six and astunparse when present).
var torchPackages = []string{"torch", "numpy", "numpy.libs", "typing_extensions.py", "six.py", "astunparse"}

// stdlibSkip are standard library directories the check never imports.
var stdlibSkip = map[string]bool{"test": true, "idlelib": true, "tkinter": true, "turtledemo": true,
	"ensurepip": true, "lib2to3": true, "pydoc_data": true}

// torchSkip are parts of the torch package that are not imported.
var torchSkip = map[string]bool{"include": true, "test": true}

// torchFileSet is the files of the torch layer: regular files to copy and
// symlinks to recreate, by path without the leading slash.
type torchFileSet struct {
	files    map[string]os.FileInfo
	symlinks map[string]string
	// from names the file a regular file is copied from when it is not
	// "/"+path (the Ray layer's staging directory).
	from map[string]string
}

// collectTorch lists the torch layer's files.
func collectTorch(ctx context.Context) (*torchFileSet, error) {
	out, err := run(ctx, "", torchPython, "-c", "import sys, torch.distributed as d; assert d.is_gloo_available(); print('%d.%d' % sys.version_info[:2])")
	if err != nil {
		return nil, fmt.Errorf("%w: %s -c 'import torch.distributed': %v", errNoTorch, torchPython, err)
	}
	ver := strings.TrimSpace(string(out))
	set := &torchFileSet{files: map[string]os.FileInfo{}, symlinks: map[string]string{}}
	roots := []string{torchPython, "/usr/bin/python" + ver, "/etc/ld.so.cache", "/etc/python" + ver}
	walk := func(root string, skip func(rel string) bool) error {
		return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() && skip(rel) {
				return filepath.SkipDir
			}
			if !d.IsDir() {
				roots = append(roots, p)
			}
			return nil
		})
	}
	stdlib := "/usr/lib/python" + ver
	if err := walk(stdlib, func(rel string) bool {
		return stdlibSkip[rel] || strings.HasPrefix(rel, "config-")
	}); err != nil {
		return nil, fmt.Errorf("torch layer: %w", err)
	}
	for _, pkg := range torchPackages {
		p := filepath.Join("/usr/lib/python3/dist-packages", pkg)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := walk(p, func(rel string) bool { return pkg == "torch" && torchSkip[rel] }); err != nil {
			return nil, fmt.Errorf("torch layer: %w", err)
		}
	}
	var elfs []string
	for _, r := range roots {
		if err := set.add(r); err != nil {
			return nil, err
		}
		if strings.HasSuffix(r, ".so") || strings.Contains(r, ".so.") || r == "/usr/bin/python"+ver {
			elfs = append(elfs, r)
		}
	}
	libs, err := lddClosure(ctx, elfs)
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		if err := set.add(l); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// add records path, following every symlink on the way (each becomes a
// symlink entry) to the regular file or directory it names.
func (s *torchFileSet) add(path string) error {
	for hops := 0; hops < 40; hops++ {
		path = filepath.Clean(path)
		parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
		resolved := "/"
		moved := false
		for i, part := range parts {
			cur := filepath.Join(resolved, part)
			fi, err := os.Lstat(cur)
			if os.IsNotExist(err) && hops > 0 {
				return nil // a dangling symlink (torch/lib names libraries Debian does not ship)
			}
			if err != nil {
				return fmt.Errorf("torch layer: %w", err)
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				target, err := os.Readlink(cur)
				if err != nil {
					return fmt.Errorf("torch layer: %w", err)
				}
				s.symlinks[strings.TrimPrefix(cur, "/")] = target
				if !filepath.IsAbs(target) {
					target = filepath.Join(resolved, target)
				}
				path = filepath.Join(append([]string{target}, parts[i+1:]...)...)
				moved = true
				break
			}
			if i == len(parts)-1 {
				if fi.Mode().IsRegular() {
					s.files[strings.TrimPrefix(cur, "/")] = fi
				}
				return nil
			}
			resolved = cur
		}
		if !moved {
			return nil
		}
	}
	return fmt.Errorf("torch layer: too many symlinks resolving %s", path)
}

// lddClosure returns every library ldd reports for files (ldd lists the
// whole closure of each), the dynamic loader included.
func lddClosure(ctx context.Context, files []string) ([]string, error) {
	seen := map[string]bool{}
	for start := 0; start < len(files); start += 200 {
		batch := files[start:min(start+200, len(files))]
		out, err := run(ctx, "", "ldd", batch...)
		if err != nil && len(out) == 0 {
			return nil, fmt.Errorf("torch layer: ldd: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
				seen[f[2]] = true
			case len(f) >= 1 && strings.HasPrefix(f[0], "/") && !strings.HasSuffix(f[0], ":"):
				seen[f[0]] = true // the loader: /lib64/ld-linux-x86-64.so.2 (0x...)
			}
		}
	}
	libs := make([]string, 0, len(seen))
	for l := range seen {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return libs, nil
}

// torchKey names the cached torch layer: this machine's python3 and the
// state of its installed packages (dpkg's status file), so that the layer
// is rebuilt after a package changes, without collecting its files first.
func torchKey() (string, error) {
	fi, err := os.Stat("/var/lib/dpkg/status")
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoTorch, err)
	}
	py, err := filepath.EvalSymlinks(torchPython)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoTorch, err)
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s %s %d %d", torchLayout, py, fi.Size(), fi.ModTime().UnixNano())))
	return hex.EncodeToString(sum[:])[:16], nil
}

// torchLayout names how the layer is laid out; changing it rebuilds
// cached layers.
const torchLayout = "v2: regular files keep their modification time"

// write writes the layer: parent directories, symlinks and files, sorted.
// Regular files keep their modification time: Python's compiled modules
// (__pycache__/*.pyc) record their source's, and a source with another
// time is compiled again by every process's first import in every new
// container (seconds of CPU each for torch), which no real image does.
func (s *torchFileSet) write(tw *tar.Writer) error {
	dirs := map[string]bool{}
	for _, m := range []map[string]bool{keysOf(s.files), keysOf(s.symlinks)} {
		for p := range m {
			for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
				dirs[d] = true
			}
		}
	}
	for p := range s.symlinks {
		delete(dirs, p) // lib -> usr/lib is a symlink, not a directory
	}
	type entry struct {
		name string
		hdr  *tar.Header
		src  string
	}
	var es []entry
	for d := range dirs {
		es = append(es, entry{name: d + "/", hdr: &tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}})
	}
	for p, t := range s.symlinks {
		es = append(es, entry{name: p, hdr: &tar.Header{Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: t}})
	}
	for p, fi := range s.files {
		src := "/" + p
		if f := s.from[p]; f != "" {
			src = f
		}
		es = append(es, entry{name: p, hdr: &tar.Header{Typeflag: tar.TypeReg, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: fi.ModTime()}, src: src})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].name < es[j].name })
	for _, e := range es {
		h := e.hdr
		h.Name, h.Uname, h.Gname, h.Format = e.name, "root", "root", tar.FormatPAX
		if h.ModTime.IsZero() {
			h.ModTime = layerEpoch
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if e.src == "" {
			continue
		}
		f, err := os.Open(e.src)
		if err != nil {
			return err
		}
		n, err := io.Copy(tw, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", e.src, err)
		}
		if n != h.Size {
			return fmt.Errorf("%s changed while the torch layer was built", e.src)
		}
	}
	return nil
}

func keysOf[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}
