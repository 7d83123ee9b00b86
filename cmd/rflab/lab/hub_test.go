package lab

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHubFiles: a generated shard is a valid safetensors file whose tensor
// fills it, a ranged GET returns exactly that slice of the whole, and the
// API's lfs.sha256 is the hash of what GET returns.
func TestHubFiles(t *testing.T) {
	r := &HubRepo{ID: "rayform-lab/t", Shards: []int64{1<<20 + 333}}
	h, err := NewHub(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path, rng string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, b
	}
	code, _, info := get("/api/models/rayform-lab/t/revision/main?blobs=true", "")
	var api struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			Name string `json:"rfilename"`
			Size int64  `json:"size"`
			LFS  *struct {
				SHA256 string `json:"sha256"`
			} `json:"lfs"`
		} `json:"siblings"`
	}
	if err := json.Unmarshal(info, &api); code != 200 || err != nil || api.SHA != r.Commit() {
		t.Fatalf("info %d %v %s", code, err, info)
	}
	name := "model-00001-of-00001.safetensors"
	code, hdr, whole := get("/rayform-lab/t/resolve/main/"+name, "")
	if code != 200 || int64(len(whole)) != r.Shards[0] || hdr.Get("Etag") == "" {
		t.Fatalf("GET shard: %d, %d bytes, %v", code, len(whole), hdr)
	}
	sum := sha256.Sum256(whole)
	found := false
	for _, s := range api.Siblings {
		if s.Name == name {
			found = s.LFS != nil && s.LFS.SHA256 == hex.EncodeToString(sum[:]) && s.Size == r.Shards[0]
		}
	}
	if !found {
		t.Errorf("the API's sha256/size of %s is not that of its content: %s", name, info)
	}
	hl := binary.LittleEndian.Uint64(whole[:8])
	var st map[string]struct {
		Offsets [2]int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(whole[8:8+hl], &st); err != nil || len(st) != 1 {
		t.Fatalf("safetensors header: %v %q", err, whole[8:8+hl])
	}
	for _, v := range st {
		if 8+int64(hl)+v.Offsets[1] != int64(len(whole)) {
			t.Errorf("the tensor ends at %d of %d", 8+int64(hl)+v.Offsets[1], len(whole))
		}
	}
	for _, from := range []int{0, 5, 70000, 65536 + 8 + int(hl), len(whole) - 1} {
		code, _, part := get("/rayform-lab/t/resolve/main/"+name, "bytes="+itoa(from)+"-")
		if code != 206 || !bytes.Equal(part, whole[from:]) {
			t.Errorf("range from %d: %d, %d bytes, equal %v", from, code, len(part), bytes.Equal(part, whole[from:]))
		}
	}
	if code, _, _ := get("/rayform-lab/t/resolve/main/"+name, "bytes="+itoa(len(whole))+"-"); code != 416 {
		t.Errorf("a range past the end: %d, want 416", code)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestWriteHFCache: the copy lab up seeds is, file for file, what the hub
// serves for the commit, laid out as huggingface_hub lays it out (blobs
// named by ETag, snapshot links relative to blobs/, refs/main the commit
// without a newline), and writing it again changes nothing.
func TestWriteHFCache(t *testing.T) {
	r := &HubRepo{ID: "rayform-lab/t", Shards: []int64{1<<20 + 333, 4096}}
	h, err := NewHub(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	cache := t.TempDir()
	commit, err := r.WriteHFCache(cache)
	if err != nil || commit != r.Commit() {
		t.Fatalf("WriteHFCache = %q, %v; want %s", commit, err, r.Commit())
	}
	if _, err := r.WriteHFCache(cache); err != nil {
		t.Fatalf("again: %v", err)
	}
	repo := filepath.Join(cache, "models--rayform-lab--t")
	if b, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err != nil || string(b) != commit {
		t.Errorf("refs/main = %q, %v", b, err)
	}
	files, err := r.Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		resp, err := http.Get(srv.URL + "/rayform-lab/t/resolve/" + commit + "/" + f.Path)
		if err != nil {
			t.Fatal(err)
		}
		served, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		etag := strings.Trim(resp.Header.Get("Etag"), `"`)
		link := filepath.Join(repo, "snapshots", commit, f.Path)
		target, err := os.Readlink(link)
		if err != nil || target != "../../blobs/"+f.Etag() || etag != f.Etag() {
			t.Errorf("%s: link %q (%v), etag served %q, want ../../blobs/%s", f.Path, target, err, etag, f.Etag())
		}
		seeded, err := os.ReadFile(link)
		if err != nil || !bytes.Equal(seeded, served) {
			t.Errorf("%s: the seeded copy (%d bytes, %v) is not what the hub serves (%d bytes)", f.Path, len(seeded), err, len(served))
		}
	}
	if left, _ := filepath.Glob(filepath.Join(repo, "blobs", "*.incomplete")); len(left) > 0 {
		t.Errorf("partial files left: %v", left)
	}
}
