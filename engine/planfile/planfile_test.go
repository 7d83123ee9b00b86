package planfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testdata is the repository's plan file fixtures directory.
const testdata = "../../testdata/planfile"

// secret is the sensitive variable's value; it must never reach a file.
const secret = "hf_SECRETabc123xyz"

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

// current is what a plan of the DGX Spark pair is computed from.
func current() Current {
	observed := map[string]string{"spark1": "sha256:aa", "spark2": "sha256:bb"}
	return Current{
		RayformVersion: "0.1.0",
		ConfigFiles: map[string][]byte{
			"main.hcl":      []byte("node \"spark1\" {\n  host = \"10.1.230.180\"\n}\n"),
			"vars.hcl":      []byte("variable \"tp\" {\n  default = 2\n}\n"),
			"secret.rfvars": []byte(secretVarFile),
		},
		Variables: map[string]json.RawMessage{
			"model": json.RawMessage(`"Qwen/Qwen3-8B"`),
			"tp":    json.RawMessage(`2`),
			"hosts": json.RawMessage(`["spark1", "spark2"]`),
		},
		Sensitive:           map[string]json.RawMessage{"hf_token": json.RawMessage(`"` + secret + `"`)},
		StateLineage:        "5f0c2a9e-7d1b-4c43-9a6e-2b8f1d0e3c47",
		StateSerial:         3,
		ObservedFingerprint: Fingerprint(observed),
		Observed:            observed,
	}
}

// planned is what the plan of current showed.
func planned() Planned {
	return Planned{
		Targets: []string{"vllm_serve.qwen"},
		Summary: Summary{Add: 1, Change: 1},
		Changes: []Change{{"ray_cluster.main", "update"}, {"vllm_serve.qwen", "create"}},
	}
}

// fixed makes New deterministic: a fixed clock and a counting salt.
func fixed() Options {
	return Options{
		Now:  func() time.Time { return time.Date(2025, 6, 1, 14, 0, 0, 999, time.FixedZone("CEST", 2*3600)) },
		Rand: bytes.NewReader([]byte("0123456789abcdef")),
	}
}

func newFile(t *testing.T, cur Current) *File {
	t.Helper()
	f, err := New(cur, planned(), fixed())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestWriteGoldenAndRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tfplan")
	f := newFile(t, current())
	if err := Write(path, f); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "plan.json", data)

	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.CreatedAt.Location() != time.UTC || !got.CreatedAt.Equal(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("created_at = %v, want 2025-06-01T12:00:00Z", got.CreatedAt)
	}
	if err := got.Check(current()); err != nil {
		t.Errorf("Check of the read plan against its own inputs: %v", err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("read back\n%+v\nwrote\n%+v", got, f)
	}
}

func TestWriteEmptyPlanGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tfplan")
	f, err := New(Current{StateLineage: "5f0c2a9e-7d1b-4c43-9a6e-2b8f1d0e3c47"}, Planned{}, fixed())
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(path, f); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "empty.json", data)
	if _, err := Read(path); err != nil {
		t.Errorf("Read of an empty plan: %v", err)
	}
}

func TestWriteIsAtomicAndPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tfplan")
	if err := os.WriteFile(path, []byte("an older plan"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, newFile(t, current())); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 1 {
		t.Errorf("directory holds %d entries, want only the plan (temporary file left behind?)", len(des))
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		before, _ := os.ReadFile(path)
		if err := Write(path, &File{ConfigHash: "sha256:00"}); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Write into a read-only directory = %v, want an error naming %s", err, path)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Error("a failed Write changed the old plan")
		}
	}
}

func TestSensitiveValuesNeverWritten(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	f := newFile(t, current())
	if err := Write(a, f); err != nil {
		t.Fatal(err)
	}
	g, err := New(current(), planned(), Options{}) // real salt
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(b, g); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{a, b} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, leak := range []string{secret, plainSHA(secret), plainSHA(`"` + secret + `"`), plainSHA(secretVarFile), plainSHA(secret + "\n")} {
			if bytes.Contains(data, []byte(leak)) {
				t.Errorf("%s contains %q", filepath.Base(path), leak)
			}
		}
		if !bytes.Contains(data, []byte(`"hf_token": "hmac-sha256:`)) {
			t.Errorf("%s has no hash for hf_token:\n%s", filepath.Base(path), data)
		}
	}
	if f.SensitiveVariables["hf_token"] == g.SensitiveVariables["hf_token"] {
		t.Error("two plans with different salts hash the secret alike")
	}
	if _, ok := f.Variables["hf_token"]; ok {
		t.Error("the sensitive variable was copied into variables")
	}
}

// secretVarFile is a -var-file that holds only the secret: its plain hash
// is as good as the secret's own for checking a guess.
const secretVarFile = "hf_token = \"" + secret + "\"\n"

// plainSHA is the unsalted SHA-256 of s, which a plan must not contain.
func plainSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		plan    func(*Current) // changes the inputs of the plan
		apply   func(*Current) // changes the inputs at apply time
		kind    error          // nil: the plan applies
		message string
	}{
		{name: "unchanged"},
		{name: "variable reformatted", apply: func(c *Current) {
			c.Variables["hosts"] = json.RawMessage("[\n  \"spark1\",\"spark2\"\n]")
		}},
		{name: "version not checked", apply: func(c *Current) { c.RayformVersion = "" }},
		{name: "no state at plan nor apply", plan: func(c *Current) { c.StateSerial, c.StateLineage = 0, "aaaa" },
			apply: func(c *Current) { c.StateSerial, c.StateLineage = 0, "bbbb" }},
		{name: "other version", apply: func(c *Current) { c.RayformVersion = "0.2.0" }, kind: ErrVersionMismatch,
			message: "Saved plan was created by another rayform version: the given plan file was created by rayform 0.1.0, but this is rayform 0.2.0; run rayform plan again"},
		{name: "other lineage", apply: func(c *Current) { c.StateLineage = "0e1d2c3b-0000-4000-8000-000000000000" }, kind: ErrStateMismatch,
			message: "Saved plan does not match the given state: the given plan file was created from a different state lineage (5f0c2a9e-7d1b-4c43-9a6e-2b8f1d0e3c47, now 0e1d2c3b-0000-4000-8000-000000000000); run rayform plan again"},
		{name: "state removed", apply: func(c *Current) { c.StateSerial, c.StateLineage = 0, "0e1d" }, kind: ErrStateMismatch,
			message: "Saved plan does not match the given state: the given plan file was created from state lineage 5f0c2a9e-7d1b-4c43-9a6e-2b8f1d0e3c47 serial 3, but there is no saved state now; run rayform plan again"},
		{name: "lineage checked before config", apply: func(c *Current) {
			c.StateLineage = "0e1d"
			c.ConfigFiles["main.hcl"] = []byte("changed")
		}, kind: ErrStateMismatch, message: "Saved plan does not match the given state: the given plan file was created from a different state lineage (5f0c2a9e-7d1b-4c43-9a6e-2b8f1d0e3c47, now 0e1d); run rayform plan again"},
		{name: "file changed", apply: func(c *Current) { c.ConfigFiles["main.hcl"] = append(c.ConfigFiles["main.hcl"], ' ') }, kind: ErrConfigMismatch,
			message: "Saved plan does not match the configuration: main.hcl changed since the plan was created; run rayform plan again"},
		{name: "files added and removed", apply: func(c *Current) {
			c.ConfigFiles["extra.hcl"] = []byte("")
			delete(c.ConfigFiles, "vars.hcl")
		}, kind: ErrConfigMismatch,
			message: "Saved plan does not match the configuration: extra.hcl was added, vars.hcl was removed since the plan was created; run rayform plan again"},
		{name: "file renamed", apply: func(c *Current) {
			c.ConfigFiles["variables.hcl"] = c.ConfigFiles["vars.hcl"]
			delete(c.ConfigFiles, "vars.hcl")
		}, kind: ErrConfigMismatch,
			message: "Saved plan does not match the configuration: variables.hcl was added, vars.hcl was removed since the plan was created; run rayform plan again"},
		{name: "variables changed", apply: func(c *Current) {
			c.Variables["tp"] = json.RawMessage(`4`)
			c.Variables["pp"] = json.RawMessage(`1`)
			delete(c.Variables, "model")
		}, kind: ErrConfigMismatch,
			message: `Saved plan does not match the configuration: variable "model" was removed, variable "pp" was added, variable "tp" changed (was 2, now 4) since the plan was created; run rayform plan again`},
		{name: "long value clipped", apply: func(c *Current) {
			c.Variables["model"] = json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)
		}, kind: ErrConfigMismatch,
			message: `Saved plan does not match the configuration: variable "model" changed (was "Qwen/Qwen3-8B", now "` + strings.Repeat("x", 56) + `...) since the plan was created; run rayform plan again`},
		{name: "sensitive changed", apply: func(c *Current) { c.Sensitive["hf_token"] = json.RawMessage(`"hf_other"`) }, kind: ErrConfigMismatch,
			message: `Saved plan does not match the configuration: sensitive variable "hf_token" changed since the plan was created; run rayform plan again`},
		{name: "sensitive reformatted", apply: func(c *Current) { c.Sensitive["hf_token"] = json.RawMessage(` "` + secret + `" `) }},
		{name: "sensitive added and removed", apply: func(c *Current) {
			c.Sensitive["api_key"] = json.RawMessage(`"x"`)
			delete(c.Sensitive, "hf_token")
		}, kind: ErrConfigMismatch,
			message: `Saved plan does not match the configuration: sensitive variable "api_key" was added, sensitive variable "hf_token" was removed since the plan was created; run rayform plan again`},
		{name: "became sensitive", apply: func(c *Current) {
			c.Sensitive["model"] = c.Variables["model"]
			delete(c.Variables, "model")
		}, kind: ErrConfigMismatch,
			message: `Saved plan does not match the configuration: variable "model" became sensitive since the plan was created; run rayform plan again`},
		{name: "no longer sensitive", apply: func(c *Current) {
			c.Variables["hf_token"] = c.Sensitive["hf_token"]
			delete(c.Sensitive, "hf_token")
		}, kind: ErrConfigMismatch,
			message: `Saved plan does not match the configuration: variable "hf_token" is no longer sensitive since the plan was created; run rayform plan again`},
		{name: "state serial moved", apply: func(c *Current) { c.StateSerial = 4 }, kind: ErrStalePlan,
			message: "Saved plan is stale: the given plan file can no longer be applied because the state was changed by another operation after the plan was created (state serial 3, now 4); run rayform plan again"},
		{name: "state saved since a plan without state", plan: func(c *Current) { c.StateSerial, c.StateLineage = 0, "aaaa" },
			apply: func(c *Current) { c.StateSerial, c.StateLineage = 1, "bbbb" }, kind: ErrStalePlan,
			message: "Saved plan is stale: the given plan file can no longer be applied because the state was changed by another operation after the plan was created (state serial 0, now 1); run rayform plan again"},
		{name: "host changed", apply: func(c *Current) {
			c.Observed = map[string]string{"spark1": "sha256:aa", "spark2": "sha256:cc", "spark3": "sha256:dd"}
			c.ObservedFingerprint = Fingerprint(c.Observed)
		}, kind: ErrStalePlan,
			message: "Saved plan is stale: the given plan file can no longer be applied because the hosts changed since the plan was created (spark2 changed, spark3 was added); run rayform plan again"},
		{name: "opaque fingerprint changed", apply: func(c *Current) { c.Observed, c.ObservedFingerprint = nil, "sha256:other" }, kind: ErrStalePlan,
			message: "Saved plan is stale: the given plan file can no longer be applied because the hosts changed since the plan was created (the observed facts differ); run rayform plan again"},
		{name: "serial checked before hosts", apply: func(c *Current) { c.StateSerial, c.ObservedFingerprint = 5, "sha256:other" }, kind: ErrStalePlan,
			message: "Saved plan is stale: the given plan file can no longer be applied because the state was changed by another operation after the plan was created (state serial 3, now 5); run rayform plan again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := current()
			if tt.plan != nil {
				tt.plan(&at)
			}
			f := newFile(t, at)
			// Round trip through the file, as rayform apply FILE does.
			path := filepath.Join(t.TempDir(), "tfplan")
			if err := Write(path, f); err != nil {
				t.Fatal(err)
			}
			f, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			now := current()
			if tt.plan != nil {
				tt.plan(&now)
			}
			if tt.apply != nil {
				tt.apply(&now)
			}
			err = f.Check(now)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var ce *CheckError
			if !errors.Is(err, tt.kind) || !errors.As(err, &ce) {
				t.Fatalf("Check = %v, want a *CheckError of kind %v", err, tt.kind)
			}
			if err.Error() != tt.message {
				t.Errorf("message\n got: %s\nwant: %s", err, tt.message)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("message reveals the secret: %s", err)
			}
		})
	}
}

func TestCheckChanges(t *testing.T) {
	tests := []struct {
		name    string
		changes []Change
		message string // "" for no error
	}{
		{"same", []Change{{"ray_cluster.main", "update"}, {"vllm_serve.qwen", "create"}}, ""},
		{"same, other order", []Change{{"vllm_serve.qwen", "create"}, {"ray_cluster.main", "update"}}, ""},
		{"action changed", []Change{{"ray_cluster.main", "replace"}, {"vllm_serve.qwen", "create"}},
			"Saved plan is stale: the given plan file can no longer be applied because the plan computed now differs from the saved one (ray_cluster.main: saved update, now replace); run rayform plan again"},
		{"added and dropped", []Change{{"node_net.fabric", "create"}, {"vllm_serve.qwen", "create"}},
			"Saved plan is stale: the given plan file can no longer be applied because the plan computed now differs from the saved one (node_net.fabric: create was not in the saved plan; ray_cluster.main: saved update is no longer needed); run rayform plan again"},
	}
	f := newFile(t, current())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.CheckChanges(tt.changes)
			if tt.message == "" {
				if err != nil {
					t.Fatalf("CheckChanges = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrStalePlan) || err.Error() != tt.message {
				t.Errorf("CheckChanges\n got: %v\nwant: %s", err, tt.message)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		file string
		want string // after "reading plan: testdata/planfile/<file>"
	}{
		{"format2.json", " has plan format version 2.0, but this rayform reads format 1; run rayform plan again with this version"},
		{"not-a-plan.json", " is not a rayform plan file (no format_version)"},
		{"syntax.json", `:5:33: invalid character '"' after object key:value pair`},
		{"truncated.json", ":4:26: invalid character '\\n' in string literal"},
		{"unknown-field.json", `: json: unknown field "provider_lock_hash"`},
		{"no-salt.json", ": no valid sensitive_salt"},
		{"missing.json", ": no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(testdata, tt.file)
			f, err := Read(path)
			if err == nil {
				t.Fatalf("Read succeeded: %+v", f)
			}
			if !strings.HasPrefix(err.Error(), "reading plan: ") || !strings.Contains(err.Error(), path) || !strings.HasSuffix(err.Error(), tt.want) {
				t.Errorf("error\n got: %v\nwant: reading plan: …%s…%s", err, path, tt.want)
			}
		})
	}
}

func TestHashes(t *testing.T) {
	salt := []byte("0123456789abcdef")
	a := map[string][]byte{"a.hcl": []byte("x"), "b.hcl": []byte("y")}
	tests := []struct {
		name  string
		files map[string][]byte
		same  bool
	}{
		{"same content, new map", map[string][]byte{"b.hcl": []byte("y"), "a.hcl": []byte("x")}, true},
		{"content moved between files", map[string][]byte{"a.hcl": []byte("xy"), "b.hcl": []byte("")}, false},
		{"name and content boundary", map[string][]byte{"a.hclx": nil, "b.hcl": []byte("y")}, false},
		{"renamed", map[string][]byte{"a.hcl": []byte("x"), "c.hcl": []byte("y")}, false},
		{"file added", map[string][]byte{"a.hcl": []byte("x"), "b.hcl": []byte("y"), "c.hcl": nil}, false},
	}
	for _, tt := range tests {
		if got := ConfigHash(salt, tt.files) == ConfigHash(salt, a); got != tt.same {
			t.Errorf("%s: equal hashes = %v, want %v", tt.name, got, tt.same)
		}
	}
	if h := ConfigHash(salt, a); !strings.HasPrefix(h, "hmac-sha256:") || len(h) != len("hmac-sha256:")+64 {
		t.Errorf("ConfigHash = %q", h)
	}
	if ConfigHash(salt, a) == ConfigHash([]byte("another salt"), a) {
		t.Error("ConfigHash does not depend on the salt")
	}
	if Fingerprint(map[string]string{"a": "bc"}) == Fingerprint(map[string]string{"ab": "c"}) {
		t.Error("Fingerprint confuses part names with values")
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		cur  Current
		opts Options
		want string
	}{
		{"variable not JSON", Current{Variables: map[string]json.RawMessage{"tp": json.RawMessage("two")}}, fixed(), `variable "tp": value is not JSON`},
		{"sensitive not JSON", Current{Sensitive: map[string]json.RawMessage{"hf_token": json.RawMessage(secret)}}, fixed(), `sensitive variable "hf_token": value is not JSON`},
		{"no randomness", Current{Sensitive: map[string]json.RawMessage{"hf_token": json.RawMessage(`"x"`)}}, Options{Rand: bytes.NewReader(nil)}, "generating the plan's salt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cur, Planned{}, tt.opts)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("New = %v, want prefix %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("error reveals the secret: %v", err)
			}
		})
	}
}
