//go:build linux

package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Per-node model caches. The lab's nodes share this machine's filesystem,
// so a file one node writes to /var/lib/rayform/huggingface would be on
// every node. As a real host has its own disk, each node's sshd (and so
// every SSH session and `lab exec`) and its dockerd (and so its
// containers' bind mounts) run in private mount namespaces where the
// node's own directory, NODEDIR/huggingface, is bind-mounted over
// ModelCacheMount: a model staged to spark1 is not on spark2. With
// Config.ModelDisk (or a node's override NODE.model-disk=SIZE, Node.ModelDisk)
// that directory is a tmpfs of that size, so a node's model disk can
// fill up. The root mount namespace sees only the empty
// ModelCacheMount directory (created once) and the nodes' directories
// under the lab directory; `lab down` unmounts the tmpfs with the rest.

// ModelCacheMount is where every node sees its own model cache: the
// parent of the model kind's default cache_dir (HF_HOME; the hub cache,
// HF_HUB_CACHE, is ModelCacheDir under it).
const ModelCacheMount = "/var/lib/rayform/huggingface"

// ModelCacheDir is the Hugging Face hub cache (HF_HUB_CACHE) on every
// lab node: the model kind's default cache_dir, on the node's own disk.
const ModelCacheDir = ModelCacheMount + "/hub"

// ModelCacheHostDir is the node's model cache as this machine's root
// mount namespace sees it: what the node sees at ModelCacheMount.
// ModelCacheHostDir()+"/hub/models--ORG--NAME" is the node's copy of a
// repository.
func (n Node) ModelCacheHostDir() string { return filepath.Join(n.Dir, "huggingface") }

// prepareModelCache creates the node's model cache (a tmpfs of size
// bytes when size > 0) and the mount point every node's namespaces bind
// it on.
func (n Node) prepareModelCache(size int64) error {
	if err := os.MkdirAll(ModelCacheMount, 0o755); err != nil {
		return fmt.Errorf("create the model cache mount point: %w", err)
	}
	dir := n.ModelCacheHostDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create the model cache of %s: %w", n.Name, err)
	}
	if size > 0 {
		var st unix.Statfs_t
		mounted := false
		if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
			var parent unix.Statfs_t
			mounted = unix.Statfs(n.Dir, &parent) == nil && parent.Fsid != st.Fsid
		}
		if !mounted {
			if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)+",mode=0755"); err != nil {
				return fmt.Errorf("mount a %d-byte tmpfs as the model cache of %s: %w", size, n.Name, err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "hub"), 0o755); err != nil {
		return fmt.Errorf("create the model cache of %s: %w", n.Name, err)
	}
	return nil
}

// nodeMountsScript bind-mounts $1 over /proc/meminfo (when not empty) and
// $2 over $3, then executes the rest of its arguments; it runs inside a
// fresh private mount namespace.
const nodeMountsScript = `{ [ -z "$1" ] || mount --bind "$1" /proc/meminfo; } && mount --bind "$2" "$3" && shift 3 && exec "$@"`

// withMounts wraps argv so it runs in a new private mount namespace where
// the node's model cache covers ModelCacheMount and, with meminfo, the
// node's simulated meminfo covers /proc/meminfo.
func (n Node) withMounts(unshare, sh string, meminfo bool, argv []string) []string {
	mi := ""
	if meminfo {
		mi = n.meminfoPath()
	}
	out := []string{unshare, "--mount", "--propagation", "private", "--", sh, "-c", nodeMountsScript, "rayform-lab-mounts", mi, n.ModelCacheHostDir(), ModelCacheMount}
	return append(out, argv...)
}

// ParseSize reads a size for Config.ModelDisk: bytes, or a number with
// the suffix K, M, G or T (powers of 1024, as tmpfs's size= reads them;
// "300M" is 300 MiB).
func ParseSize(s string) (int64, error) {
	mult := int64(1)
	num := s
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult, num = 1<<10, s[:n-1]
		case 'm', 'M':
			mult, num = 1<<20, s[:n-1]
		case 'g', 'G':
			mult, num = 1<<30, s[:n-1]
		case 't', 'T':
			mult, num = 1<<40, s[:n-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want a count of bytes, or a number with K, M, G or T (like 300M)", s)
	}
	return v * mult, nil
}

// seedModel places a complete copy of HubRepoTiny's "main" in the head's
// model cache (the same bytes the lab hub serves) and records it in
// l.Seeded.
func (l *Lab) seedModel() error {
	head := l.Nodes[0]
	var tiny *HubRepo
	for _, r := range LabHubRepos(l.HubBigMiB) {
		if r.ID == HubRepoTiny {
			tiny = r
		}
	}
	commit, err := tiny.WriteHFCache(filepath.Join(head.ModelCacheHostDir(), "hub"))
	if err != nil {
		return fmt.Errorf("seed the model on %s: %w", head.Name, err)
	}
	l.Seeded = &SeededModel{Repo: tiny.ID, Revision: "main", Commit: commit, Bytes: tiny.Bytes(), Node: head.Name, CacheDir: ModelCacheDir}
	return nil
}
