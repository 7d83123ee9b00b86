package configtest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
)

// marksPrelude declares the sensitive inputs the expressions of
// TestSensitivityFollowsExpressions derive from, and plain values to mix
// them with.
const marksPrelude = `
variable "token" {
  default   = "s3cret-token"
  sensitive = true
}
variable "n" {
  default   = 7
  sensitive = true
}
variable "tokens" {
  default   = ["s3cret-a", "s3cret-b"]
  sensitive = true
}
variable "cidr" {
  default   = "10.1.0.0/16"
  sensitive = true
}
variable "json" {
  default   = "{\"k\": \"s3cret-json\"}"
  sensitive = true
}
variable "flag" {
  default   = true
  sensitive = true
}
variable "plain" {
  default = "plain"
}
locals {
  m    = { a = var.token, b = "plain" }
  l    = ["plain", var.token]
  word = "w-${var.token}"
}
`

// TestSensitivityFollowsExpressions shows that a value derived from a
// sensitive variable stays sensitive through every kind of expression:
// templates, each function of the library, conditionals, for
// expressions, collections, indexing, local values.
func TestSensitivityFollowsExpressions(t *testing.T) {
	cases := []struct{ name, expr string }{
		// templates and operators
		{"template", `"s${var.token}"`},
		{"heredoc", "<<EOT\nkey=${var.token}\nEOT"},
		{"template directive", `"%{if var.flag}on%{else}off%{endif}"`},
		{"template for", `"%{for t in var.tokens}${t},%{endfor}"`},
		{"arithmetic", `var.n + 1`},
		{"comparison", `var.token == "x"`},
		{"logic", `var.flag && true`},
		{"negation", `!var.flag`},
		{"parentheses", `(var.token)`},
		// conditionals
		{"conditional result", `true ? var.token : "x"`},
		{"conditional condition", `var.flag ? "a" : "b"`},
		{"conditional on derived", `var.token == "" ? "a" : "b"`},
		// for expressions
		{"for over sensitive list", `[for t in var.tokens : "x-${t}"]`},
		{"for over mixed list", `[for s in local.l : upper(s)]`},
		{"for map", `{for k, v in local.m : k => v}`},
		{"for filter", `[for s in ["a", "b"] : s if var.flag]`},
		{"for key", `{for s in ["a"] : s => var.token}`},
		// collections, indexing, splat
		{"tuple", `["a", var.token]`},
		{"object", `{ a = var.token }`},
		{"object key", `{ (var.token) = 1 }`},
		{"index", `var.tokens[0]`},
		{"index by sensitive key", `local.m[var.plain == "plain" ? "a" : "b"]`},
		{"index of local", `local.l[1]`},
		{"attribute of local", `local.m.a`},
		{"splat", `[{ v = var.token }][*].v`},
		// local values
		{"local", `local.word`},
		{"local in template", `"${local.word}-x"`},
		// functions: strings
		{"format", `format("%s-x", var.token)`},
		{"format width", `format("%10s", var.token)`},
		{"formatlist", `formatlist("%s-x", var.tokens)`},
		{"formatlist mixed", `formatlist("%s-x", local.l)`},
		{"join", `join(",", ["a", var.token])`},
		{"join sensitive list", `join(",", var.tokens)`},
		{"join sensitive separator", `join(var.token, ["a", "b"])`},
		{"split", `split("-", var.token)`},
		{"lower", `lower(var.token)`},
		{"upper", `upper(var.token)`},
		{"replace", `replace(var.token, "s", "z")`},
		{"trimspace", `trimspace(var.token)`},
		{"trimprefix", `trimprefix(var.token, "s")`},
		{"trimsuffix", `trimsuffix(var.token, "n")`},
		{"substr", `substr(var.token, 0, 3)`},
		// functions: collections
		{"concat", `concat(["a"], [var.token])`},
		{"concat sensitive list", `concat(["a"], var.tokens)`},
		{"merge", `merge({ b = "x" }, local.m)`},
		{"merge sensitive map", `merge({ b = "x" }, { a = var.token })`},
		{"lookup", `lookup(local.m, "a", "d")`},
		{"lookup default", `lookup({}, "a", var.token)`},
		{"lookup sensitive key", `lookup({ a = "x" }, var.token, "d")`},
		{"length", `length(var.token)`},
		{"length of list", `length(var.tokens)`},
		{"keys", `keys({ (var.token) = 1 })`},
		{"values", `values(local.m)`},
		{"contains", `contains(var.tokens, "x")`},
		{"element", `element(local.l, 1)`},
		{"element of sensitive list", `element(var.tokens, 0)`},
		{"flatten", `flatten([["a"], [var.token]])`},
		{"distinct", `distinct(local.l)`},
		{"range", `range(var.n)`},
		{"zipmap", `zipmap(["a"], [var.token])`},
		{"zipmap sensitive keys", `zipmap(var.tokens, ["a", "b"])`},
		{"coalesce", `coalesce(null, var.token)`},
		{"coalesce skipping a sensitive null", `coalesce(var.flag ? null : "x", "plain")`},
		{"sort", `sort(local.l)`},
		// functions: numbers
		{"min", `min(var.n, 100)`},
		{"max", `max(var.n, 1)`},
		{"abs", `abs(var.n)`},
		{"ceil", `ceil(var.n)`},
		{"floor", `floor(var.n)`},
		// functions: conversion
		{"tostring", `tostring(var.n)`},
		{"tonumber", `tonumber(var.n)`},
		{"tobool", `tobool(var.flag)`},
		{"tolist", `tolist(local.l)`},
		{"toset", `toset(local.l)`},
		{"tomap", `tomap(local.m)`},
		// functions: encoding, files, networks, errors
		{"jsonencode", `jsonencode({ a = var.token })`},
		{"jsonencode list", `jsonencode(local.l)`},
		{"jsondecode", `jsondecode(var.json)`},
		{"jsondecode attribute", `jsondecode(var.json).k`},
		{"cidrhost", `cidrhost(var.cidr, 1)`},
		{"cidrhost number", `cidrhost("10.0.0.0/8", var.n)`},
		{"try", `try(var.token, "x")`},
		{"try fallback", `try(var.tokens[5], var.token)`},
		{"try inside", `try(upper(var.token), "x")`},
		{"can", `can(var.tokens[5])`},
		{"can of a sensitive index", `can(local.m[var.token])`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := marksPrelude + "locals {\n  v = " + c.expr + "\n}\n" +
				"output \"o\" {\n  value = local.v\n}\n"
			cfg, diags := loadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{})
			text := renderDiags(t, cfg, diags)
			if strings.Contains(text, "s3cret") {
				t.Fatalf("a sensitive value reached a diagnostic:\n%s", text)
			}
			l := cfg.Locals["v"]
			if l == nil {
				t.Fatalf("local.v was not evaluated:\n%s", text)
			}
			if !l.Sensitive {
				t.Errorf("local.v = %s lost the sensitive mark (value %#v)", c.expr, l.Value)
			}
			// The output that shows it must say it is sensitive.
			if !strings.Contains(text, "Output refers to sensitive values") {
				t.Errorf("output of %s without sensitive = true: want \"Output refers to sensitive values\", got:\n%s", c.expr, text)
			}
		})
	}
}

// TestSensitivityStaysPrecise shows that the marks are not spread to
// values that do not derive from a sensitive one: a plain element next
// to a sensitive one, or try/can on plain references, stay plain, so a
// configuration can still show them.
func TestSensitivityStaysPrecise(t *testing.T) {
	cases := []struct{ name, expr string }{
		{"plain template", `"p-${var.plain}"`},
		{"plain element of a mixed list", `local.l[0]`},
		{"plain attribute of a mixed object", `local.m.b`},
		{"try on a plain attribute", `try(local.m.b, "x")`},
		{"can on a plain attribute", `can(local.m.b)`},
		{"coalesce of plain values", `coalesce("", "plain")`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := marksPrelude + "locals {\n  v = " + c.expr + "\n}\n" +
				"output \"o\" {\n  value = local.v\n}\n"
			cfg, diags := loadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{})
			if diags.HasErrors() {
				t.Fatalf("diagnostics:\n%s", renderDiags(t, cfg, diags))
			}
			if cfg.Locals["v"].Sensitive {
				t.Errorf("local.v = %s is marked sensitive, but derives from no sensitive value", c.expr)
			}
		})
	}
}

// TestSensitiveRefusedWithoutValues shows that validate, which runs
// without variable values (Options.UnknownVariables), refuses a value
// derived from a sensitive variable in an argument that must not hold
// one, as plan does with the value: sensitivity does not depend on the
// value being known.
func TestSensitiveRefusedWithoutValues(t *testing.T) {
	src := `
variable "hf_token" {
  sensitive = true
}
node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}
ray_cluster "main" {
  image       = "img"
  head        = node.spark1
  docker_args = ["--label", "tok=${var.hf_token}"]
  volumes     = ["/data/${upper(var.hf_token)}:/cache"]
  env         = { HF_TOKEN = var.hf_token }
}
`
	for _, unknown := range []bool{true, false} {
		opts := config.Options{UnknownVariables: unknown}
		if !unknown {
			opts.Args = []config.VarArg{{Value: "hf_token=hf_sEcReT"}}
		}
		cfg, diags := loadFiles(map[string][]byte{"main.hcl": []byte(src)}, opts)
		text := renderDiags(t, cfg, diags)
		for _, want := range []string{
			"Sensitive value in docker_args", "on main.hcl line 12", "docker_args[1] is derived",
			"Sensitive value in volumes", "on main.hcl line 13", "volumes[0] is derived",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("UnknownVariables=%v: want %q in:\n%s", unknown, want, text)
			}
		}
		if strings.Contains(text, "env") && strings.Contains(text, "Sensitive value in env") {
			t.Errorf("env takes sensitive values, but was refused:\n%s", text)
		}
		if strings.Contains(text, "sEcReT") {
			t.Errorf("the value reached a diagnostic:\n%s", text)
		}
	}
}

// TestSensitiveRefusedGoldenNamesNoValue checks the golden cases of
// refused sensitive values (testdata/config/invalid/sensitive-derived-*):
// each error names its argument and path, none prints the value, and
// env and api_key, which take sensitive values, are not refused.
func TestSensitiveRefusedGoldenNamesNoValue(t *testing.T) {
	for dir, args := range map[string][]string{
		"sensitive-derived-cluster": {"image", "port", "volumes", "docker_args", "container_name"},
		"sensitive-derived-serve":   {"model", "served_model_name", "tensor_parallel_size", "max_model_len", "extra_args"},
	} {
		cfg, diags := load(filepath.Join(repoRoot, "testdata/config/invalid", dir), config.Options{})
		text := renderDiags(t, cfg, diags)
		if strings.Contains(text, "sEcReT") || strings.Contains(text, "SECRET") {
			t.Errorf("%s: the value reached a diagnostic:\n%s", dir, text)
		}
		for _, a := range args {
			if !strings.Contains(text, "Error: Sensitive value in "+a+"\n") {
				t.Errorf("%s: %s is not refused:\n%s", dir, a, text)
			}
		}
		for _, a := range []string{"env", "api_key"} {
			if strings.Contains(text, "Sensitive value in "+a+"\n") {
				t.Errorf("%s: %s takes sensitive values, but was refused", dir, a)
			}
		}
	}
}

// TestSensitiveValueNotInDiagnostics checks the diagnostics that could
// quote a sensitive value: a validation rule's error_message built from
// it, a condition that fails on it (hcl shows the values an expression
// refers to), and a reference argument given it (which names a string
// it is given).
func TestSensitiveValueNotInDiagnostics(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"error_message", `
variable "token" {
  sensitive = true
  validation {
    condition     = length(var.token) > 100
    error_message = "The token ${var.token} is too short."
  }
}
`, "Invalid value for variable"},
		{"failing condition", `
variable "token" {
  sensitive = true
  validation {
    condition     = tonumber(var.token) > 1
    error_message = "Not a number."
  }
}
`, "tonumber"},
		{"type mismatch", `
variable "token" {
  type      = number
  sensitive = true
}
`, "Invalid value for input variable"},
		{"output description", `
variable "token" {
  sensitive = true
}
output "o" {
  value       = "x"
  description = "for ${var.token}"
}
`, "Only an output's value may be sensitive"},
		{"node host", `
variable "token" {
  sensitive = true
}
node "a" {
  host = "${var.token}.example"
}
`, "Sensitive value in host"},
		{"node labels", `
variable "token" {
  sensitive = true
}
node "a" {
  host   = "h"
  labels = { a = var.token, b = "plain" }
}
`, "Sensitive value in labels"},
		{"reference argument", `
variable "token" {
  sensitive = true
}
node "a" {
  host = "h"
}
ray_cluster "c" {
  image = "img"
  head  = var.token
}
`, "Sensitive value in head"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The value comes from -var: a default would be in the
			// source snippets diagnostics show.
			opts := config.Options{Args: []config.VarArg{{Value: "token=s3cret-token"}}}
			cfg, diags := loadFiles(map[string][]byte{"main.hcl": []byte(c.src)}, opts)
			text := renderDiags(t, cfg, diags)
			if !diags.HasErrors() || !strings.Contains(text, c.want) {
				t.Errorf("want an error containing %q, got:\n%s", c.want, text)
			}
			if strings.Contains(text, "s3cret") {
				t.Errorf("the sensitive value reached a diagnostic:\n%s", text)
			}
			if n := len(diags.Errs()); n != 1 {
				t.Errorf("%d errors, want 1 (no error piled onto the refusal):\n%s", n, text)
			}
		})
	}
}

// TestSensitiveEnvNames shows that env, which takes sensitive values,
// refuses names derived from a sensitive value: names are shown in plans
// and go on the docker run command line (-e NAME). A map whose values are
// sensitive but whose names are written out is taken.
func TestSensitiveEnvNames(t *testing.T) {
	cases := []struct {
		name, env string
		refused   bool
	}{
		{"sensitive name", `{ (var.token) = "x" }`, true},
		{"whole sensitive map", `var.secrets`, true},
		{"for over a sensitive map", `{ for k, v in var.secrets : k => v }`, true},
		{"merge with a sensitive map", `merge({ A = "a" }, var.secrets)`, true},
		{"sensitive values, names written out", `{ HF_TOKEN = var.token, B = var.secrets["B"] }`, false},
		{"sensitive value in a template", `{ AUTH = "Bearer ${var.token}" }`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := `
variable "token" {
  sensitive = true
}
variable "secrets" {
  type      = map(string)
  sensitive = true
}
node "a" {
  host = "h"
}
ray_cluster "c" {
  image = "img"
  head  = node.a
  env   = ` + c.env + `
}
`
			opts := config.Options{Args: []config.VarArg{{Value: "token=s3cret-token"}, {Value: `secrets={ B = "s3cret-b" }`}}}
			cfg, diags := loadFiles(map[string][]byte{"main.hcl": []byte(src)}, opts)
			text := renderDiags(t, cfg, diags)
			if got := strings.Contains(text, "Sensitive names in env"); got != c.refused {
				t.Errorf("env = %s: refused %v, want %v:\n%s", c.env, got, c.refused, text)
			}
			if !c.refused && diags.HasErrors() {
				t.Errorf("env = %s: unexpected errors:\n%s", c.env, text)
			}
			if strings.Contains(text, "s3cret") {
				t.Errorf("the value reached a diagnostic:\n%s", text)
			}
		})
	}
}
