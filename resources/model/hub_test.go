package model

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

// hfClient returns the PYTHONPATH holding the pinned huggingface_hub
// (`make hfclient`), or skips.
func hfClient(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("RAYFORM_HFCLIENT")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "rayform", "hfclient-0.36.0")
	}
	if _, err := os.Stat(filepath.Join(dir, "huggingface_hub")); err != nil {
		t.Skipf("no pinned huggingface_hub in %s (make hfclient)", dir)
	}
	return dir
}

const hubToken = "hf_labTokenAbcdefghijklmnopqrstuvwx"

// noAccessToken is a token the hub knows that was not granted the gated
// repository.
const noAccessToken = "hf_labNoAccessAbcdefghijklmnopqrstu"

func startHub(t *testing.T) (*httptest.Server, *lab.HubRepo, *lab.HubRepo) {
	t.Helper()
	tiny := &lab.HubRepo{ID: "rayform-lab/tiny", Shards: []int64{3 << 20, 2<<20 + 12345}}
	gated := &lab.HubRepo{ID: "rayform-lab/gated", Gated: true, Shards: []int64{1 << 20}}
	h, err := lab.NewHub([]string{hubToken}, tiny, gated)
	if err != nil {
		t.Fatal(err)
	}
	h.NoAccess = []string{noAccessToken}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, tiny, gated
}

// download runs the real client's snapshot_download against the hub, the
// token in HF_TOKEN (the environment, never the command line).
func download(t *testing.T, py, endpoint, cache, repo, rev, token string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-c", `
import sys
from huggingface_hub import snapshot_download
print(snapshot_download(sys.argv[1], revision=sys.argv[2], cache_dir=sys.argv[3]))
`, repo, rev, cache)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+py, "HF_ENDPOINT="+endpoint, "HF_HUB_DISABLE_TELEMETRY=1",
		"HF_HUB_DISABLE_PROGRESS_BARS=1", "HF_HUB_ETAG_TIMEOUT=30", "HF_HUB_DISABLE_XET=1")
	if token != "" {
		cmd.Env = append(cmd.Env, "HF_TOKEN="+token)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// manifestFrom asks the hub as rayform does: the revision's files with
// blobs=true, narrowed by the index.
func manifestFrom(t *testing.T, endpoint, repo, rev string) Manifest {
	t.Helper()
	get := func(u string) []byte {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer "+hubToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
		}
		return b
	}
	m, err := ParseHubRevision(repo, rev, get(endpoint+"/api/models/"+repo+"/revision/"+rev+"?blobs=true"))
	if err != nil {
		t.Fatal(err)
	}
	m, err = Select(m, get(endpoint+"/"+repo+"/resolve/"+m.Commit+"/"+IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestHubServesTheRealClient: huggingface_hub's snapshot_download fetches
// the lab hub's generated repository into a cache that the tree probe and
// Judge find complete (so the hub's sizes, ETags and sha256 are what the
// client stores under), with the manifest rayform reads from the hub's
// API; a second cache staged node to node from it matches byte for byte.
// The failure answers reach the client as the hub's own errors.
func TestHubServesTheRealClient(t *testing.T) {
	py := hfClient(t)
	srv, tiny, _ := startHub(t)
	cache := filepath.Join(t.TempDir(), "hub")
	out, err := download(t, py, srv.URL, cache, tiny.ID, "main", "")
	if err != nil {
		t.Fatalf("snapshot_download: %v\n%s", err, out)
	}
	m := manifestFrom(t, srv.URL, tiny.ID, "main")
	if m.Commit != tiny.Commit() || len(m.Files) != 8 {
		t.Fatalf("manifest %+v", m)
	}
	l := HFCacheLayout(cache, tiny.ID)
	if got := strings.TrimSpace(out); !strings.HasSuffix(got, filepath.Join(l.Dir, "snapshots", m.Commit)) {
		t.Errorf("snapshot path %q", got)
	}
	if j := probe(t, m, l); j.State != Complete {
		t.Fatalf("after snapshot_download: %s", j)
	}

	other := HFCacheLayout(filepath.Join(t.TempDir(), "hub"), tiny.ID)
	if err := stage(t, m, l, map[string]Layout{"spark2": other}, nil); err != nil {
		t.Fatal(err)
	}
	sameContent(t, m, l, other)

	for _, tc := range []struct {
		name, repo, rev, token, want string
	}{
		{"gated without a token", "rayform-lab/gated", "main", "", "GatedRepoError"},
		{"wrong token", "rayform-lab/tiny", "main", "hf_wrong", "Invalid credentials in Authorization header"},
		{"unknown revision", "rayform-lab/tiny", "v9", "", "RevisionNotFoundError"},
		{"unknown repository", "rayform-lab/nope", "main", "", "RepositoryNotFoundError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := download(t, py, srv.URL, filepath.Join(t.TempDir(), "hub"), tc.repo, tc.rev, tc.token)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("err %v, want %q in:\n%s", err, tc.want, out)
			}
		})
	}
	if out, err := download(t, py, srv.URL, filepath.Join(t.TempDir(), "hub"), "rayform-lab/gated", "main", hubToken); err != nil {
		t.Errorf("gated with the token: %v\n%s", err, out)
	}
}

// recordingConn records every command a connection runs.
type recordingConn struct {
	transport.Conn
	mu   sync.Mutex
	cmds []transport.Cmd
}

func (c *recordingConn) Run(ctx context.Context, cmd transport.Cmd) (transport.Result, error) {
	c.mu.Lock()
	c.cmds = append(c.cmds, cmd)
	c.mu.Unlock()
	return c.Conn.Run(ctx, cmd)
}

// TestDownloadFromHub: a node without the model downloads it from the lab
// hub (a gated repository, with the token) into the layout the real
// client makes, judged complete; the token is in no command's argv,
// script or environment, nor in any error. A wrong token, no token and a
// revision the hub lacks each end with the hub's cause and the fix, before
// anything is written under a final name.
func TestDownloadFromHub(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	srv, _, gated := startHub(t)
	m := manifestFrom(t, srv.URL, gated.ID, "main")
	dst := HFCacheLayout(filepath.Join(t.TempDir(), "hub"), gated.ID)
	conn := &recordingConn{Conn: local.New(local.Options{})}
	node := Peer{Name: "spark1", Conn: conn, Layout: dst}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rec recorder
	if err := Download(ctx, m, node, Hub{Endpoint: srv.URL, Token: hubToken}, StageOptions{Progress: rec.add}); err != nil {
		t.Fatal(err)
	}
	if j := probe(t, m, dst); j.State != Complete {
		t.Fatalf("after the download: %s", j)
	}
	if ps := rec.by["spark1"]; len(ps) == 0 || !ps[len(ps)-1].Finished || ps[len(ps)-1].Done != m.Bytes() {
		t.Errorf("progress %+v", ps)
	}
	for _, c := range conn.cmds {
		if strings.Contains(c.String(), hubToken) || strings.Contains(strings.Join(c.Argv, " "), hubToken) {
			t.Errorf("the token is in a command: %.200s", c.String())
		}
		for k, v := range c.Env {
			if strings.Contains(v, hubToken) {
				t.Errorf("the token is in the environment variable %s", k)
			}
		}
	}

	bad := []struct {
		name, token, rev, want string
	}{
		{"wrong token", "hf_wrong", "main", "spark1: staging rayform-lab/gated from the hub " + srv.URL + ": the hub answered 401 for rayform-lab/gated@main .gitattributes: it refused the token (Invalid credentials in Authorization header); set the model's token to a valid token with read access"},
		{"no token", "", "main", "the repository is gated (Access to model rayform-lab/gated is restricted."},
		{"token without access", noAccessToken, "main", "the hub answered 403 for rayform-lab/gated@main .gitattributes: the token has no access (Access to model rayform-lab/gated is restricted and you are not in the authorized list. Visit https://huggingface.co/rayform-lab/gated to ask for access.); request access to the repository on the hub, or use a token that has it"},
		{"unknown revision", hubToken, "v9", "the hub has no revision 'v9' of rayform-lab/gated (Invalid rev id: v9); check the model's revision"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			mm := m
			mm.Revision = tc.rev
			if tc.rev != "main" {
				mm.Commit = tc.rev
			}
			l := HFCacheLayout(filepath.Join(t.TempDir(), "hub"), gated.ID)
			err := Download(ctx, mm, Peer{Name: "spark1", Conn: local.New(local.Options{}), Layout: l}, Hub{Endpoint: srv.URL, Token: tc.token}, StageOptions{Streams: 1})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
			if tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Errorf("the token is in the error")
			}
			if j := probe(t, mm, l); j.State == Complete || len(j.Missing) != len(mm.Files) {
				t.Errorf("after the refusal: %s", j)
			}
		})
	}
}

// TestResolve: the manifest plan reads from the hub (the lab hub on
// loopback), and each refusal's cause and fix, the token in none.
func TestResolve(t *testing.T) {
	srv, tiny, gated := startHub(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := Resolve(ctx, srv.Client(), srv.URL+"/", "", tiny.ID, "main")
	if err != nil {
		t.Fatal(err)
	}
	if m.Commit != tiny.Commit() || len(m.Files) != 8 || m.Bytes() <= 5<<20 {
		t.Errorf("manifest %+v", m)
	}
	for _, tc := range []struct {
		name, repo, rev, token, want string
	}{
		{"gated without a token", gated.ID, "main", "", "model rayform-lab/gated@main: the hub answered 401: the repository is gated (Access to model rayform-lab/gated is restricted."},
		{"wrong token", gated.ID, "main", "hf_wrongtoken", "model rayform-lab/gated@main: the hub answered 401: it refused the token (Invalid credentials in Authorization header); set the model's token to a valid token with read access"},
		{"token without access", gated.ID, "main", noAccessToken, "model rayform-lab/gated@main: the hub answered 403: the token has no access (Access to model rayform-lab/gated is restricted and you are not in the authorized list. Visit https://huggingface.co/rayform-lab/gated to ask for access.); request access to rayform-lab/gated on the hub, or use a token that has it"},
		{"no such repository", "rayform-lab/nope", "main", "", "the hub answered 401: no repository rayform-lab/nope, or it is private (Repository not found); check the model's source, or set its token"},
		{"no such revision", tiny.ID, "v9", "", `the hub answered 404: rayform-lab/tiny has no revision "v9" (Invalid rev id: v9); check the model's revision`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(ctx, srv.Client(), srv.URL, tc.token, tc.repo, tc.rev)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
			if tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Error("the token is in the error")
			}
		})
	}
	if _, err := Resolve(ctx, srv.Client(), srv.URL, hubToken, gated.ID, "main"); err != nil {
		t.Errorf("gated with the token: %v", err)
	}
}
