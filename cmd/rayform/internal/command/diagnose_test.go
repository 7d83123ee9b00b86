package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/resources/diagnose"
)

// TestDiagnoseCommand runs `rayform diagnose` on the real-log fixtures of
// testdata/diagnose, as files, several files and stdin, as text and -json,
// and compares stdout with testdata/diagnose/cli/<name>.golden (-update
// rewrites them).
func TestDiagnoseCommand(t *testing.T) {
	fixture := func(name string) string { return repoPath(t, filepath.Join("testdata/diagnose", name+".log")) }
	tests := []struct {
		name  string
		args  []string // fixture names, "-" for stdin; flags start with "-"+letter
		stdin string   // fixture name piped on stdin
		code  int
		want  []string // substrings of stdout
	}{
		{name: "file", args: []string{"nccl-interface"}, code: ExitCause,
			want: []string{"Cause: NCCL_SOCKET_IFNAME=eth9 matches no interface", "Bootstrap : no socket interface found"}},
		{name: "several-files", args: []string{"engine-core-failed", "free-memory"}, code: ExitCause,
			want: []string{"Cause: vLLM wants 45.01 GiB free", "also in the logs (consequences): engine-core-failed"}},
		{name: "stdin", stdin: "ray-oom-task", code: ExitCause,
			want: []string{"27.71 GB / 28.80 GB", "evidence (stdin"}},
		{name: "stdin-dash", args: []string{"-"}, stdin: "gloo-interface", code: ExitCause,
			want: []string{"GLOO_SOCKET_IFNAME=eth9"}},
		{name: "unknown", args: []string{"unknown"}, code: ExitOK,
			want: []string{"Cause: no known failure pattern", "destroy_process_group() was not called"}},
		{name: "json", args: []string{"-json", "free-memory"}, code: ExitCause},
		{name: "json-unknown", args: []string{"unknown", "-json"}, code: ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"-no-color", "diagnose"}
			var shown []string
			for _, a := range tt.args {
				switch {
				case a == "-" || strings.HasPrefix(a, "-j"):
					args = append(args, a)
				default:
					args = append(args, fixture(a))
					shown = append(shown, a)
				}
			}
			stdin := ""
			if tt.stdin != "" {
				stdin = readFile(t, fixture(tt.stdin))
			}
			r := runRayform(t, stdin, args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
			if r.stderr != "" {
				t.Errorf("stderr: %s", r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			out := r.stdout
			// The goldens hold paths relative to the repository.
			out = strings.ReplaceAll(out, repoPath(t, "testdata/diagnose")+"/", "testdata/diagnose/")
			if strings.Contains(tt.name, "json") {
				var v diagnose.Report
				if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
					t.Fatalf("not one JSON object: %v\n%s", err, r.stdout)
				}
				if v.Failure != (tt.code == ExitCause) || v.Evidence == nil || v.Also == nil || len(v.Inputs) != len(shown) {
					t.Errorf("json = %+v", v)
				}
			}
			checkGolden(t, repoPath(t, "testdata/diagnose/cli/"+tt.name+".golden"), []byte(out))
		})
	}
}

// TestDiagnoseErrors: an unreadable input is exit 1 with the path on
// stderr and nothing on stdout.
func TestDiagnoseErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.log")
	r := runRayform(t, "", "diagnose", missing)
	if r.code != ExitError || r.stdout != "" || !strings.Contains(r.stderr, "read "+missing) {
		t.Errorf("missing file: %+v", r)
	}
	r = runRayform(t, "x\n", "diagnose", "-", "-")
	if r.code != ExitError || !strings.Contains(r.stderr, "more than once") {
		t.Errorf("stdin twice: %+v", r)
	}
	r = runRayform(t, "", "diagnose", "-bogus")
	if r.code != ExitError {
		t.Errorf("unknown flag: %+v", r)
	}
}

// TestDiagnoseMasksSecretsAndControls: a log carrying a Hugging Face token,
// an Authorization header and terminal control sequences prints none of
// them, as text or JSON.
func TestDiagnoseMasksSecretsAndControls(t *testing.T) {
	const tok = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm0123456789"
	log := "\x1b]0;pwned\x07+ docker run -e HF_TOKEN=" + tok + " vllm/vllm-openai:v0.17.1\n" +
		"curl -H 'Authorization: Bearer " + tok + "' https://huggingface.co/api/whoami-v2\n" +
		"\x1b[31mengine exited\x1b[0m\x08\x07 with token " + tok + "\n"
	path := filepath.Join(t.TempDir(), "serve.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"diagnose", path}, {"diagnose", "-json", path}} {
		r := runRayform(t, "", args...)
		if r.code != ExitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "QwErTy") || strings.ContainsAny(r.stdout, "\x1b\x07\x08") || strings.Contains(r.stdout, "pwned") {
			t.Errorf("%v leaks a secret or a control sequence:\n%q", args, r.stdout)
		}
		if !strings.Contains(r.stdout, "HF_TOKEN=<redacted>") || !strings.Contains(r.stdout, "Bearer <redacted>") {
			t.Errorf("%v: masked lines missing:\n%s", args, r.stdout)
		}
	}
}

// TestDiagnoseTextAndJSONAgree: the text and the -json rendering of one
// diagnosis say the same thing (issue #33 item 6: -json said known: true,
// cause engine-core-failed, where the text said "no known root cause"),
// and the exit code follows the same judgment.
func TestDiagnoseTextAndJSONAgree(t *testing.T) {
	for _, name := range []string{"engine-core-failed", "unknown", "free-memory", "nccl-interface", "serve-killed", "ray-oom", "unknown-frames-only", "healthy-startup"} {
		t.Run(name, func(t *testing.T) {
			path := repoPath(t, filepath.Join("testdata/diagnose", name+".log"))
			if _, err := os.Stat(path); err != nil {
				t.Skip(err)
			}
			text := runRayform(t, "", "-no-color", "diagnose", path)
			js := runRayform(t, "", "-no-color", "diagnose", "-json", path)
			var v map[string]any
			if err := json.Unmarshal([]byte(js.stdout), &v); err != nil {
				t.Fatalf("json: %v\n%s", err, js.stdout)
			}
			first, _, _ := strings.Cut(text.stdout, "\n")
			title, _ := v["title"].(string)
			if first != "Cause: "+title {
				t.Errorf("text's first line %q, json title %q", first, title)
			}
			known, _ := v["known"].(bool)
			if saysUnknown := strings.Contains(text.stdout, "no known"); known == saysUnknown {
				t.Errorf("json known = %v, text says %q", known, first)
			}
			if text.code != js.code {
				t.Errorf("exit codes differ: text %d, json %d", text.code, js.code)
			}
			if failure, ok := v["failure"].(bool); ok && failure != (js.code == ExitCause) {
				t.Errorf("json failure = %v, exit %d", failure, js.code)
			}
		})
	}
}
