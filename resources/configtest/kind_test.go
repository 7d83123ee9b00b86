package configtest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources"
)

// dnsRecord is the Go type of the toy kind dns_record: a fifth kind that
// engine/config has never heard of.
type dnsRecord struct {
	config.Decl
	Name    string            `rayform:",name"`
	Label   string            `rayform:",label"`
	Key     string            `rayform:",key"`
	Zone    string            `rayform:"zone"`
	TTL     int               `rayform:"ttl"`
	Weight  float64           `rayform:"weight"`
	Proxied bool              `rayform:"proxied"`
	Target  string            `rayform:"target"`
	Backups []string          `rayform:"backups"`
	Tags    map[string]string `rayform:"tags"`
	Timeout time.Duration     `rayform:"timeout"`
	// FQDN is computed (Kind.Compute); Alias defaults to it (Kind.Decode).
	FQDN  string
	Alias string `rayform:"alias"`
}

// dnsKind registers dns_record, with a reference to one node, one to
// several, a computed attribute, a default computed from other
// arguments, a check and for_each.
func dnsKind() config.Kind {
	return config.Kind{
		Type:    "dns_record",
		Noun:    "DNS record",
		ForEach: true,
		Args: []config.Arg{
			{Name: "zone", Type: cty.String, Required: true, Exported: true},
			{Name: "ttl", Type: cty.Number, Default: cty.NumberIntVal(300), Min: 1, Max: 86400, Exported: true},
			{Name: "weight", Type: cty.Number, Default: cty.NumberFloatVal(0.5)},
			{Name: "proxied", Type: cty.Bool, Default: cty.True},
			{Name: "target", Type: cty.DynamicPseudoType, Ref: "node", Decoded: cty.String, Required: true, Exported: true},
			{Name: "backups", Type: cty.DynamicPseudoType, Ref: "node", Decoded: cty.List(cty.String), Exported: true},
			{Name: "tags", Type: cty.Map(cty.String)},
			{Name: "timeout", Type: cty.String, Default: cty.StringVal("5m")},
			{Name: "alias", Type: cty.String, Exported: true},
		},
		Computed: []config.Attr{{Name: "fqdn"}},
		New:      func() any { return &dnsRecord{} },
		Decode: func(b *config.Block) {
			r := b.Value().(*dnsRecord)
			if !b.IsSet("alias") {
				r.Alias = strings.ReplaceAll(r.Label, "_", "-") + "." + r.Zone
				b.SetDefault("alias", cty.StringVal(r.Alias))
			}
		},
		Check: func(b *config.Block) {
			r := b.Value().(*dnsRecord)
			if strings.HasSuffix(r.Zone, ".") {
				b.Error("zone", "Invalid zone", fmt.Sprintf("%q ends with a dot.", r.Zone))
			}
		},
		Compute: func(b *config.Block) map[string]cty.Value {
			r := b.Value().(*dnsRecord)
			r.FQDN = r.Label + "." + r.Zone
			if r.Key != "" {
				r.FQDN = r.Key + "." + r.FQDN
			}
			return map[string]cty.Value{"fqdn": cty.StringVal(r.FQDN)}
		},
	}
}

// loadToy loads files with the resource kinds and dns_record registered.
func loadToy(t *testing.T, src string) (*config.Config, string) {
	t.Helper()
	kinds := append(resources.Kinds().Schemas(), dnsKind())
	cfg, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{Kinds: kinds})
	var msgs []string
	for _, d := range diags {
		at := ""
		if d.Subject != nil {
			at = fmt.Sprintf("%s:%d: ", d.Subject.Filename, d.Subject.Start.Line)
		}
		msgs = append(msgs, at+d.Summary+": "+d.Detail)
	}
	return cfg, strings.Join(msgs, "\n")
}

const toyNodes = `
node "spark1" {
  host = "10.0.0.1"
}
node "gpu" {
  for_each = toset(["a", "b"])
  host     = "10.0.1.${each.key == "a" ? 1 : 2}"
}
`

// TestFifthKind registers a kind engine/config does not know by name and
// evaluates it: decoding by struct tags, defaults, ranges, references to
// one and to several blocks, for_each, the kind's hooks, references to its
// attributes from expressions, and the graph.
func TestFifthKind(t *testing.T) {
	cfg, diags := loadToy(t, toyNodes+`
dns_record "api_v1" {
  zone    = "example.org"
  ttl     = 60
  target  = node.spark1
  backups = node.gpu
  tags    = { team = "infra" }
}
dns_record "multi" {
  for_each = toset(["x", "y"])
  zone     = "z${each.key}.org"
  target   = node.gpu["a"]
  timeout  = "90s"
  proxied  = false
  alias    = "m-${each.key}"
}
output "fqdn" {
  value = dns_record.api_v1.fqdn
}
output "multi" {
  value = [dns_record.multi["x"].fqdn, dns_record.multi["y"].alias, dns_record.api_v1.alias]
}
output "ttl" {
  value = dns_record.multi["y"].ttl + dns_record.api_v1.ttl
}
output "backups" {
  value = dns_record.api_v1.backups
}
`)
	if diags != "" {
		t.Fatalf("diagnostics:\n%s", diags)
	}
	blocks := cfg.Blocks("dns_record")
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range blocks {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, []string{"api_v1", `multi["x"]`, `multi["y"]`}) {
		t.Fatalf("instances = %q", got)
	}
	api := blocks["api_v1"].(*dnsRecord)
	want := dnsRecord{
		Name: "api_v1", Label: "api_v1", Zone: "example.org", TTL: 60, Weight: 0.5, Proxied: true,
		Target: "spark1", Backups: []string{`gpu["a"]`, `gpu["b"]`}, Tags: map[string]string{"team": "infra"},
		Timeout: 5 * time.Minute, FQDN: "api_v1.example.org", Alias: "api-v1.example.org",
	}
	checkRecord(t, api, want)
	if api.Addr != "dns_record.api_v1" || api.DeclRange.Start.Line != 10 {
		t.Errorf("Decl = %s at line %d, want dns_record.api_v1 at line 10", api.Addr, api.DeclRange.Start.Line)
	}
	if !slices.Equal(api.DependsOn, []string{`node.gpu["a"]`, `node.gpu["b"]`, "node.spark1"}) {
		t.Errorf("DependsOn = %q", api.DependsOn)
	}
	if v := api.Args["ttl"]; !v.RawEquals(cty.NumberIntVal(60)) {
		t.Errorf(`Args["ttl"] = %#v`, v)
	}
	if v := api.Args["alias"]; !v.RawEquals(cty.StringVal("api-v1.example.org")) {
		t.Errorf(`Args["alias"] = %#v`, v)
	}
	y := blocks[`multi["y"]`].(*dnsRecord)
	checkRecord(t, y, dnsRecord{
		Name: `multi["y"]`, Label: "multi", Key: "y", Zone: "zy.org", TTL: 300, Weight: 0.5,
		Target: `gpu["a"]`, Timeout: 90 * time.Second, FQDN: "y.multi.zy.org", Alias: "m-y",
	})
	for name, want := range map[string]cty.Value{
		"fqdn":    cty.StringVal("api_v1.example.org"),
		"multi":   cty.TupleVal([]cty.Value{cty.StringVal("x.multi.zx.org"), cty.StringVal("m-y"), cty.StringVal("api-v1.example.org")}),
		"ttl":     cty.NumberIntVal(360),
		"backups": cty.ListVal([]cty.Value{cty.StringVal(`gpu["a"]`), cty.StringVal(`gpu["b"]`)}),
	} {
		if got := cfg.Outputs[name].Value; !got.RawEquals(want) {
			t.Errorf("output %s = %#v, want %#v", name, got, want)
		}
	}
	g := cfg.Graph()
	for _, e := range [][2]string{
		{"dns_record.api_v1", "node.spark1"},
		{"dns_record.api_v1", `node.gpu["b"]`},
		{`dns_record.multi["x"]`, `node.gpu["a"]`},
		{"output.fqdn", "dns_record.api_v1"},
	} {
		if !slices.Contains(g.DependenciesOf(e[0]), e[1]) {
			t.Errorf("graph: %s does not depend on %s (it depends on %q)", e[0], e[1], g.DependenciesOf(e[0]))
		}
	}
}

func checkRecord(t *testing.T, got *dnsRecord, want dnsRecord) {
	t.Helper()
	got2 := *got
	got2.Decl = config.Decl{}
	if fmt.Sprintf("%#v", got2) != fmt.Sprintf("%#v", want) {
		t.Errorf("decoded\n%#v\nwant\n%#v", got2, want)
	}
}

// TestFifthKindErrors checks that the language's errors name the toy kind
// and point at the argument: ranges, types, references, the kind's own
// check, unknown attributes and instance keys.
func TestFifthKindErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"range", `zone = "a.org"
  target = node.spark1
  ttl = 0`, "main.hcl:12: Value out of range: ttl must be between 1 and 86400; got 0."},
		{"whole", `zone = "a.org"
  target = node.spark1
  ttl = 1.5`, "main.hcl:12: Invalid whole number: ttl must be a whole number; got 1.5."},
		{"duration", `zone = "a.org"
  target = node.spark1
  timeout = "soon"`, `main.hcl:12: Invalid duration: timeout must be a duration such as "90s", "20m" or "1h30m"; "soon" is not valid`},
		{"check", `zone = "a.org."
  target = node.spark1`, `main.hcl:10: Invalid zone: "a.org." ends with a dot.`},
		{"string ref", `zone = "a.org"
  target = "spark1"`, "Did you mean node.spark1 (without quotes)?"},
		{"collection", `zone = "a.org"
  target = node.gpu`, `A node block with for_each stands for all its instances; pick one with its key, like node.NAME["key"].`},
		{"list ref", `zone = "a.org"
  target = node.spark1
  backups = ["spark1"]`, "backups must refer to a node block, like backups = [node.a, node.b]"},
		{"missing", `target = node.spark1`, `The argument "zone" is required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := loadToy(t, toyNodes+"dns_record \"r\" {\n  "+tc.body+"\n}\n")
			if !strings.Contains(diags, tc.want) {
				t.Errorf("diagnostics:\n%s\nwant %q", diags, tc.want)
			}
		})
	}
	_, diags := loadToy(t, toyNodes+`
dns_record "r" {
  zone   = "a.org"
  target = node.spark1
}
output "o" {
  value = dns_record.r.fqnd
}
`)
	if want := `main.hcl:15: Unsupported attribute: A dns_record has no attribute "fqnd". Did you mean "fqdn"? Its attributes are id, name, key, zone, ttl, target, backups, alias, fqdn.`; !strings.Contains(diags, want) {
		t.Errorf("diagnostics:\n%s\nwant %q", diags, want)
	}
	_, diags = loadToy(t, toyNodes+`
dns_record "m" {
  for_each = toset(["x"])
  zone     = "a.org"
  target   = node.spark1
}
output "o" {
  value = dns_record.m["z"].fqdn
}
`)
	if want := `Reference to undeclared DNS record instance: dns_record.m has no instance with the key "z"; its for_each produced the keys "x".`; !strings.Contains(diags, want) {
		t.Errorf("diagnostics:\n%s\nwant %q", diags, want)
	}
}

// TestKindWithoutGoType checks that a kind whose New does not give a
// pointer to a struct embedding config.Decl is refused when registered,
// not when a block of it is evaluated.
func TestKindWithoutGoType(t *testing.T) {
	type plain struct{ Name string }
	for name, newValue := range map[string]func() any{
		"nil":         nil,
		"no Decl":     func() any { return &plain{} },
		"not pointer": func() any { return struct{ config.Decl }{} },
	} {
		t.Run(name, func(t *testing.T) {
			k := dnsKind()
			k.New = newValue
			_, diags := config.LoadFiles(map[string][]byte{"main.hcl": nil}, config.Options{Kinds: []config.Kind{k}})
			if !diags.HasErrors() || !strings.Contains(diags.Error(), `The kind "dns_record" has no Go type`) {
				t.Errorf("diagnostics: %v", diags)
			}
		})
	}
}
