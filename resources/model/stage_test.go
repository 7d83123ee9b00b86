package model

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

// repoFiles are the test repository's files and sizes; the shards are
// LFS files (with sha256), the rest are not.
var repoFiles = []struct {
	path string
	size int
	lfs  bool
}{
	{"config.json", 700, false},
	{"tokenizer.json", 20_000, false},
	{"model.safetensors.index.json", 300, false},
	{"model-00001-of-00003.safetensors", 3 << 20, true},
	{"model-00002-of-00003.safetensors", 5 << 20, true},
	{"model-00003-of-00003.safetensors", 1<<20 + 17, true},
}

// source writes the test repository into a Hugging Face cache under dir,
// as huggingface_hub lays it out, and returns its manifest and layout.
func source(t *testing.T, dir string) (Manifest, Layout) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	m := Manifest{Repo: "org/tiny", Revision: "main", Commit: commit}
	l := HFCacheLayout(dir, m.Repo)
	for _, rf := range repoFiles {
		data := make([]byte, rf.size)
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		sum := sha256.Sum256(data)
		f := File{Path: rf.path, Size: int64(rf.size), BlobID: gitBlobID(data)}
		if rf.lfs {
			f.SHA256 = hex.EncodeToString(sum[:])
			f.BlobID = gitBlobID(fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", f.SHA256, f.Size))
		}
		m.Files = append(m.Files, f)
		blob := filepath.Join(l.Dir, l.StorePath(m, f))
		snap := filepath.Join(l.Dir, l.FilePath(m, f))
		for _, d := range []string{filepath.Dir(blob), filepath.Dir(snap)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(blob, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", f.Blob()), snap); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(l.Dir, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.Dir, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	return m, l
}

// probe lists l.Dir with observe's real tree probe and judges it.
func probe(t *testing.T, m Manifest, l Layout) Judgment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := observe.HostSpec{Trees: []string{l.Dir}}
	res, err := local.New(local.Options{}).Run(ctx, transportCmd(observe.ProbeScript(spec)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := observe.Parse(res.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	return Judge(m, l, f.Trees[l.Dir])
}

// sameContent fails unless every file of m reads the same in both layouts.
func sameContent(t *testing.T, m Manifest, a, b Layout) {
	t.Helper()
	for _, f := range m.Files {
		x, err := os.ReadFile(filepath.Join(a.Dir, a.FilePath(m, f)))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b.Dir, b.FilePath(m, f)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs", f.Path)
		}
	}
}

type recorder struct {
	mu sync.Mutex
	by map[string][]Progress
}

func (r *recorder) add(p Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string][]Progress{}
	}
	r.by[p.Node] = append(r.by[p.Node], p)
}

func peer(name string, l Layout) Peer {
	return Peer{Name: name, Conn: local.New(local.Options{}), Addr: netip.MustParseAddr("127.0.0.1"), Layout: l}
}

func stage(t *testing.T, m Manifest, src Layout, dsts map[string]Layout, rec *recorder) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ps []Peer
	for name, l := range dsts {
		ps = append(ps, peer(name, l))
	}
	opt := StageOptions{Streams: 3, Interval: 10 * time.Millisecond}
	if rec != nil {
		opt.Progress = rec.add
	}
	return Stage(ctx, m, peer("spark1", src), ps, opt)
}

// TestStageCopiesNodeToNode: two receivers without the model get it from
// the source's server; the tree probe then judges both complete, every
// file's content is the source's, snapshot files are links into blobs/
// as huggingface_hub makes them, and each receiver's progress ends at the
// total, done (with the default streams, which each receiver picks by its
// cores).
func TestStageCopiesNodeToNode(t *testing.T) {
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	a, b := HFCacheLayout(filepath.Join(root, "spark2"), m.Repo), HFCacheLayout(filepath.Join(root, "spark3"), m.Repo)
	if j := probe(t, m, a); j.State != Absent {
		t.Fatalf("before: %s", j)
	}
	var rec recorder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The default streams: each receiver picks them by its cores.
	if err := Stage(ctx, m, peer("spark1", src), []Peer{peer("spark2", a), peer("spark3", b)}, StageOptions{Interval: 10 * time.Millisecond, Progress: rec.add}); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]Layout{"spark2": a, "spark3": b} {
		if j := probe(t, m, l); j.State != Complete {
			t.Errorf("%s after staging: %s", name, j)
		}
		sameContent(t, m, src, l)
		target, err := os.Readlink(filepath.Join(l.Dir, l.FilePath(m, m.Files[3])))
		if err != nil || target != "../../blobs/"+m.Files[3].SHA256 {
			t.Errorf("%s: snapshot link %q, %v", name, target, err)
		}
		ps := rec.by[name]
		if len(ps) == 0 || !ps[len(ps)-1].Finished || ps[len(ps)-1].Done != m.Bytes() || ps[len(ps)-1].Total != m.Bytes() {
			t.Errorf("%s: progress %+v, want it to end done at %d", name, ps, m.Bytes())
		}
		// Issue 33 item 8: a report that says nothing new ("0 B (0%)"
		// three times while the transfer starts) is not made.
		for i := 1; i < len(ps); i++ {
			if !ps[i].Finished && ps[i].Done == ps[i-1].Done {
				t.Errorf("%s: report %d repeats %d bytes: %+v", name, i, ps[i].Done, ps)
				break
			}
		}
	}
	// Nothing left to do: a second run transfers nothing.
	rec = recorder{}
	if err := stage(t, m, src, map[string]Layout{"spark2": a}, &rec); err != nil {
		t.Fatal(err)
	}
	if ps := rec.by["spark2"]; len(ps) == 0 || ps[len(ps)-1].Total != 0 {
		t.Errorf("second run: %+v, want nothing to transfer", ps)
	}
}

// TestStageResumesAndRefetches: a receiver with a correct partial shard
// resumes it (its first report counts those bytes), one with a corrupt
// partial shard (right length so far, wrong bytes) detects the sha256
// mismatch and fetches it again, and a final blob of the wrong size is
// replaced.
func TestStageResumesAndRefetches(t *testing.T) { bothHashPaths(t, testStageResumesAndRefetches) }

func testStageResumesAndRefetches(t *testing.T) {
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	shard := m.Files[4]
	data, err := os.ReadFile(filepath.Join(src.Dir, src.StorePath(m, shard)))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name string, partial []byte, final []byte) Layout {
		l := HFCacheLayout(filepath.Join(root, name), m.Repo)
		if err := os.MkdirAll(filepath.Join(l.Dir, "blobs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if partial != nil {
			if err := os.WriteFile(filepath.Join(l.Dir, l.StorePath(m, shard)+PartialSuffix), partial, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if final != nil {
			if err := os.WriteFile(filepath.Join(l.Dir, l.StorePath(m, shard)), final, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
	half := len(data) / 2
	resume := mk("spark2", data[:half], nil)
	corrupt := bytes.Clone(data[:half])
	corrupt[100] ^= 0xff
	bad := mk("spark3", corrupt, nil)
	short := mk("spark4", nil, data[:10])

	if j := probe(t, m, resume); j.State != Partial || j.ResumeBytes != int64(half) {
		t.Errorf("resumable node before: %s", j)
	}
	if j := probe(t, m, short); j.State != Partial || len(j.WrongSize) != 1 || j.WrongSize[0].Path != shard.Path {
		t.Errorf("wrong-size node before: %s", j)
	}
	var rec recorder
	if err := stage(t, m, src, map[string]Layout{"spark2": resume, "spark3": bad, "spark4": short}, &rec); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]Layout{"spark2": resume, "spark3": bad, "spark4": short} {
		if j := probe(t, m, l); j.State != Complete {
			t.Errorf("%s after staging: %s", name, j)
		}
		sameContent(t, m, src, l)
		if _, err := os.Stat(filepath.Join(l.Dir, l.StorePath(m, shard)+PartialSuffix)); !os.IsNotExist(err) {
			t.Errorf("%s: a partial file is left: %v", name, err)
		}
	}
	if ps := rec.by["spark2"]; len(ps) == 0 || ps[0].Done != int64(half) {
		t.Errorf("spark2's first report %+v, want %d bytes already there", ps, half)
	}
}

// TestStageCutMidCopy: the source's copy ends early (as when the fabric
// link is cut mid-transfer, the receiver sees its connection end): the
// error names the node, the file and the bytes received; the shard is
// kept only as a partial file, never under its final name, and the plan
// judges the node partial with those bytes to resume. Once the source is
// whole again, the next run converges.
func TestStageCutMidCopy(t *testing.T) {
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	shard := m.Files[4]
	blob := filepath.Join(src.Dir, src.StorePath(m, shard))
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, data[:2<<20], 0o644); err != nil {
		t.Fatal(err)
	}
	dst := HFCacheLayout(filepath.Join(root, "spark2"), m.Repo)
	err = stage(t, m, src, map[string]Layout{"spark2": dst}, nil)
	want := "spark2: staging org/tiny from spark1 (127.0.0.1)"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "ended after 2097152 of 5242880 bytes of "+shard.Path) ||
		!strings.Contains(err.Error(), "the next apply resumes it") {
		t.Fatalf("error %v, want %q and the bytes received", err, want)
	}
	if _, err := os.Stat(filepath.Join(dst.Dir, dst.StorePath(m, shard))); !os.IsNotExist(err) {
		t.Errorf("the cut shard is under its final name: %v", err)
	}
	if j := probe(t, m, dst); j.State != Partial || j.ResumeBytes < 2<<20 {
		t.Errorf("after the cut: %s (resume %d)", j, j.ResumeBytes)
	}
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := stage(t, m, src, map[string]Layout{"spark2": dst}, nil); err != nil {
		t.Fatal(err)
	}
	if j := probe(t, m, dst); j.State != Complete {
		t.Errorf("after the next run: %s", j)
	}
	sameContent(t, m, src, dst)
}

// TestStageRefusesWithoutSpace: a receiver whose filesystem cannot hold
// what it lacks fails before writing anything (a 4 MiB tmpfs; needs root).
func TestStageRefusesWithoutSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs")
	}
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	small := filepath.Join(root, "small")
	if err := os.MkdirAll(small, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", small).Run() })
	dst := HFCacheLayout(small, m.Repo)
	err := stage(t, m, src, map[string]Layout{"spark2": dst}, nil)
	if err == nil || !strings.Contains(err.Error(), "bytes to stage into "+dst.Dir+" but") {
		t.Fatalf("error %v, want the space check", err)
	}
	if j := probe(t, m, dst); j.State != Absent || j.Fits() {
		t.Errorf("after: %s, fits %v", j, j.Fits())
	}
}

func transportCmd(script string) transport.Cmd { return transport.Cmd{Script: script} }

// TestStageWriteFails: a receiver whose writes fail mid-file (its file
// size limit, as a full disk fails them: python3 ignores SIGXFSZ, so the
// write returns EFBIG as it would ENOSPC) stops with the node, the file,
// the error and the bytes written; the shard is only a partial file, and
// once writes succeed again the next run resumes it and converges.
func TestStageWriteFails(t *testing.T) {
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	dst := HFCacheLayout(filepath.Join(root, "spark2"), m.Repo)
	wrapper := filepath.Join(root, "limited-sh")
	// 2048 blocks of 1 KiB (POSIX ulimit -f, as dash counts it): the 3 and 5 MiB shards cannot be written whole.
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nulimit -f 2048\nexec /bin/sh \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	limited := Peer{Name: "spark2", Conn: local.New(local.Options{Shell: wrapper}), Addr: netip.MustParseAddr("127.0.0.1"), Layout: dst}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := Stage(ctx, m, peer("spark1", src), []Peer{limited}, StageOptions{Streams: 1})
	if err == nil || !strings.Contains(err.Error(), "spark2: staging org/tiny from spark1 (127.0.0.1): writing "+dst.Dir+"/blobs/") ||
		!strings.Contains(err.Error(), "File too large after") || !strings.Contains(err.Error(), "the partial file is kept for the next apply") {
		t.Fatalf("error %v, want the node, the file and the write error", err)
	}
	j := probe(t, m, dst)
	if j.State == Complete {
		t.Fatalf("a failed write left the copy judged complete: %s", j)
	}
	for _, f := range m.Files {
		p := filepath.Join(dst.Dir, dst.StorePath(m, f))
		if fi, err := os.Stat(p); err == nil && fi.Size() != f.Size {
			t.Errorf("%s is under its final name with %d of %d bytes", f.Path, fi.Size(), f.Size)
		}
	}
	if err := stage(t, m, src, map[string]Layout{"spark2": dst}, nil); err != nil {
		t.Fatal(err)
	}
	if j := probe(t, m, dst); j.State != Complete {
		t.Errorf("after the next run: %s", j)
	}
	sameContent(t, m, src, dst)
}

// TestStageDiskFullMidCopy: a receiver's disk fills up mid-copy (a 6 MiB
// tmpfs; needs root). The space check passes: a partial shard of full
// length counts as received, but it is sparse, holds no disk, and its
// sha256 is wrong, so it is fetched again, and the disk runs out then.
// The error names the node, the file being written, the errno's text and
// the bytes still to stage against the bytes free; no file is under its
// final name that is not whole, the copy is not judged complete, and with
// a larger disk the next run converges.
func TestStageDiskFullMidCopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs")
	}
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	small := filepath.Join(root, "small")
	if err := os.MkdirAll(small, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", small).Run() })
	dst := HFCacheLayout(small, m.Repo)
	shard := m.Files[4]
	part := filepath.Join(dst.Dir, dst.StorePath(m, shard)+PartialSuffix)
	if err := os.MkdirAll(filepath.Dir(part), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(part, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(part, shard.Size); err != nil { // sparse: no blocks
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := Stage(ctx, m, peer("spark1", src), []Peer{peer("spark2", dst)}, StageOptions{Streams: 1})
	for _, want := range []string{
		"spark2: staging org/tiny from spark1 (127.0.0.1): ",
		"writing " + part + ": No space left on device after ",
		" of 5242880 bytes; ",
		" bytes still to stage into " + dst.Dir + " but ",
		" free: free space there (or give the model a larger cache_dir) and apply again; the partial file is kept for the next apply",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v\nwant %q", err, want)
		}
	}
	t.Logf("disk full: %v", err)
	if j := probe(t, m, dst); j.State == Complete {
		t.Fatalf("a full disk left the copy judged complete: %s", j)
	}
	for _, f := range m.Files {
		if fi, err := os.Stat(filepath.Join(dst.Dir, dst.StorePath(m, f))); err == nil && fi.Size() != f.Size {
			t.Errorf("%s is under its final name with %d of %d bytes", f.Path, fi.Size(), f.Size)
		}
	}
	if out, err := exec.Command("mount", "-o", "remount,size=32m", small).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, out)
	}
	if err := stage(t, m, src, map[string]Layout{"spark2": dst}, nil); err != nil {
		t.Fatal(err)
	}
	if j := probe(t, m, dst); j.State != Complete {
		t.Errorf("after the next run: %s", j)
	}
	sameContent(t, m, src, dst)
}

// TestStageSourceFails: the receivers start with the source; when the
// source cannot serve (its fabric address is not its own: bind fails),
// Stage returns the source's failure, naming it, and the receivers that
// waited for its port end without writing anything.
func TestStageSourceFails(t *testing.T) {
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	dst := HFCacheLayout(filepath.Join(root, "spark2"), m.Repo)
	bad := peer("spark1", src)
	bad.Addr = netip.MustParseAddr("192.0.2.1") // TEST-NET-1: no interface has it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := Stage(ctx, m, bad, []Peer{peer("spark2", dst)}, StageOptions{})
	if err == nil || !strings.Contains(err.Error(), "spark1: serving org/tiny for staging: cannot listen on 192.0.2.1: Cannot assign requested address; is it this node's fabric address?") {
		t.Fatalf("error %v, want the source's failure", err)
	}
	t.Logf("source fails: %v", err)
	if j := probe(t, m, dst); j.State != Absent {
		t.Errorf("the receiver after the source failed: %s", j)
	}
}

// TestStageCorruptSource: the source's shard has its size but not its
// sha256 (a flipped byte at rest): the receiver fetches it, finds the
// hash wrong, fetches it again, finds it wrong again, and stops naming
// the source's file and the fix; nothing of it is left on the receiver,
// neither under its final name nor as a partial file to resume.
func TestStageCorruptSource(t *testing.T) { bothHashPaths(t, testStageCorruptSource) }

func testStageCorruptSource(t *testing.T) {
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	shard := m.Files[3]
	blob := filepath.Join(src.Dir, src.StorePath(m, shard))
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	data[1000] ^= 0xff
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := HFCacheLayout(filepath.Join(root, "spark2"), m.Repo)
	err = stage(t, m, src, map[string]Layout{"spark2": dst}, nil)
	want := "spark2: staging org/tiny from spark1 (127.0.0.1): " + shard.Path + ": sha256 "
	fix := "twice: the copy on spark1 (" + blob + ") is corrupt; delete it there and apply again, so that it is fetched anew"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fix) {
		t.Fatalf("error %v\nwant %q and %q", err, want, fix)
	}
	for _, p := range []string{dst.StorePath(m, shard), dst.StorePath(m, shard) + PartialSuffix} {
		if _, err := os.Stat(filepath.Join(dst.Dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", p, err)
		}
	}
	if j := probe(t, m, dst); j.State == Complete {
		t.Errorf("after: %s", j)
	}
}

// bothHashPaths runs test with the receivers hashing inline and in a
// thread that trails the writer (each receiver picks one by its cores;
// the test machine's cores must not pick for the test).
func bothHashPaths(t *testing.T, test func(t *testing.T)) {
	for _, trail := range []bool{false, true} {
		t.Run(map[bool]string{false: "inline", true: "trailing"}[trail], func(t *testing.T) {
			stageTrail = &trail
			t.Cleanup(func() { stageTrail = nil })
			test(t)
		})
	}
}

// gitBlobID is git's object id of a blob with this content, as the hub
// publishes it for a file not stored with LFS.
func gitBlobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}
