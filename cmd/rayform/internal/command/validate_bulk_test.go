package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateBulkSecrets: a ray_cluster's sensitive env reaches its
// container through a tmpfs of 1 MiB (cluster.SecretsMax): validate (and
// so plan) refuses secret env its file there cannot hold, and takes env
// that fills it exactly. Issue 38 item 6: secret env between 1 MiB and
// ARG_MAX passed plan, then apply removed both containers and failed on
// the tmpfs. No diagnostic quotes a bulk value, in text or -json: the
// source line of an inline 2.4 MB value was printed whole.
func TestValidateBulkSecrets(t *testing.T) {
	src, err := os.ReadFile(repoPath(t, "examples/single-node/main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	// secrets declares nine sensitive variables of sizes, as env S0..S8;
	// HF_TOKEN (sensitive, "") takes its line "HF_TOKEN=\n" too.
	secrets := func(sizes ...int) string {
		s := string(src)
		var env, vars strings.Builder
		for i, n := range sizes {
			name := "S" + string(rune('0'+i))
			env.WriteString("    " + name + " = var.s" + string(rune('0'+i)) + "\n")
			vars.WriteString("variable \"s" + string(rune('0'+i)) + "\" {\n  type = string\n  sensitive = true\n  default = \"" + strings.Repeat("v", n) + "\"\n}\n")
		}
		s = strings.Replace(s, "    HF_TOKEN = var.hf_token\n", "    HF_TOKEN = var.hf_token\n"+env.String(), 1)
		return s + vars.String()
	}
	// What fills the tmpfs exactly: 1 MiB less HF_TOKEN's line and the
	// nine "Sn=" and newlines.
	exact := make([]int, 9)
	rest := 1<<20 - len("HF_TOKEN=\n") - 9*len("S0=\n")
	for i := range exact {
		exact[i] = rest / 9
	}
	exact[8] += rest % 9
	over := append([]int(nil), exact...)
	over[0]++
	tests := []struct {
		name   string
		config string
		code   int
		want   string
	}{
		{"secret env that fills the tmpfs", secrets(exact...), 0, "Success!"},
		{"one byte more", secrets(over...), 1, "1048577 bytes"},
		{"2.4 MB of secrets", secrets(120000, 120000, 120000, 120000, 120000, 120000, 120000, 120000, 120000), 1, "holds 1048576"},
		{"an inline value of 2.4 MB", strings.Replace(string(src), "    HF_TOKEN = var.hf_token\n", "    HF_TOKEN = \""+strings.Repeat("v", 2400000)+"\"\n", 1), 1, "Value too long for a command line"},
	}
	for _, tt := range tests {
		for _, args := range [][]string{{"validate"}, {"validate", "-json"}} {
			t.Run(tt.name+" "+strings.Join(args, " "), func(t *testing.T) {
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(tt.config), 0o644); err != nil {
					t.Fatal(err)
				}
				r := runIn(t, dir, args...)
				want := tt.want
				if tt.code == 0 && len(args) > 1 {
					want = `"valid": true`
				}
				if r.code != tt.code || !strings.Contains(r.stdout+r.stderr, want) {
					t.Errorf("exit %d, want %d with %q\n%.2000s\n%.2000s", r.code, tt.code, want, r.stdout, r.stderr)
				}
				if n := len(r.stdout) + len(r.stderr); n > 8<<10 || strings.Contains(r.stdout+r.stderr, strings.Repeat("v", 1000)) {
					t.Errorf("validate printed %d bytes, quoting the values", n)
				}
			})
		}
	}
}
