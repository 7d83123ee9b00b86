package config

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// reference is one reference from a block to another, found statically in
// the block's expressions.
type reference struct {
	kind string // the referenced block's type
	addr string // the referenced block-level address, e.g. "node.gpu"
	// key is the for_each key when the reference names one statically,
	// as in node.gpu["h1"]; hasKey says whether it does.
	key    string
	hasKey bool
	rng    hcl.Range
	attr   string // the referring block's argument
}

// namedExpr is an expression together with the argument it belongs to.
type namedExpr struct {
	attr string
	expr hcl.Expression
}

// expressions returns the item's expressions in source order.
func (it *item) expressions() []namedExpr {
	var out []namedExpr
	if it.forEach != nil {
		out = append(out, namedExpr{"for_each", it.forEach.Expr})
	}
	for _, a := range sortedAttrs(it.attrs) {
		out = append(out, namedExpr{a.Name, a.Expr})
	}
	return out
}

// analyze finds every reference in every block, checks that each refers to
// something declared, and records them on the items.
func (m *module) analyze() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, addr := range m.order {
		it := m.items[addr]
		if it.variable != nil {
			diags = append(diags, m.checkValidationRefs(it)...)
			continue
		}
		seen := map[string]bool{}
		for _, ne := range it.expressions() {
			for _, tr := range ne.expr.Variables() {
				ref, ok, more := m.parseRef(it, ne.attr, tr)
				diags = append(diags, more...)
				if !ok {
					continue
				}
				k := ref.addr + "\x00" + ref.key + "\x00" + strconv.FormatBool(ref.hasKey) + "\x00" + ref.attr
				if seen[k] {
					continue
				}
				seen[k] = true
				it.refs = append(it.refs, ref)
			}
		}
	}
	return diags
}

// checkValidationRefs checks that a variable's validation rules refer to
// nothing but the variable itself.
func (m *module) checkValidationRefs(it *item) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, v := range it.variable.validations {
		for _, e := range []hcl.Expression{v.condition, v.errorMessage} {
			for _, tr := range e.Variables() {
				if tr.RootName() == "var" && len(tr) > 1 {
					if a, ok := tr[1].(hcl.TraverseAttr); ok && a.Name == it.name {
						continue
					}
				}
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid reference in variable validation",
					Detail: fmt.Sprintf("A validation rule of variable %q may refer only to the variable itself, as var.%s. Move checks that involve other values elsewhere.",
						it.name, it.name),
					Subject: tr.SourceRange().Ptr(),
				})
			}
		}
	}
	return diags
}

// parseRef interprets one traversal found in it's argument attr.
func (m *module) parseRef(it *item, attr string, tr hcl.Traversal) (reference, bool, hcl.Diagnostics) {
	rng := tr.SourceRange()
	root := tr.RootName()
	errAt := func(summary, detail string) (reference, bool, hcl.Diagnostics) {
		return reference{}, false, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   detail,
			Subject:  rng.Ptr(),
		}}
	}
	if root == "each" {
		if it.forEach == nil || attr == "for_each" {
			return errAt(`Reference to "each" in context without for_each`,
				"each.key and each.value are available only in the arguments of a block that has for_each. Remove the reference or add for_each to the block.")
		}
		if len(tr) < 2 {
			return errAt("Invalid each reference", "Use each.key or each.value.")
		}
		if a, ok := tr[1].(hcl.TraverseAttr); !ok || (a.Name != "key" && a.Name != "value") {
			name := ""
			if ok {
				name = a.Name
			}
			return errAt("Invalid each attribute",
				fmt.Sprintf("each has only the attributes key and value.%s", didYouMean(name, []string{"key", "value"}, "each.%s")))
		}
		return reference{}, false, nil
	}
	kind, ok := m.refRoot(root)
	if !ok {
		detail := fmt.Sprintf("There is nothing named %q. References look like %s.", root, m.refForms())
		if s := didYouMean(root, m.roots(), "%s"); s != "" {
			detail += s
		} else if s := m.declaredAddrFor(root); s != "" {
			detail += fmt.Sprintf(" Did you mean %s?", s)
		}
		return errAt("Reference to undeclared name", detail)
	}
	var name string
	if len(tr) > 1 {
		if a, ok := tr[1].(hcl.TraverseAttr); ok {
			name = a.Name
		}
	}
	prefix := addrPrefix(kind)
	if name == "" {
		return errAt("Invalid reference",
			fmt.Sprintf("A reference to a %s needs a name after the dot, like %s.NAME.", m.noun(kind), prefix))
	}
	addr := prefix + "." + name
	target, ok := m.items[addr]
	if !ok {
		return errAt(fmt.Sprintf("Reference to undeclared %s", m.noun(kind)), m.undeclaredDetail(kind, name))
	}
	if target == it {
		return errAt("Self-referential block",
			fmt.Sprintf("The %s argument of %s refers to %s itself. A block cannot depend on its own values; refer to another block instead.", attr, it.addr, it.addr))
	}
	ref := reference{kind: kind, addr: addr, rng: rng, attr: attr}
	if d := checkExportAttr(kind, m.exportAttrs(kind), target.forEach != nil, tr); d != nil {
		return reference{}, false, hcl.Diagnostics{d}
	}
	if k := m.kinds[kind]; k != nil && k.ForEach && len(tr) > 2 {
		if idx, ok := tr[2].(hcl.TraverseIndex); ok {
			if target.forEach == nil {
				return errAt(fmt.Sprintf("Unexpected %s instance key", m.noun(kind)),
					fmt.Sprintf("%s has no for_each, so it has no instances to index. Refer to it as %s.", addr, addr))
			}
			if idx.Key.Type() == cty.String && idx.Key.IsKnown() && !idx.Key.IsNull() {
				ref.key, ref.hasKey = idx.Key.AsString(), true
			}
		}
	}
	return ref, true, nil
}

// undeclaredDetail explains a reference to an undeclared name of kind.
func (m *module) undeclaredDetail(kind, name string) string {
	var names []string
	for _, addr := range m.order {
		if it := m.items[addr]; it.kind == kind {
			names = append(names, it.name)
		}
	}
	sort.Strings(names)
	prefix := addrPrefix(kind)
	var detail string
	switch kind {
	case kindVariable:
		detail = fmt.Sprintf("An input variable named %q has not been declared.", name)
	case kindLocal:
		detail = fmt.Sprintf("A local value named %q has not been declared.", name)
	default:
		detail = fmt.Sprintf("No %s block named %q is declared.", kind, name)
	}
	if s := didYouMean(name, names, prefix+".%s"); s != "" {
		return detail + s
	}
	switch kind {
	case kindVariable:
		return detail + fmt.Sprintf(" Declare it with a variable %q {} block.", name)
	case kindLocal:
		return detail + fmt.Sprintf(" Declare it in a locals block: locals { %s = ... }.", name)
	}
	return detail + fmt.Sprintf(" Declare it with a %s %q {} block, or correct the name.", kind, name)
}

// declaredAddrFor returns the address of a block labelled name, for a
// reference that forgot the block type ("spark1" for node.spark1).
func (m *module) declaredAddrFor(name string) string {
	for _, addr := range m.order {
		if it := m.items[addr]; it.name == name && it.kind != kindOutput {
			return addr
		}
	}
	return ""
}

// instanceName is a node's name: the label, or label["key"] for a for_each
// instance.
func instanceName(block, key string, hasKey bool) string {
	if !hasKey {
		return block
	}
	return block + "[" + strconv.Quote(key) + "]"
}

// checkExportAttr checks the attribute a reference reads from a block,
// e.g. "adress" in ray_cluster.main.adress.
func checkExportAttr(kind string, attrs []string, forEach bool, tr hcl.Traversal) *hcl.Diagnostic {
	i := 2
	if forEach {
		i = 3 // node.gpu["h1"].host or node.gpu.h1.host
	}
	if attrs == nil || len(tr) <= i {
		return nil
	}
	a, ok := tr[i].(hcl.TraverseAttr)
	if !ok || slices.Contains(attrs, a.Name) {
		return nil
	}
	rng := a.SrcRange
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Unsupported attribute",
		Detail: fmt.Sprintf("A %s has no attribute %q.%s Its attributes are %s.",
			kind, a.Name, didYouMean(a.Name, attrs, "%q"), strings.Join(attrs, ", ")),
		Subject: &rng,
	}
}

// reads are the attributes an expression reads from each block it refers
// to (Output.Reads): by instance address, the attribute names, "" when
// the reference names none statically (node.gpu, node.gpu[each.key].x).
func (e *evaluator) reads(expr hcl.Expression) map[string][]string {
	out := map[string][]string{}
	add := func(addr, attr string) {
		if !slices.Contains(out[addr], attr) {
			out[addr] = append(out[addr], attr)
		}
	}
	for _, tr := range expr.Variables() {
		kind := tr.RootName()
		if _, ok := e.mod.kinds[kind]; !ok || len(tr) < 2 {
			continue
		}
		name, ok := tr[1].(hcl.TraverseAttr)
		if !ok {
			continue
		}
		block := kind + "." + name.Name
		it := e.mod.items[block]
		if it == nil {
			continue
		}
		attrAt := func(i int) string {
			if len(tr) > i {
				if a, ok := tr[i].(hcl.TraverseAttr); ok {
					return a.Name
				}
			}
			return ""
		}
		if it.forEach == nil {
			add(block, attrAt(2))
			continue
		}
		key, hasKey := "", false
		if len(tr) > 2 {
			switch k := tr[2].(type) {
			case hcl.TraverseIndex:
				if k.Key.Type() == cty.String && k.Key.IsKnown() {
					key, hasKey = k.Key.AsString(), true
				}
			case hcl.TraverseAttr:
				key, hasKey = k.Name, true
			}
		}
		if hasKey {
			add(kind+"."+instanceName(name.Name, key, true), attrAt(3))
			continue
		}
		for _, k := range e.keys[block] {
			add(kind+"."+instanceName(name.Name, k, true), "")
		}
	}
	return out
}
