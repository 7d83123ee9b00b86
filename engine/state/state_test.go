package state

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testdata is the repository's state fixtures directory.
const testdata = "../../testdata/state"

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(testdata, name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run with -update and review the diff)\ngot:\n%s", name, got)
	}
}

// sparkState is the two-node DGX Spark pair after an apply.
func sparkState() *State {
	s := &State{Version: Version, Lineage: "5f0c2a9e-7d1b-4c43-9a6e-2b8f1d0e3c47", Project: "spark"}
	at := time.Date(2025, 6, 1, 14, 0, 0, 123, time.FixedZone("CEST", 2*3600))
	s.Set("ray_cluster.main", Resource{
		Type: "ray_cluster",
		Hosts: []Host{
			{Node: "spark1", Host: "10.1.230.180", User: "aurora", Port: 22},
			{Node: "spark2", Host: "10.1.230.181", User: "aurora", Port: 2222, Bastion: "aurora@10.1.230.180:22"},
		},
		Container: "rayform-main",
		AppliedAt: at,
	})
	s.Set("vllm_serve.qwen", Resource{
		Type:      "vllm_serve",
		Hosts:     []Host{{Node: "spark1", Host: "10.1.230.180", User: "aurora", Port: 22}},
		Container: "rayform-ray-head",
		AppliedAt: at.Add(5 * time.Minute),
	})
	return s
}

func TestSaveGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), DefaultPath)
	s := sparkState()
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	if s.Serial != 1 {
		t.Errorf("serial after first save = %d, want 1", s.Serial)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "saved.json", got)
}

func TestSaveLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), DefaultPath)
	s := sparkState()
	for i := 1; i <= 3; i++ {
		if err := s.Save(path); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		got, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if got.Serial != uint64(i) {
			t.Errorf("save %d: loaded serial %d", i, got.Serial)
		}
		got.mu = s.mu // the lock is not content
		if !reflect.DeepEqual(got, s) {
			t.Errorf("save %d: loaded %+v, saved %+v", i, got, s)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	des, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 1 || des[0].Name() != "state.json" {
		t.Errorf("state directory holds %v, want only state.json", des)
	}
}

func TestLoadMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), DefaultPath)
	a, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuid.MatchString(a.Lineage) {
		t.Errorf("lineage %q is not a v4 UUID", a.Lineage)
	}
	if a.Lineage == b.Lineage {
		t.Errorf("two fresh states share lineage %s", a.Lineage)
	}
	if a.Serial != 0 || len(a.Addresses()) != 0 || a.Resources == nil {
		t.Errorf("fresh state = %+v, want serial 0, no resources, non-nil map", a)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Load created the file: %v", err)
	}
}

func TestLoadFixture(t *testing.T) {
	s, err := Load(filepath.Join(testdata, "v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Addresses(), []string{"ray_cluster.main", "vllm_serve.qwen"}; !slices.Equal(got, want) {
		t.Errorf("Addresses() = %v, want %v", got, want)
	}
	r, ok := s.Get("ray_cluster.main")
	if !ok {
		t.Fatal("ray_cluster.main missing")
	}
	want := Host{Node: "spark2", Host: "10.1.230.181", User: "aurora", Port: 2222, Bastion: "aurora@10.1.230.180:22"}
	if len(r.Hosts) != 2 || r.Hosts[1] != want {
		t.Errorf("hosts = %+v, want second %+v", r.Hosts, want)
	}
	if s.Serial != 3 || s.Project != "spark" || !r.AppliedAt.Equal(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("state = %+v", s)
	}
}

func TestLoadCorrupt(t *testing.T) {
	tests := []struct {
		file string
		want string // after "reading state: testdata/state/<file>"
	}{
		{"empty.json", ": file is empty"},
		{"truncated.json", ":9:1: unexpected end of JSON input (truncated file?)"},
		{"syntax.json", ":7:1: invalid character '}' looking for beginning of object key string"},
		{"trailing.json", ":2:1: unexpected data after the top-level JSON value"},
		{"version2.json", ": state format version 2 is not supported (this rayform reads version 1)"},
		{"no-version.json", `: no "version" field; is this a rayform state file?`},
		{"unknown-field.json", `: json: unknown field "env"`},
		{"wrong-type.json", ":4:15: json: cannot unmarshal string into Go struct field State.serial of type uint64"},
		{"no-lineage.json", ": empty lineage"},
		{"no-host.json", ": resource ray_cluster.main: host 0 has no address"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(testdata, tt.file)
			s, err := Load(path)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", s)
			}
			if want := "reading state: " + path + tt.want; err.Error() != want {
				t.Errorf("error\n got: %v\nwant: %s", err, want)
			}
		})
	}
}

func TestSaveConflict(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string) *State // returns the state to save
	}{
		{"another run saved in between", func(t *testing.T, path string) *State {
			a := mustLoad(t, path)
			b := mustLoad(t, path)
			if err := b.Save(path); err != nil {
				t.Fatal(err)
			}
			return a
		}},
		{"different lineage on disk", func(t *testing.T, path string) *State {
			s := sparkState()
			s.Serial = 1
			return s
		}},
		{"file removed after load", func(t *testing.T, path string) *State {
			s := mustLoad(t, path)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			first, err := New("spark")
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Save(path); err != nil {
				t.Fatal(err)
			}
			s := tt.setup(t, path)
			before, _ := os.ReadFile(path)
			serial := s.Serial
			err = s.Save(path)
			if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Save = %v, want ErrConflict naming %s", err, path)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Errorf("file changed by a refused save:\n%s", after)
			}
			if s.Serial != serial {
				t.Errorf("serial moved from %d to %d on a refused save", serial, s.Serial)
			}
		})
	}
}

func mustLoad(t *testing.T, path string) *State {
	t.Helper()
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSaveRefusesToOverwriteCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte("{\"version\": 1,"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := sparkState()
	err := s.Save(path)
	if err == nil || !strings.Contains(err.Error(), "not overwriting a file that cannot be read") {
		t.Fatalf("Save = %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "{\"version\": 1," {
		t.Errorf("corrupt file overwritten with %q", got)
	}
}

// TestSaveFailureKeepsOldFile checks a save that fails (here, in a
// read-only directory) at the State level; jsonfile's tests make the write
// fail half way, which also runs as root.
func TestSaveFailureKeepsOldFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions; see jsonfile.TestWriteAtomicFailureKeepsOldFile")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	s := sparkState()
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	s.Set("ray_cluster.other", Resource{Type: "ray_cluster"})
	if err := s.Save(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Save in a read-only directory = %v, want an error naming %s", err, path)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("state file changed by a failed save")
	}
	if s.Serial != 1 {
		t.Errorf("serial = %d after a failed save, want 1", s.Serial)
	}
	if des, _ := os.ReadDir(dir); len(des) != 1 {
		t.Errorf("directory holds %d entries, want only state.json", len(des))
	}
}

func TestSetGetRemove(t *testing.T) {
	s := &State{}
	hosts := []Host{{Node: "a", Host: "10.0.0.1"}}
	s.Set("ray_cluster.b", Resource{Type: "ray_cluster", Hosts: hosts})
	s.Set("ray_cluster.a", Resource{Type: "ray_cluster"})
	s.Set("node_net.c", Resource{Type: "node_net"})
	hosts[0].Host = "changed by caller"
	if got := s.Addresses(); !slices.Equal(got, []string{"node_net.c", "ray_cluster.a", "ray_cluster.b"}) {
		t.Errorf("Addresses() = %v", got)
	}
	r, ok := s.Get("ray_cluster.b")
	if !ok || r.Hosts[0].Host != "10.0.0.1" {
		t.Errorf("Get = %+v, %v; Set must copy the hosts", r, ok)
	}
	r.Hosts[0].Host = "changed by reader"
	if r2, _ := s.Get("ray_cluster.b"); r2.Hosts[0].Host != "10.0.0.1" {
		t.Errorf("Get must return a copy of the hosts, state now holds %+v", r2)
	}
	s.Remove("ray_cluster.b")
	s.Remove("absent.x")
	if _, ok := s.Get("ray_cluster.b"); ok {
		t.Error("ray_cluster.b still present after Remove")
	}
	if got := s.Addresses(); !slices.Equal(got, []string{"node_net.c", "ray_cluster.a"}) {
		t.Errorf("Addresses() after Remove = %v", got)
	}
}

// TestNoRoomForSecrets pins the fields of what the state records: a field
// that could carry configuration values (environment, variables, tokens)
// must not be added. If this fails, put the value on the hosts (labels) or
// nowhere, not in the state. Images holds an image's public answer about
// the model code it has (names and versions), keyed by image ID: the
// answer is its kind's, opaque here, and the kind pins its fields (the
// serve kind's TestImageAnswerHoldsNoValues).
func TestNoRoomForSecrets(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		want []string
	}{
		{reflect.TypeFor[State](), []string{"Version", "Lineage", "Serial", "Project", "Resources", "Images"}},
		{reflect.TypeFor[Image](), []string{"Answer", "Refs", "Seconds", "CheckedAt"}},
		{reflect.TypeFor[Resource](), []string{"Type", "Hosts", "Container", "Head", "AppliedAt"}},
		{reflect.TypeFor[Host](), []string{"Node", "Host", "User", "Port", "Bastion", "FabricAddress", "FabricInterface"}},
	}
	for _, tt := range tests {
		var got []string
		for f := range tt.typ.Fields() {
			if !f.IsExported() {
				continue // not written
			}
			got = append(got, f.Name)
			switch f.Type.Kind() {
			case reflect.Interface:
				t.Errorf("%s.%s is an interface: it could hold anything", tt.typ.Name(), f.Name)
			case reflect.Map:
				if f.Type != reflect.TypeFor[map[string]Resource]() && f.Type != reflect.TypeFor[map[string]Image]() {
					t.Errorf("%s.%s is a map %v: it could hold values", tt.typ.Name(), f.Name, f.Type)
				}
			}
			if n := strings.ToLower(f.Name); strings.Contains(n, "env") || strings.Contains(n, "value") || strings.Contains(n, "secret") || strings.Contains(n, "token") {
				t.Errorf("%s.%s looks like it holds configuration values", tt.typ.Name(), f.Name)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s fields = %v, want exactly %v", tt.typ.Name(), got, tt.want)
		}
	}
}

func TestNewLineage(t *testing.T) {
	zero := bytes.NewReader(make([]byte, 16))
	got, err := NewLineage(zero)
	if err != nil {
		t.Fatal(err)
	}
	if want := "00000000-0000-4000-8000-000000000000"; got != want {
		t.Errorf("NewLineage(zeros) = %s, want %s", got, want)
	}
	if _, err := NewLineage(bytes.NewReader(make([]byte, 3))); err == nil {
		t.Error("NewLineage from a short reader succeeded")
	}
}

func TestLockSerialisesRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".rayform", "state.json")
	unlock, err := Lock(path, "alice@laptop pid=1 rayform destroy", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(path, "bob pid=2 rayform apply", 0)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "is held by alice@laptop pid=1 rayform destroy since") {
		t.Fatalf("second Lock = %v, want ErrLocked naming the holder", err)
	}
	unlock()
	again, err := Lock(path, "bob pid=2 rayform apply", 0)
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	again()
}

// Finding 5: no sequence of saves makes the state unreadable; a record
// Load would refuse is an error at Save and the file keeps its content.
func TestSaveRefusesAnUnreadableState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	st, err := New("p")
	if err != nil {
		t.Fatal(err)
	}
	st.Set("ray_cluster.main", Resource{Type: "ray_cluster", Hosts: []Host{{Node: "spark1", Host: "10.0.0.1"}}})
	if err := st.Save(path); err != nil {
		t.Fatal(err)
	}
	st.Set("vllm_serve.qwen", Resource{Type: "vllm_serve", Hosts: []Host{{Node: "spark1"}}})
	if err := st.Save(path); err == nil || !strings.Contains(err.Error(), "host 0 has no address") {
		t.Fatalf("Save of a host without an address = %v, want a refusal", err)
	}
	loaded, err := Load(path)
	if err != nil {
		t.Fatalf("the state became unreadable: %v", err)
	}
	if _, ok := loaded.Get("ray_cluster.main"); !ok || loaded.Serial != 1 {
		t.Fatalf("state after the refused save: %+v", loaded)
	}
}
