package model

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport/local"
)

// secretFile writes a file of n bytes outside every cache under root,
// standing for a host's key or shadow file, and returns its path and
// content.
func secretFile(t *testing.T, root, name string, n int) (string, []byte) {
	t.Helper()
	data := bytes.Repeat([]byte("SECRET-"+name+"|"), n/len("SECRET-"+name+"|")+1)[:n]
	p := filepath.Join(root, "etc", name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, data
}

// holds reports the files under dir whose content contains secret.
func holds(t *testing.T, dir string, secret []byte) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, secret[:16]) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// relink replaces the link or file at p with a link to target.
func relink(t *testing.T, p, target string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// TestStageRefusesLinksOutOfCache: with a shell on the source, files of
// the snapshot are replaced by links to files outside the model's blobs/
// (a host key, a shadow file: each the size of the file it replaces, so
// that sizes alone let it through). The source refuses to serve them,
// naming the node and the file, and no byte of them reaches the receiver.
func TestStageRefusesLinksOutOfCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		// plant makes the source's file f lead to secret.
		plant func(t *testing.T, src Layout, m Manifest, f File, secret string)
	}{
		{"snapshot file linked to a file outside", func(t *testing.T, src Layout, m Manifest, f File, secret string) {
			relink(t, filepath.Join(src.Dir, src.FilePath(m, f)), secret)
		}},
		{"blob replaced by a link outside", func(t *testing.T, src Layout, m Manifest, f File, secret string) {
			relink(t, filepath.Join(src.Dir, src.StorePath(m, f)), secret)
		}},
		{"snapshot file linked into another repository's blobs", func(t *testing.T, src Layout, m Manifest, f File, secret string) {
			other := filepath.Join(filepath.Dir(src.Dir), "models--org--other", "blobs", "x")
			if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(secret)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(other, data, 0o644); err != nil {
				t.Fatal(err)
			}
			relink(t, filepath.Join(src.Dir, src.FilePath(m, f)), "../../../models--org--other/blobs/x")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			m, src := source(t, filepath.Join(root, "spark1"))
			cfgFile, tokFile := m.Files[0], m.Files[1] // config.json, tokenizer.json
			key, keyData := secretFile(t, root, "ssh_host_ed25519_key", int(cfgFile.Size))
			shadow, shadowData := secretFile(t, root, "shadow", int(tokFile.Size))
			tc.plant(t, src, m, cfgFile, key)
			tc.plant(t, src, m, tokFile, shadow)
			dst := HFCacheLayout(filepath.Join(root, "spark2"), m.Repo)
			err := stage(t, m, src, map[string]Layout{"spark2": dst}, nil)
			if err == nil {
				t.Fatal("staged files that lead out of the cache")
			}
			for _, f := range []File{cfgFile, tokFile} {
				if want := src.FilePath(m, f) + ": it resolves to "; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "spark1") ||
					!strings.Contains(err.Error(), ", outside "+filepath.Join(src.Dir, "blobs")) {
					t.Errorf("error %v\nwant the node, %q and the blobs directory", err, want)
				}
			}
			t.Logf("refused: %v", err)
			for _, secret := range [][]byte{keyData, shadowData} {
				if got := holds(t, dst.Dir, secret); len(got) > 0 {
					t.Errorf("the receiver holds bytes from outside the cache in %v", got)
				}
			}
			if j := probe(t, m, dst); j.State == Complete {
				t.Errorf("the receiver is judged complete: %s", j)
			}
		})
	}
}

// TestStageVerifiesBlobID: a file that is not an LFS file (config.json)
// is replaced on the source by an HTML page of the same length: the
// receiver checks the git blob id the hub published, refuses it twice
// and names the source's file; nothing of it is under its final name, and
// the receiver is not judged complete.
func TestStageVerifiesBlobID(t *testing.T) {
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	f := m.Files[0]
	blob := filepath.Join(src.Dir, src.StorePath(m, f))
	page := []byte("<html><body>Please sign in to the network</body></html>")
	page = append(page, bytes.Repeat([]byte(" "), int(f.Size)-len(page))...)
	if err := os.WriteFile(blob, page, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := HFCacheLayout(filepath.Join(root, "spark2"), m.Repo)
	err := stage(t, m, src, map[string]Layout{"spark2": dst}, nil)
	want := "spark2: staging org/tiny from spark1 (127.0.0.1): config.json: git blob id " + gitBlobID(page) + ", want " + f.BlobID
	fix := ", twice: the copy on spark1 (" + blob + ") is corrupt"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fix) {
		t.Fatalf("error %v\nwant %q and %q", err, want, fix)
	}
	if _, err := os.Stat(filepath.Join(dst.Dir, dst.StorePath(m, f))); !os.IsNotExist(err) {
		t.Errorf("the page is under its final name: %v", err)
	}
	if j := probe(t, m, dst); j.State == Complete {
		t.Errorf("after: %s", j)
	}
}

// hostileHub serves the lab hub, except where the test answers a path
// itself.
type hostileHub struct {
	hub  http.Handler
	bend func(w http.ResponseWriter, r *http.Request) bool
}

func (h hostileHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.bend(w, r) {
		h.hub.ServeHTTP(w, r)
	}
}

// TestDownloadFromHostileHub: a hub that answers config.json with an HTML
// page of its length is refused by the git blob id it published itself
// (the node is not judged complete), and a hub that trickles a shard (a
// byte every 50 ms, so that no single read waits for long) fails as a
// stall once a window passes with less than the least a stream must
// receive. Neither leaves the file under its final name.
func TestDownloadFromHostileHub(t *testing.T) {
	lh, tiny, _ := startHub(t)
	m := manifestFrom(t, lh.URL, tiny.ID, "main")
	var cfgFile, shard File
	for _, f := range m.Files {
		switch {
		case f.Path == "config.json":
			cfgFile = f
		case f.SHA256 != "" && shard.Path == "":
			shard = f
		}
	}
	for _, tc := range []struct {
		name string
		bend func(w http.ResponseWriter, r *http.Request) bool
		want string
		file File
	}{
		{"an HTML page for config.json", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/config.json") {
				return false
			}
			page := []byte("<html>captive portal</html>")
			page = append(page, bytes.Repeat([]byte(" "), int(cfgFile.Size)-len(page))...)
			w.Header().Set("Content-Length", strconv.Itoa(len(page)))
			_, _ = w.Write(page)
			return true
		}, "spark1: staging rayform-lab/tiny from the hub " + "%s" + ": config.json: git blob id ", cfgFile},
		{"a trickled shard", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasPrefix(r.URL.Path, "/lfs/") {
				return false
			}
			w.Header().Set("Content-Length", strconv.FormatInt(shard.Size, 10))
			w.WriteHeader(http.StatusOK)
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-r.Context().Done():
					return true
				case <-tick.C:
					if _, err := w.Write([]byte{0}); err != nil {
						return true
					}
					w.(http.Flusher).Flush()
				}
			}
		}, "the transfer stalled: ", shard},
		{"trickled headers", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasPrefix(r.URL.Path, "/lfs/") {
				return false
			}
			c, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return true
			}
			defer c.Close()
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\n")
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for range tick.C {
				if _, err := buf.WriteString("X-Slow: a\r\n"); err != nil || buf.Flush() != nil {
					return true
				}
			}
			return true
		}, "no complete answer within 1 s", shard},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(hostileHub{hub: lh.Config.Handler, bend: tc.bend})
			defer srv.Close()
			want := strings.Replace(tc.want, "%s", srv.URL, 1)
			dst := HFCacheLayout(filepath.Join(t.TempDir(), "hub"), tiny.ID)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := Download(ctx, m, Peer{Name: "spark1", Conn: local.New(local.Options{}), Layout: dst}, Hub{Endpoint: srv.URL},
				StageOptions{Streams: 2, IdleTimeout: time.Second})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v\nwant %q", err, want)
			}
			t.Logf("refused: %v", err)
			if _, err := os.Stat(filepath.Join(dst.Dir, dst.StorePath(m, tc.file))); !os.IsNotExist(err) {
				t.Errorf("%s is under its final name: %v", tc.file.Path, err)
			}
			if j := probe(t, m, dst); j.State == Complete {
				t.Errorf("after: %s", j)
			}
		})
	}
}

// recordingProxy forwards TCP connections to target and keeps what each
// client sent, as a sniffer on the fabric sees it.
type recordingProxy struct {
	ln   net.Listener
	mu   sync.Mutex
	sent []*bytes.Buffer
}

func startProxy(t *testing.T, target string) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := &bytes.Buffer{}
			p.mu.Lock()
			p.sent = append(p.sent, buf)
			p.mu.Unlock()
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { _, _ = io.Copy(c, s); c.Close() }()
				_, _ = io.Copy(io.MultiWriter(s, &lockedWriter{mu: &p.mu, w: buf}), c)
			}()
		}
	}()
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// firstRequest is the first request a client sent on a connection the
// proxy recorded.
func (p *recordingProxy) firstRequest(t *testing.T) []byte {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.sent {
		if i := bytes.Index(b.Bytes(), []byte("\r\n\r\n")); i > 0 {
			return bytes.Clone(b.Bytes()[:i+4])
		}
	}
	t.Fatal("the proxy recorded no request")
	return nil
}

// send writes req to addr and returns the status line of the answer, or
// the error of the connection.
func send(addr string, req []byte) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// serveDirect runs the source's side of staging for m from src on
// loopback with key, as Stage does, and returns its address and a
// function that ends it (closing its stdin) and returns its error.
func serveDirect(t *testing.T, ctx context.Context, m Manifest, src Layout, key string) (string, func() error) {
	t.Helper()
	var srcs []string
	for _, f := range files(m, src) {
		srcs = append(srcs, f.Src)
	}
	cfg, err := json.Marshal(map[string]any{"role": "serve", "node": "spark1", "dir": src.Dir, "hf": true, "bind": "127.0.0.1", "key": key, "files": srcs})
	if err != nil {
		t.Fatal(err)
	}
	hold, release := io.Pipe()
	lines := newLineWriter()
	served := make(chan error, 1)
	go func() {
		res, err := local.New(local.Options{}).Run(ctx, stageCmd(cfg, hold, lines))
		if err != nil {
			err = errors.Join(err, errors.New(string(res.Stderr)))
		}
		lines.close()
		served <- err
	}()
	port := ""
	for line := range lines.c {
		if p, ok := strings.CutPrefix(line, "listening "); ok {
			port = p
			break
		}
	}
	if port == "" {
		release.Close()
		t.Fatalf("the source did not listen: %v", <-served)
	}
	go func() {
		for range lines.c {
		}
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		release.Close()
		return <-served
	}
	t.Cleanup(func() { _ = stop() })
	return "127.0.0.1:" + port, stop
}

// fetchVia runs a receiver into dst from the source's copy in src, served
// (or relayed) at addr on loopback, signing with key.
func fetchVia(ctx context.Context, m Manifest, src, dst Layout, addr, key string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	return fetchTo(ctx, m, peer("spark2", dst), src, "from spark1", map[string]any{
		"source_host": "127.0.0.1", "source_port": p, "key": key, "source_name": "spark1", "source_dir": src.Dir,
	}, strings.NewReader(""), StageOptions{Streams: 2}.withDefaults())
}

// newKey is a staging key as Stage draws it.
func newKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(k)
}

// TestStageRefusesLinkSwappedIn: a link out of the cache swapped in after
// the source has started (its check at start passed) is refused when the
// file is opened for a request: the receiver's error names the file and
// the link's target, and no byte of the target reaches it.
func TestStageRefusesLinkSwappedIn(t *testing.T) {
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	dst := HFCacheLayout(filepath.Join(root, "spark2"), m.Repo)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := newKey(t)
	addr, _ := serveDirect(t, ctx, m, src, key)
	cfg := m.Files[0]
	secret, data := secretFile(t, root, "shadow", int(cfg.Size))
	relink(t, filepath.Join(src.Dir, src.FilePath(m, cfg)), secret)
	err := fetchVia(ctx, m, src, dst, addr, key)
	want := "the source answered 403 refused: it resolves to " + secret + ", outside " + filepath.Join(src.Dir, "blobs") + " for config.json"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v\nwant %q", err, want)
	}
	if got := holds(t, dst.Dir, data); len(got) > 0 {
		t.Errorf("the receiver holds bytes from outside the cache in %v", got)
	}
}

// TestStageRequestsCannotBeReplayed: a receiver fetches from the source
// through a proxy that records its requests, as a sniffer on the fabric
// would. The recorded request, sent again while the source still serves,
// is refused (401), and so is the same request signed with another key or
// carrying the key itself as a bearer token; once the run ends, nothing
// answers it at all.
func TestStageRequestsCannotBeReplayed(t *testing.T) {
	root := t.TempDir()
	m, src := source(t, filepath.Join(root, "spark1"))
	dst := HFCacheLayout(filepath.Join(root, "spark2"), m.Repo)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := newKey(t)
	addr, stop := serveDirect(t, ctx, m, src, key)
	proxy := startProxy(t, addr)
	if err := fetchVia(ctx, m, src, dst, proxy.ln.Addr().String(), key); err != nil {
		t.Fatal(err)
	}
	sameContent(t, m, src, dst)
	req := proxy.firstRequest(t)
	if !bytes.Contains(req, []byte("Authorization: ")) {
		t.Fatalf("the recorded request has no Authorization: %q", req)
	}
	if bytes.Contains(req, []byte(key)) {
		t.Errorf("the key crossed the wire: %q", req)
	}
	status := func(r []byte) string {
		t.Helper()
		line, err := send(addr, r)
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		return line
	}
	if got := status(req); !strings.Contains(got, " 401 ") {
		t.Errorf("the replayed request: %q, want 401", got)
	}
	auth := regexpAuth(req)
	other := bytes.Replace(req, auth, []byte("Authorization: rayform-stage "+strings.Repeat("0", 32)+":"+strings.Repeat("1", 64)), 1)
	if got := status(other); !strings.Contains(got, " 401 ") {
		t.Errorf("a request signed without the key: %q, want 401", got)
	}
	bearer := bytes.Replace(req, auth, []byte("Authorization: Bearer "+key), 1)
	if got := status(bearer); !strings.Contains(got, " 401 ") {
		t.Errorf("the key as a bearer token: %q, want 401", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("the source: %v", err)
	}
	if line, err := send(addr, req); err == nil {
		t.Errorf("after the run, the replayed request was answered: %q", line)
	}
}

// regexpAuth is the Authorization line of a recorded request.
func regexpAuth(req []byte) []byte {
	i := bytes.Index(req, []byte("Authorization: "))
	j := bytes.Index(req[i:], []byte("\r\n"))
	return req[i : i+j]
}

// TestJudgeVerifiesContent: plan's "complete" means verified. A node
// whose config.json (a file not stored with LFS) holds an HTML page of
// its length, or whose snapshot file links to another blob of the same
// size or out of the cache, is not complete: the probe's git blob ids and
// link targets show it. Staging from a good copy then mends each, and
// the node is complete.
func TestJudgeVerifiesContent(t *testing.T) {
	root := t.TempDir()
	m, good := source(t, filepath.Join(root, "spark1"))
	if j := probe(t, m, good); j.State != Complete {
		t.Fatalf("the good copy: %s", j)
	}
	cfg := m.Files[0]
	for i, tc := range []struct {
		name  string
		spoil func(t *testing.T, l Layout)
		want  string
	}{
		{"an HTML page of config.json's length", func(t *testing.T, l Layout) {
			page := []byte("<html>captive portal</html>")
			page = append(page, bytes.Repeat([]byte(" "), int(cfg.Size)-len(page))...)
			if err := os.WriteFile(filepath.Join(l.Dir, l.StorePath(m, cfg)), page, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "partial, 1 file missing (1 with content other than the hub's), 700 B to stage"},
		{"a snapshot file linked to another blob of its size", func(t *testing.T, l Layout) {
			other := filepath.Join(l.Dir, "blobs", strings.Repeat("e", 40))
			if err := os.WriteFile(other, bytes.Repeat([]byte("x"), int(cfg.Size)), 0o644); err != nil {
				t.Fatal(err)
			}
			relink(t, filepath.Join(l.Dir, l.FilePath(m, cfg)), "../../blobs/"+strings.Repeat("e", 40))
		}, "partial, 1 snapshot link(s) missing"},
		{"a snapshot file linked out of the cache", func(t *testing.T, l Layout) {
			secret, _ := secretFile(t, root, "key-"+filepath.Base(filepath.Dir(l.Dir)), int(cfg.Size))
			relink(t, filepath.Join(l.Dir, l.FilePath(m, cfg)), secret)
		}, "partial, 1 snapshot link(s) missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, l := source(t, filepath.Join(root, "node"+strconv.Itoa(i)))
			tc.spoil(t, l)
			if j := probe(t, m, l); j.State == Complete || j.String() != tc.want {
				t.Fatalf("judged %q, want %q", j, tc.want)
			}
			if err := stage(t, m, good, map[string]Layout{"spark2": l}, nil); err != nil {
				t.Fatal(err)
			}
			if j := probe(t, m, l); j.State != Complete {
				t.Errorf("after staging: %s", j)
			}
			sameContent(t, m, good, l)
		})
	}
}
