package config

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Config is an evaluated configuration: every block of a directory decoded
// into plain Go values, the resource blocks into their kinds' Go values
// ([Config.Blocks]). Values known only after observing the hosts (a node's
// fabric address and everything derived from it) are absent until the
// configuration is re-evaluated with [Config.WithFacts].
type Config struct {
	// Files holds every parsed file (configuration and variable files) by
	// name, for rendering diagnostics with source snippets.
	Files map[string]*hcl.File

	Variables map[string]*Variable
	Locals    map[string]*Local
	Outputs   map[string]*Output

	// Project is the deployment's name from the `rayform { project = ... }`
	// block, "" when the configuration does not declare one (the CLI then
	// falls back to the state's record, then the directory's name).
	// ProjectRange is where it is declared.
	Project      string
	ProjectRange hcl.Range

	// Facts are the observed facts this configuration was evaluated with,
	// as passed to [Config.WithFacts] (nil after Load). They are opaque to
	// this package: the kinds' hooks read them ([Block.Facts]).
	Facts any

	mod   *module
	vars  map[string]cty.Value       // resolved input variables, marked when sensitive
	edges map[string]map[string]bool // instance-level dependencies, from → to
	// blocks are the evaluated resource blocks: kind → instance name →
	// the kind's Go value ([Kind.New]).
	blocks map[string]map[string]any
}

// Blocks returns the evaluated blocks of kind by instance name: pointers
// to the kind's Go values ([Kind.New]). The map is the configuration's;
// callers must not modify it.
func (c *Config) Blocks(kind string) map[string]any { return c.blocks[kind] }

// Kinds lists the block types of the registered kinds, in registration
// order.
func (c *Config) Kinds() []string {
	if c.mod == nil {
		return nil
	}
	return c.mod.kindOrder
}

// add records an evaluated block.
func (c *Config) add(kind, name string, v any) {
	if c.blocks[kind] == nil {
		c.blocks[kind] = map[string]any{}
	}
	c.blocks[kind][name] = v
}

// Declarer is implemented by every kind's Go value through its embedded
// [Decl].
type Declarer interface{ Declaration() *Decl }

// Declaration returns d, so that a value embedding a Decl is a [Declarer].
func (d *Decl) Declaration() *Decl { return d }

// Decl is what every evaluated block records about its source and values.
type Decl struct {
	// Addr is the block's address, e.g. "ray_cluster.main" or
	// `node.gpu["h1"]`. It is the block's name in [Config.Graph].
	Addr string
	// DeclRange is the block header's range.
	DeclRange hcl.Range
	// AttrRanges maps each attribute that was set to its expression's range.
	AttrRanges map[string]hcl.Range
	// DependsOn lists, sorted, the addresses this block refers to.
	DependsOn []string
	// Sensitive lists attribute paths holding values derived from sensitive
	// variables, e.g. `env["HF_TOKEN"]`; a renderer prints them as
	// "(sensitive value)".
	Sensitive []string
	// Unknown lists attribute paths whose values are known only after
	// observing the hosts; their Go fields hold zero values until then.
	Unknown []string
	// Args holds every argument of the block's [Schema] as decoded:
	// defaults applied, references as the names they resolve to, null for
	// an unset argument without a default. Values are unmarked (see
	// Sensitive) and may be unknown before the hosts are observed.
	Args map[string]cty.Value
}

// Range returns the range of attribute attr, or the block's DeclRange when
// the attribute was not set.
func (d *Decl) Range(attr string) hcl.Range {
	if r, ok := d.AttrRanges[attr]; ok {
		return r
	}
	return d.DeclRange
}

// IsSensitive reports whether the value at path (e.g. "env" or
// `env["HF_TOKEN"]`) is sensitive or contains a sensitive value.
func (d *Decl) IsSensitive(path string) bool { return pathMatch(d.Sensitive, path) }

// IsUnknown reports whether the value at path is, or contains, a value known
// only after observing the hosts.
func (d *Decl) IsUnknown(path string) bool { return pathMatch(d.Unknown, path) }

// pathMatch reports whether path is in paths, is below one of them, or is
// above one of them.
func pathMatch(paths []string, path string) bool {
	for _, p := range paths {
		if p == path || isPathPrefix(p, path) || isPathPrefix(path, p) {
			return true
		}
	}
	return false
}

func isPathPrefix(prefix, path string) bool {
	return strings.HasPrefix(path, prefix) && len(path) > len(prefix) && (path[len(prefix)] == '[' || path[len(prefix)] == '.')
}

// Variable is an input variable.
type Variable struct {
	Name        string
	Description string
	Type        cty.Type
	Default     cty.Value // cty.NilVal when the variable is required
	Sensitive   bool
	// Value is the resolved value (without sensitivity marks).
	Value cty.Value
	// Source says where Value came from: "default", "env", "-var" or the
	// variable file's name.
	Source    string
	DeclRange hcl.Range
}

// Local is a named value from a locals block.
type Local struct {
	Name      string
	Value     cty.Value // without sensitivity marks; may be unknown
	Sensitive bool      // derived from a sensitive value
	DeclRange hcl.Range
}

// Output is an output value.
type Output struct {
	Name        string
	Description string
	// Value is the evaluated value without sensitivity marks; it may be
	// (or contain) unknown values before facts are known.
	Value      cty.Value
	Sensitive  bool
	DeclRange  hcl.Range
	ValueRange hcl.Range
	// Reads are, by the address of each block the value refers to (its
	// instance, as node.gpu["h1"], when the reference names the key), the
	// attributes of it the value reads: "" for a reference to the block
	// as a whole, or one whose attribute is not named statically.
	Reads map[string][]string
}
