package command

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The -update flag rewrites golden files; fmt_test.go may register it too.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func configGoldenUpdate() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// repoPath is a path relative to the repository root, made absolute (from
// this file's location, so it works whatever the working directory).
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", rel)
}

type runResult struct {
	code           int
	stdout, stderr string
}

// runIn runs realMain in dir (restoring the working directory afterwards).
func runIn(t *testing.T, dir string, args ...string) runResult {
	t.Helper()
	t.Chdir(dir)
	var out, errb bytes.Buffer
	code := realMain(append([]string{"-no-color"}, args...), strings.NewReader(""), &out, &errb)
	return runResult{code, out.String(), errb.String()}
}

func TestValidateCommand(t *testing.T) {
	t.Setenv("RAYFORM_VAR_gpus", "")
	os.Unsetenv("RAYFORM_VAR_gpus") // restored by t.Setenv's cleanup
	tests := []struct {
		name       string
		dir        string
		args       []string
		wantCode   int
		wantStdout string // substring
		wantStderr string // substring
	}{
		{"dgx spark pair", "examples/dgx-spark-pair", nil, 0, "Success! The configuration is valid.\n", ""},
		{"h100 pipeline", "examples/h100-4x8-pp", nil, 0, "Success! The configuration is valid.\n", ""},
		{"single node with -var", "examples/single-node", []string{"-var", "host=10.0.0.5", "-var=gpus=4"}, 0, "Success!", ""},
		// Like Terraform's validate, without values: unknown, so CI can
		// validate without the secrets.
		{"required variables without values", "testdata/config/cli/secrets-required", nil, 0, "Success! The configuration is valid.\n", ""},
		{"required variables, validation rule via -var", "testdata/config/cli/secrets-required", []string{"-var", "gpus=0"}, 1, "", "gpus must be positive"},
		{"single node, -no-color after the command", "examples/single-node", []string{"-no-color"}, 0, "Success!", ""},
		{"variable validation via -var", "examples/single-node", []string{"-var", "gpus=0"}, 1, "", "Error: Invalid value for variable"},
		{"undeclared -var", "examples/single-node", []string{"-var", "hots=x"}, 1, "", "Error: Value for undeclared variable"},
		{"missing var file", "examples/single-node", []string{"-var-file", "nope.rfvars"}, 1, "", "Failed to read variables file"},
		{"not enough gpus", "testdata/config/invalid/not-enough-gpus", nil, 1, "", "on main.hcl line 25, in vllm_serve \"qwen\":"},
		{"misspelled block", "testdata/config/invalid/misspelled-block-type", nil, 1, "", `Did you mean "ray_cluster"?`},
		{"no configuration", "testdata/config", nil, 1, "", "No configuration files"},
		{"stray argument", "examples/dgx-spark-pair", []string{"main.hcl"}, 1, "", "validate takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runIn(t, repoPath(t, tt.dir), append([]string{"validate"}, tt.args...)...)
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tt.wantStdout) {
				t.Errorf("stdout does not contain %q:\n%s", tt.wantStdout, r.stdout)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr does not contain %q:\n%s", tt.wantStderr, r.stderr)
			}
			if tt.wantCode == 0 && r.stderr != "" {
				t.Errorf("unexpected stderr:\n%s", r.stderr)
			}
			if tt.wantCode != 0 && strings.Contains(r.stdout, "Success") {
				t.Errorf("failure printed success:\n%s", r.stdout)
			}
		})
	}
}

func TestValidateChdir(t *testing.T) {
	t.Chdir(repoPath(t, "."))
	var out, errb bytes.Buffer
	code := realMain([]string{"-chdir=examples/dgx-spark-pair", "validate"}, strings.NewReader(""), &out, &errb)
	if code != 0 || out.String() != "Success! The configuration is valid.\n" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
}

func TestValidateEnvVariable(t *testing.T) {
	t.Setenv("RAYFORM_VAR_gpus", "0")
	r := runIn(t, repoPath(t, "examples/single-node"), "validate")
	if r.code != 1 || !strings.Contains(r.stderr, "gpus must be a whole number of at least 1.") {
		t.Errorf("RAYFORM_VAR_gpus=0 must fail the validation rule; exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	r = runIn(t, repoPath(t, "examples/single-node"), "validate", "-var", "gpus=2")
	if r.code != 0 {
		t.Errorf("-var must override RAYFORM_VAR_gpus; exit %d\nstderr:\n%s", r.code, r.stderr)
	}
}

// TestValidateJSON checks the shape of validate -json and pins one invalid
// case's document.
func TestValidateJSON(t *testing.T) {
	tests := []struct {
		dir                string
		wantCode           int
		valid              bool
		errors, warnings   int
		golden             string
		wantFirstSummaries string
	}{
		{dir: "examples/dgx-spark-pair", wantCode: 0, valid: true},
		{dir: "testdata/config/invalid/head-and-worker", wantCode: 1, errors: 1, golden: "testdata/config/cli/validate-head-and-worker.json"},
		{dir: "testdata/config/invalid/syntax-error", wantCode: 1, errors: 3},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			golden := repoPath(t, tt.golden)
			r := runIn(t, repoPath(t, tt.dir), "validate", "-json")
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			var doc struct {
				FormatVersion string `json:"format_version"`
				Valid         *bool  `json:"valid"`
				ErrorCount    *int   `json:"error_count"`
				WarningCount  *int   `json:"warning_count"`
				Diagnostics   []struct {
					Severity, Summary, Detail string
					Range                     *struct {
						Filename   string
						Start, End struct{ Line, Column, Byte int }
					}
				}
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
			}
			if doc.FormatVersion != "1.0" || doc.Valid == nil || *doc.Valid != tt.valid || doc.ErrorCount == nil || *doc.ErrorCount != tt.errors || doc.WarningCount == nil || *doc.WarningCount != tt.warnings {
				t.Errorf("wrong document header:\n%s", r.stdout)
			}
			if len(doc.Diagnostics) != tt.errors+tt.warnings {
				t.Errorf("%d diagnostics, want %d", len(doc.Diagnostics), tt.errors+tt.warnings)
			}
			for _, d := range doc.Diagnostics {
				if d.Severity != "error" || d.Summary == "" || d.Detail == "" || d.Range == nil || d.Range.Filename != "main.hcl" || d.Range.Start.Line == 0 {
					t.Errorf("incomplete diagnostic: %+v", d)
				}
			}
			if tt.golden == "" {
				return
			}
			path := golden
			if configGoldenUpdate() {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(r.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if r.stdout != string(want) {
				t.Errorf("validate -json differs from %s\ngot:\n%s\nwant:\n%s", tt.golden, r.stdout, want)
			}
		})
	}
}
