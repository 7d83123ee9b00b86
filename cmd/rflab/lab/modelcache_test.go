//go:build linux

package lab

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/model"
)

// TestModelCachePerNode: a file written to the model cache on spark1 over
// its sshd is on spark1 (again over SSH, and in spark1's directory) and
// not on spark2, nor in the root mount namespace's ModelCacheMount; with
// ModelDisk each node's cache is a disk of that size (spark2's its
// override's): a write past it fails with "No space left on device" on
// that node only. Up seeded the
// head alone with a complete copy of HubRepoTiny, laid out as
// huggingface_hub lays it out, with the bytes the lab hub serves.
func TestModelCachePerNode(t *testing.T) {
	requireLab(t, false)
	l := upLab(t, Config{Name: testLabName("rfl-cache"), Nodes: 2, NoDocker: true, ModelDisk: 40 << 20, Overrides: []string{"spark2.model-disk=20M"}, HubBigMiB: 8})
	spark1, _ := l.Node("spark1")
	sshOK(t, l, "spark1", "mkdir -p "+ModelCacheDir+"/models--a--b && echo head-copy > "+ModelCacheDir+"/models--a--b/config.json")

	if got := strings.TrimSpace(sshOK(t, l, "spark1", "cat "+ModelCacheDir+"/models--a--b/config.json")); got != "head-copy" {
		t.Errorf("spark1 reads %q back", got)
	}
	if b, err := os.ReadFile(filepath.Join(spark1.ModelCacheHostDir(), "hub", "models--a--b", "config.json")); err != nil || string(b) != "head-copy\n" {
		t.Errorf("spark1's cache directory holds %q, %v", b, err)
	}
	out, err := sshErr(t, l, "spark2", "cat "+ModelCacheDir+"/models--a--b/config.json")
	if err == nil || !strings.Contains(out, "No such file or directory") {
		t.Errorf("spark2 sees spark1's file: %v %q", err, out)
	}
	if out, err := labRun(t, l, "spark2", "ls", ModelCacheDir); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("lab exec spark2 ls %s = %q, %v; want an empty cache", ModelCacheDir, out, err)
	}
	if _, err := os.Stat(filepath.Join(ModelCacheDir, "models--a--b")); !os.IsNotExist(err) {
		t.Errorf("the root namespace sees the node's file under %s: %v", ModelCacheDir, err)
	}
	// Each node has its own /dev/shm, as a host has.
	seg := "/dev/shm/rayform-lab-" + l.Name
	sshOK(t, l, "spark1", "echo segment > "+seg)
	if out, err := sshErr(t, l, "spark2", "cat "+seg); err == nil || !strings.Contains(out, "No such file or directory") {
		t.Errorf("spark2 sees spark1's %s: %v %q", seg, err, out)
	}
	if _, err := os.Stat(seg); !os.IsNotExist(err) {
		t.Errorf("the root namespace sees spark1's %s: %v", seg, err)
	}

	t.Run("seeded on the head only", func(t *testing.T) {
		m := l.Seeded
		if m == nil || m.Repo != HubRepoTiny || m.Node != "spark1" || m.CacheDir != ModelCacheDir || m.Revision != "main" {
			t.Fatalf("seeded %+v", m)
		}
		repo := ModelCacheDir + "/models--rayform-lab--tiny"
		if got := sshOK(t, l, "spark1", "cat "+repo+"/refs/main"); got != m.Commit {
			t.Errorf("spark1's refs/main = %q, want %q", got, m.Commit)
		}
		var tiny *HubRepo
		for _, r := range LabHubRepos(l.HubBigMiB) {
			if r.ID == HubRepoTiny {
				tiny = r
			}
		}
		files, err := tiny.Files()
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, f := range files {
			total += f.Size
			// The snapshot's file resolves to its blob, whose sha256 (for a
			// shard) is what the hub publishes.
			out := sshOK(t, l, "spark1", "stat -L -c %s "+repo+"/snapshots/"+m.Commit+"/"+f.Path+" && readlink "+repo+"/snapshots/"+m.Commit+"/"+f.Path)
			if want := fmt.Sprintf("%d\n../../blobs/%s\n", f.Size, f.Etag()); out != want {
				t.Errorf("spark1 %s: %q, want %q", f.Path, out, want)
			}
			if f.SHA256 != "" {
				if got := strings.Fields(sshOK(t, l, "spark1", "sha256sum "+repo+"/blobs/"+f.Etag()))[0]; got != f.SHA256 {
					t.Errorf("%s sha256 %s, the hub publishes %s", f.Path, got, f.SHA256)
				}
			}
		}
		if total != m.Bytes || len(files) < 8 {
			t.Errorf("%d files of %d bytes, seeded %d", len(files), total, m.Bytes)
		}
		if out, err := sshErr(t, l, "spark2", "ls "+repo); err == nil {
			t.Errorf("spark2 has the seeded model: %q", out)
		}
	})

	t.Run("hub tokens", func(t *testing.T) { // HubBigMiB 8: the hub builds the gated repository at the first request
		hc := l.clientHTTP()
		for _, tt := range []struct {
			name, token, code string
			status            int
		}{{"token", l.HubToken(), "", 200}, {"no access", l.HubNoAccessToken(), "GatedRepo", 403}, {"none", "", "GatedRepo", 401}} {
			req, _ := http.NewRequest(http.MethodGet, l.HubEndpoint+"/api/models/"+HubRepoBig, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status || resp.Header.Get("X-Error-Code") != tt.code {
				t.Errorf("%s: %s %q, want %d %q", tt.name, resp.Status, resp.Header.Get("X-Error-Code"), tt.status, tt.code)
			}
		}
		if l.HubToken() == "" || l.HubToken() == l.HubNoAccessToken() {
			t.Errorf("tokens %q and %q", l.HubToken(), l.HubNoAccessToken())
		}
	})

	t.Run("model disk size", func(t *testing.T) {
		if got := strings.TrimSpace(sshOK(t, l, "spark2", "df -k "+ModelCacheDir+" | awk 'NR==2{print $2}'")); got != "20480" {
			t.Errorf("spark2's model disk is %s KiB, want 20480 (its override)", got)
		}
		out, err := sshErr(t, l, "spark2", "head -c 22000000 /dev/zero > "+ModelCacheDir+"/fill")
		if err == nil || !strings.Contains(out, "No space left on device") {
			t.Errorf("writing 22 MB to a 20 MiB model disk: %v %q", err, out)
		}
		if got := strings.TrimSpace(sshOK(t, l, "spark1", "df -k "+ModelCacheDir+" | awk 'NR==2{print $2, ($4 > 0)}'")); got != "40960 1" {
			t.Errorf("spark1's model disk (KiB, has free space) = %q, want 40960 1: spark2's full disk is not spark1's", got)
		}
	})
}

// TestModelHCL: the model block names the lab hub's public repository
// and endpoint, and says where lab up seeded it; rayform.hcl with it loads
// with the model kind registered, the serve using the model's source and
// the cache at the lab's per-node cache directory.
func TestModelHCL(t *testing.T) {
	l := &Lab{HubEndpoint: "http://" + HubAddr(), Seeded: &SeededModel{Repo: HubRepoTiny, Node: "spark1", Commit: strings.Repeat("a", 40), CacheDir: ModelCacheDir}}
	src := l.modelHCL()
	for _, want := range []string{`source   = "rayform-lab/tiny"`, `endpoint = "http://10.1.230.1:5080"`, "on spark1 only (aaaaaaaaaaaa in its cache " + ModelCacheDir + ")"} {
		if !strings.Contains(src, want) {
			t.Errorf("model block lacks %q:\n%s", want, src)
		}
	}
	c, err := Config{Nodes: 3}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := c.nodes()
	if err != nil {
		t.Fatal(err)
	}
	l.Name, l.Dir, l.ClientNetns, l.Nodes, l.Docker = c.Name, c.Dir, c.Name+"-client", nodes, true
	l.SSHConfig, l.KnownHosts, l.Key = c.Dir+"/ssh_config", c.Dir+"/known_hosts", c.Dir+"/id_ed25519"
	full := l.rayformHCLWith(true)
	cfg, diags := config.LoadFiles(map[string][]byte{"rayform.hcl": []byte(full)}, config.Options{Kinds: resources.Kinds().Schemas()})
	if diags.HasErrors() {
		t.Fatalf("rayform.hcl with the model does not load: %v\n%s", diags, full)
	}
	ms := model.Serving(cfg, HubRepoTiny)
	if len(ms) != 1 || ms[0].CacheDir != ModelCacheDir || ms[0].Endpoint != l.HubEndpoint {
		t.Errorf("the serve's models %+v, want one in %s from %s", ms, ModelCacheDir, l.HubEndpoint)
	}
}
