package model

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
)

func load(t *testing.T, src string, env ...string) (*config.Config, string) {
	t.Helper()
	cfg, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src)},
		config.Options{BaseDir: ".", Kinds: []config.Kind{Descriptor()}, Env: env})
	if !diags.HasErrors() {
		return cfg, ""
	}
	return cfg, diags.Error()
}

// TestDecode: the generic decoder fills the Go value from the schema's
// tags, with the defaults, and the token from a sensitive variable stays
// marked sensitive.
func TestDecode(t *testing.T) {
	cfg, errs := load(t, `
variable "hf_token" {
  type      = string
  sensitive = true
}
model "qwen" {
  source = "Qwen/Qwen3-0.6B"
  token  = var.hf_token
}
model "pinned" {
  source    = "org/tiny"
  revision  = "0123456789abcdef0123456789abcdef01234567"
  cache_dir = "/data/hf/hub"
  endpoint  = "http://10.1.230.1:5080"
}
output "src" { value = model.qwen.source }
`, "RAYFORM_VAR_hf_token=hf_secretvalue")
	if errs != "" {
		t.Fatal(errs)
	}
	q := cfg.Blocks(Type)["qwen"].(*Model)
	if q.Name != "qwen" || q.Source != "Qwen/Qwen3-0.6B" || q.Rev != "main" || q.CacheDir != DefaultCacheDir ||
		q.Endpoint != DefaultEndpoint || q.Token != "hf_secretvalue" {
		t.Errorf("qwen: %+v", q)
	}
	if !q.IsSensitive("token") {
		t.Error("the token is not marked sensitive")
	}
	if got := q.Dir(); got != DefaultCacheDir+"/models--Qwen--Qwen3-0.6B" {
		t.Errorf("dir %q", got)
	}
	p := cfg.Blocks(Type)["pinned"].(*Model)
	if p.Rev != "0123456789abcdef0123456789abcdef01234567" || p.CacheDir != "/data/hf/hub" || p.Endpoint != "http://10.1.230.1:5080" {
		t.Errorf("pinned: %+v", p)
	}
	if got := cfg.Outputs["src"].Value.AsString(); got != "Qwen/Qwen3-0.6B" {
		t.Errorf("model.qwen.source = %q", got)
	}
}

// TestCheck: each argument's check, at the argument's line, and the token
// never quoted back.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"no source", ``, `The argument "source" is required`},
		{"not ORG/NAME", `source = "just-a-name"`, `main.hcl:3,10-23: Invalid model source; source is "just-a-name"; want a hub repository id ORG/NAME`},
		{"double dash", `source = "a--b/c"`, `Invalid model source`},
		{"revision with a space", "source = \"org/m\"\nrevision = \"v 1\"", `main.hcl:4,12-17: Invalid revision; revision is "v 1"`},
		{"relative cache", "source = \"org/m\"\ncache_dir = \"hf/hub\"", `main.hcl:4,13-21: Invalid cache directory; cache_dir is "hf/hub"`},
		{"unclean cache", "source = \"org/m\"\ncache_dir = \"/data//hf\"", `Invalid cache directory`},
		{"endpoint without scheme", "source = \"org/m\"\nendpoint = \"huggingface.co\"", `Invalid hub endpoint; endpoint is "huggingface.co"`},
		{"token with a newline", "source = \"org/m\"\ntoken = \"hf_abc\\nX=1\"", `Invalid hub token; token contains whitespace or a NUL byte`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := load(t, "\nmodel \"m\" {\n"+tc.body+"\n}\n")
			if !strings.Contains(errs, tc.want) {
				t.Errorf("errors %q, want %q", errs, tc.want)
			}
			if strings.Contains(errs, "hf_abc") {
				t.Errorf("the token is quoted back: %s", errs)
			}
		})
	}
}
