package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Options control how a configuration is loaded.
type Options struct {
	// Args are the -var and -var-file options in command-line order; a
	// later one overrides an earlier one.
	Args []VarArg
	// Env is the process environment ("KEY=value"); RAYFORM_VAR_<name>
	// entries set variables with the lowest precedence after defaults.
	Env []string
	// BaseDir resolves relative paths in file(). Load defaults it to dir.
	BaseDir string
	// UnknownVariables gives a variable without a value an unknown value
	// instead of the "No value for required variable" error, as
	// Terraform's validate does: validate and graph check a configuration
	// without its secrets (in CI, say). Values that depend on an unknown
	// variable are then unknown wherever they are used, and the result is
	// only good for checking, never for planning.
	UnknownVariables bool
	// Kinds are the resource block types the configuration may use
	// (resources.Kinds().Schemas()); loading without them is an error.
	Kinds []Kind
}

// VarArg is one -var NAME=VALUE (File false) or -var-file FILE (File true).
type VarArg struct {
	File  bool
	Value string
}

// EnvPrefix is the prefix of environment variables that set input variables.
const EnvPrefix = "RAYFORM_VAR_"

// IsConfigFile reports whether a file name is loaded as configuration.
func IsConfigFile(name string) bool {
	return strings.HasSuffix(name, ".hcl") || strings.HasSuffix(name, ".hcl.json")
}

// Load reads every *.hcl and *.hcl.json file in dir and evaluates the
// configuration without observed facts. File names in diagnostics are dir
// joined with the base name ("main.hcl" when dir is ".").
//
// The returned Config is never nil; when diags has errors only its Files
// (for rendering the diagnostics) are reliable.
func Load(dir string, opts Options) (*Config, hcl.Diagnostics) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return &Config{Files: map[string]*hcl.File{}}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read configuration directory",
			Detail:   fmt.Sprintf("Cannot read %s: %v.", dir, err),
		}}
	}
	files := map[string][]byte{}
	var diags hcl.Diagnostics
	for _, e := range entries {
		if e.IsDir() || !IsConfigFile(e.Name()) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(name)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Failed to read configuration file",
				Detail:   fmt.Sprintf("Cannot read %s: %v.", name, err),
			})
			continue
		}
		files[name] = b
	}
	if opts.BaseDir == "" {
		opts.BaseDir = dir
	}
	if len(files) == 0 && !diags.HasErrors() {
		return &Config{Files: map[string]*hcl.File{}}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "No configuration files",
			Detail:   fmt.Sprintf("The directory %s contains no *.hcl or *.hcl.json files. Run rayform in the directory that holds the configuration, or pass -chdir=DIR.", dir),
		}}
	}
	cfg, more := LoadFiles(files, opts)
	return cfg, append(diags, more...)
}

// LoadFiles is Load for configuration held in memory, keyed by file name; a
// name ending in ".json" is parsed as JSON, any other as native syntax.
func LoadFiles(files map[string][]byte, opts Options) (*Config, hcl.Diagnostics) {
	p := hclparse.NewParser()
	mod, diags := parseModule(p, files, opts.Kinds)
	cfg := &Config{Files: p.Files()}
	if diags.HasErrors() {
		return cfg, diags
	}
	mod.baseDir = opts.BaseDir
	mod.unknownVars = opts.UnknownVariables
	diags = append(diags, mod.analyze()...)
	if !diags.HasErrors() {
		order, more := mod.orderItems()
		diags = append(diags, more...)
		mod.evalOrder = order
	}
	vars, varDecls, more := mod.resolveVariables(p, opts)
	diags = append(diags, more...)
	cfg.Files = p.Files()
	if diags.HasErrors() {
		return cfg, diags
	}
	out, more := evaluate(mod, vars, varDecls, nil)
	out.Files = cfg.Files
	return out, append(diags, more...)
}

// WithFacts re-evaluates the configuration with observed facts, so that
// the values the kinds compute from them (fabric addresses, cluster
// addresses, endpoints) become known. f is opaque here: the kinds' hooks
// read it ([Block.Facts]); kind.Facts is what the resource kinds
// read. The receiver is not modified.
func (c *Config) WithFacts(f any) (*Config, hcl.Diagnostics) {
	if c.mod == nil {
		return c, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Configuration not loaded",
			Detail:   "WithFacts needs a configuration returned by Load without errors.",
		}}
	}
	out, diags := evaluate(c.mod, c.vars, c.Variables, f)
	out.Files = c.Files
	return out, diags
}

// module is the parsed, not yet evaluated configuration.
type module struct {
	// unknownVars is Options.UnknownVariables.
	unknownVars bool
	baseDir     string
	// kinds are the registered resource kinds by block type; kindOrder
	// lists their types in registration order.
	kinds     map[string]*Kind
	kindOrder []string
	// project and projectRange come from the `rayform` block.
	project      string
	projectRange hcl.Range
	settingsSeen *hcl.Range
	items        map[string]*item // by block-level address
	order        []string         // addresses in declaration order
	evalOrder    []string         // addresses in dependency order
}

// item is one block-level object: a variable, a local value, an output or a
// resource block (before for_each expansion).
type item struct {
	kind      string
	name      string
	addr      string // "var.x", "local.y", "node.gpu", "output.z"
	declRange hcl.Range
	attrs     hcl.Attributes // a local's expression is attrs[name]
	forEach   *hcl.Attribute
	refs      []reference
	variable  *variableDecl
}

type variableDecl struct {
	typ         cty.Type
	def         cty.Value
	defRange    hcl.Range
	description string
	sensitive   bool
	validations []validationDecl
}

type validationDecl struct {
	condition    hcl.Expression
	errorMessage hcl.Expression
	declRange    hcl.Range
}

// parseModule parses the files and decodes the blocks' structure.
func parseModule(p *hclparse.Parser, files map[string][]byte, kinds []Kind) (*module, hcl.Diagnostics) {
	byType, order, diags := registerKinds(kinds)
	mod := &module{items: map[string]*item{}, kinds: byType, kindOrder: order}
	if diags.HasErrors() {
		return mod, diags
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		var f *hcl.File
		var more hcl.Diagnostics
		if strings.HasSuffix(name, ".json") {
			f, more = p.ParseJSON(files[name], name)
		} else {
			f, more = p.ParseHCL(files[name], name)
		}
		diags = append(diags, more...)
		if f == nil || f.Body == nil {
			continue
		}
		content, more := f.Body.Content(mod.rootSchema())
		diags = append(diags, more...)
		for _, b := range content.Blocks {
			if b.Type == kindSettings {
				diags = append(diags, mod.addSettings(b)...)
				continue
			}
			diags = append(diags, mod.addBlock(b)...)
		}
	}
	return mod, diags
}

// addSettings decodes the `rayform { project = "NAME" }` block. Like
// Terraform's settings block it is read before anything is evaluated, so
// its values must be literals.
func (m *module) addSettings(b *hcl.Block) hcl.Diagnostics {
	if m.settingsSeen != nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Duplicate rayform block",
			Detail:   fmt.Sprintf("A rayform block was already declared at %s. A configuration has at most one; merge them.", *m.settingsSeen),
			Subject:  b.DefRange.Ptr(),
		}}
	}
	m.settingsSeen = b.DefRange.Ptr()
	content, diags := b.Body.Content(settingsSchema())
	a, ok := content.Attributes["project"]
	if !ok || diags.HasErrors() {
		return diags
	}
	v, more := a.Expr.Value(nil)
	if more.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid project name",
			Detail:   "The project must be a literal string, like project = \"gx\": it names the deployment before anything else is evaluated, so it cannot refer to variables.",
			Subject:  a.Expr.Range().Ptr(),
		})
	}
	name := v.AsString()
	if !ValidProject(name) {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid project name",
			Detail:   fmt.Sprintf("The project %q must start with a letter or digit and hold only letters, digits, '-', '_' and '.': it labels every container rayform creates.", name),
			Subject:  a.Expr.Range().Ptr(),
		})
	}
	m.project, m.projectRange = name, a.Expr.Range()
	return diags
}

// ValidProject reports whether name can be a project name: a docker label
// value and a path segment, letters, digits, '-', '_' and '.', starting
// with a letter or digit.
func ValidProject(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '-' || r == '_' || r == '.'):
		default:
			return false
		}
	}
	return true
}

func (m *module) add(it *item) hcl.Diagnostics {
	if prev, ok := m.items[it.addr]; ok {
		noun := m.noun(it.kind)
		what := fmt.Sprintf("A %s named %q", noun, it.name)
		if it.kind == kindLocal {
			what = fmt.Sprintf("A local value named %q", it.name)
		}
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Duplicate %s %q", noun, it.name),
			Detail: fmt.Sprintf("%s was already declared at %s. Names must be unique within a configuration; rename or remove one of them.",
				what, prev.declRange),
			Subject: it.declRange.Ptr(),
		}}
	}
	m.items[it.addr] = it
	m.order = append(m.order, it.addr)
	return nil
}

func (m *module) addBlock(b *hcl.Block) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if b.Type == "locals" {
		attrs, more := b.Body.JustAttributes()
		diags = append(diags, more...)
		for _, a := range sortedAttrs(attrs) {
			if !hclsyntax.ValidIdentifier(a.Name) {
				diags = append(diags, invalidName("local value", a.Name, a.NameRange))
				continue
			}
			diags = append(diags, m.add(&item{
				kind:      kindLocal,
				name:      a.Name,
				addr:      "local." + a.Name,
				declRange: a.NameRange,
				attrs:     hcl.Attributes{a.Name: a},
			})...)
		}
		return diags
	}
	name := b.Labels[0]
	if !hclsyntax.ValidIdentifier(name) {
		return append(diags, invalidName(m.noun(b.Type), name, b.LabelRanges[0]))
	}
	it := &item{
		kind:      b.Type,
		name:      name,
		addr:      addrPrefix(b.Type) + "." + name,
		declRange: hcl.RangeBetween(b.TypeRange, b.LabelRanges[0]),
	}
	if b.Type == kindVariable {
		v, more := decodeVariable(b)
		diags = append(diags, more...)
		if v == nil {
			return diags
		}
		it.variable = v
		return append(diags, m.add(it)...)
	}
	content, more := b.Body.Content(m.blockSchema(b.Type))
	diags = append(diags, more...)
	it.attrs = content.Attributes
	if fe, ok := content.Attributes["for_each"]; ok {
		it.forEach = fe
		delete(it.attrs, "for_each")
	}
	return append(diags, m.add(it)...)
}

// decodeVariable decodes a variable block's constant parts.
func decodeVariable(b *hcl.Block) (*variableDecl, hcl.Diagnostics) {
	content, diags := b.Body.Content(variableSchema())
	v := &variableDecl{typ: cty.DynamicPseudoType, def: cty.NilVal}
	if a, ok := content.Attributes["type"]; ok {
		ty, more := typeexpr.TypeConstraint(a.Expr)
		diags = append(diags, more...)
		if !more.HasErrors() {
			v.typ = ty
		}
	}
	if a, ok := content.Attributes["description"]; ok {
		diags = append(diags, decodeConst(a, cty.String, func(val cty.Value) { v.description = val.AsString() })...)
	}
	if a, ok := content.Attributes["sensitive"]; ok {
		diags = append(diags, decodeConst(a, cty.Bool, func(val cty.Value) { v.sensitive = val.True() })...)
	}
	if a, ok := content.Attributes["default"]; ok {
		val, more := a.Expr.Value(nil)
		diags = append(diags, more...)
		if !more.HasErrors() && val.IsWhollyKnown() && !val.IsNull() {
			conv, err := convert.Convert(val, v.typ)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid default value for variable",
					Detail: fmt.Sprintf("The default value of variable %q does not match its type %s: %s. Change the default or the type.",
						b.Labels[0], typeexpr.TypeString(v.typ), errText(err)),
					Subject: a.Expr.Range().Ptr(),
				})
			} else {
				v.def = conv
				v.defRange = a.Expr.Range()
			}
		}
	}
	for _, vb := range content.Blocks {
		vc, more := vb.Body.Content(validationSchema())
		diags = append(diags, more...)
		if more.HasErrors() {
			continue
		}
		v.validations = append(v.validations, validationDecl{
			condition:    vc.Attributes["condition"].Expr,
			errorMessage: vc.Attributes["error_message"].Expr,
			declRange:    vb.DefRange,
		})
	}
	return v, diags
}

// decodeConst evaluates an attribute that must be a constant of type ty and
// passes the known, non-null value to set.
func decodeConst(a *hcl.Attribute, ty cty.Type, set func(cty.Value)) hcl.Diagnostics {
	val, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !val.IsWhollyKnown() || val.IsNull() {
		return diags
	}
	conv, err := convert.Convert(val, ty)
	if err != nil {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s.", a.Name, errText(err)),
			Subject:  a.Expr.Range().Ptr(),
		})
	}
	set(conv)
	return diags
}

func invalidName(noun, name string, rng hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Invalid %s name", noun),
		Detail: fmt.Sprintf("%q is not a valid name. A name must start with a letter or underscore and may contain only letters, digits, underscores and dashes.",
			name),
		Subject: rng.Ptr(),
	}
}

// sortedAttrs returns attributes in source order.
func sortedAttrs(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := out[i].Range, out[j].Range
		if ri.Filename != rj.Filename {
			return ri.Filename < rj.Filename
		}
		return ri.Start.Byte < rj.Start.Byte
	})
	return out
}

// errText is an error message as a sentence fragment (no trailing period).
func errText(err error) string {
	return strings.TrimSuffix(err.Error(), ".")
}
