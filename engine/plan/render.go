package plan

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/termtext"
)

// TextOptions control the human rendering.
type TextOptions struct {
	Color bool // ANSI colour (only on a TTY, never with NO_COLOR)
	// SavedTo, when set, adds the footer telling how to apply a saved plan.
	SavedTo string
}

// ANSI styles used by the renderer: termtext's, the ones the CLI's
// escaping writer lets pass when colour is on.
const (
	ansiReset  = termtext.Reset
	ansiBold   = termtext.Bold
	ansiRed    = termtext.Red
	ansiGreen  = termtext.Green
	ansiYellow = termtext.Yellow
)

type painter struct{ on bool }

func (p painter) paint(style, s string) string {
	if !p.on || s == "" {
		return s
	}
	return style + s + ansiReset
}

func (p painter) symbol(a Action) string {
	switch a {
	case Create:
		return p.paint(ansiGreen, a.Symbol())
	case Update:
		return p.paint(ansiYellow, a.Symbol())
	case Delete:
		return p.paint(ansiRed, a.Symbol())
	case Replace:
		if !p.on {
			return a.Symbol()
		}
		return ansiRed + "-" + ansiReset + "/" + ansiGreen + "+" + ansiReset
	}
	return a.Symbol()
}

const rule = "─────────────────────────────────────────────────────────────────────────────"

// RenderText writes the plan as Terraform users expect to read it.
func RenderText(w io.Writer, p *Plan, opts TextOptions) error {
	pt := painter{opts.Color}
	var b strings.Builder

	if len(p.Drift) > 0 {
		renderDrift(&b, p, pt)
	}
	if p.RefreshOnly {
		if len(p.Drift) == 0 {
			b.WriteString(pt.paint(ansiBold, "No changes.") + pt.paint(ansiBold, " Your infrastructure still matches the configuration.") + "\n\n")
			b.WriteString("rayform has checked that the real hosts match what rayform last applied.\n")
		} else {
			b.WriteString("This is a refresh-only plan, so rayform will not take any actions to undo\nthese. Run \"rayform apply\" to put the hosts back as configured.\n")
		}
		renderFindings(&b, p.Findings, pt)
		_, err := io.WriteString(w, b.String())
		return err
	}

	if !p.HasChanges() && len(p.Errors()) > 0 {
		b.WriteString(pt.paint(ansiBold+ansiRed, "Planning failed.") + " rayform found problems that apply would run into;\nthey are listed below, each with its fix.\n")
		renderFindings(&b, p.Findings, pt)
		_, err := io.WriteString(w, b.String())
		return err
	}
	if !p.HasChanges() {
		b.WriteString(pt.paint(ansiBold, "No changes.") + pt.paint(ansiBold, " Your infrastructure matches the configuration.") + "\n\n")
		b.WriteString("rayform has compared the real hosts against your configuration and found no\ndifferences, so no changes are needed.\n")
	} else {
		b.WriteString("rayform used the observed state of your hosts to generate the following\nexecution plan. Resource actions are indicated with the following symbols:\n")
		for _, a := range p.actionsPresent() {
			fmt.Fprintf(&b, "%s %s\n", pt.symbol(a), a.description())
		}
		b.WriteString("\nrayform will perform the following actions:\n")
		for _, rc := range p.Changes {
			if rc.Action == NoOp {
				continue
			}
			b.WriteString("\n")
			renderChange(&b, rc, pt)
		}
		c := p.Counts()
		fmt.Fprintf(&b, "\n%s %d to add, %d to change, %d to destroy.\n", pt.paint(ansiBold, "Plan:"), c.Add, c.Change, c.Destroy)
	}
	if p.HasChanges() {
		renderOutputs(&b, p, pt)
	}
	renderFindings(&b, p.Findings, pt)
	if opts.SavedTo != "" && p.HasChanges() {
		fmt.Fprintf(&b, "\n%s\n\nSaved the plan to: %s\n\nTo perform exactly these actions, run the following command to apply:\n    rayform apply %q\n", rule, opts.SavedTo, opts.SavedTo)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func renderDrift(b *strings.Builder, p *Plan, pt painter) {
	b.WriteString("\n" + pt.paint(ansiBold, "Note: Objects have changed outside of rayform") + "\n\n")
	b.WriteString("rayform detected the following changes made outside of rayform since the\nlast \"rayform apply\" which may have affected this plan:\n")
	for _, d := range p.Drift {
		fmt.Fprintf(b, "\n  %s\n", pt.paint(ansiBold, "# "+d.Address+" has changed"))
		if d.Host != "" || d.Summary != "" {
			fmt.Fprintf(b, "  # %s\n", strings.TrimSpace(strings.Join(nonEmpty(hostPrefix(d.Host), d.Summary), " ")))
		}
		if len(d.Attrs) == 0 {
			continue
		}
		a := ParseAddress(d.Address)
		typ, name := a.Type, a.Instance()
		fmt.Fprintf(b, "%s resource %q %q {\n", pt.symbol(Update), typ, name)
		renderAttrs(b, Update, d.Attrs, pt)
		b.WriteString("    }\n")
	}
	if !p.RefreshOnly {
		b.WriteString("\nUnless you have made equivalent changes to your configuration, the following\nplan includes actions to undo or respond to these changes.\n")
	}
	b.WriteString("\n" + rule + "\n\n")
}

func hostPrefix(h string) string {
	if h == "" {
		return ""
	}
	return "on " + h + ":"
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func renderChange(b *strings.Builder, rc ResourceChange, pt painter) {
	var verb string
	switch rc.Action {
	case Create:
		verb = "will be created"
	case Update:
		verb = "will be updated in-place"
	case Replace:
		verb = "must be replaced"
	case Delete:
		verb = "will be destroyed"
	}
	fmt.Fprintf(b, "  %s\n", pt.paint(ansiBold, "# "+rc.Address+" "+verb))
	for _, r := range rc.Reasons {
		fmt.Fprintf(b, "  # (%s)\n", r)
	}
	typ, name := rc.Type, rc.Name
	if typ == "" {
		a := ParseAddress(rc.Address)
		typ, name = a.Type, a.Instance()
	}
	fmt.Fprintf(b, "%s resource %q %q {\n", pt.symbol(rc.Action), typ, name)
	renderAttrs(b, rc.Action, rc.Attrs, pt)
	b.WriteString("    }\n")
}

// renderAttrs writes attribute lines, aligned, hiding unchanged ones for
// updates and replaces. Names are printed as given: a drift attribute's name
// may be a traversal such as node_ip["gpu[\"h1\"]"], not a key to quote.
func renderAttrs(b *strings.Builder, action Action, attrs []AttrChange, pt painter) {
	var shown []AttrChange
	var names []string
	hidden := 0
	for _, a := range attrs {
		if a.Before.IsNull() && a.After.IsNull() || action == Create && a.After.IsNull() || action == Delete && a.Before.IsNull() {
			// Not set: nothing to create or destroy, nothing to count.
			continue
		}
		show := action == Create || action == Delete || a.Changed()
		if !show {
			hidden++
			continue
		}
		shown = append(shown, a)
		names = append(names, a.Name)
	}
	names = alignLabels(names)
	for i, a := range shown {
		renderAttr(b, action, a, names[i], pt)
	}
	if hidden > 0 {
		fmt.Fprintf(b, "        # (%d unchanged %s hidden)\n", hidden, plural(hidden, "attribute"))
	}
}

// renderAttr writes one attribute line; name is already padded to the column.
func renderAttr(b *strings.Builder, action Action, a AttrChange, name string, pt painter) {
	suffix := ""
	if a.ForcesReplacement && action == Replace {
		suffix = pt.paint(ansiRed, " # forces replacement")
	}
	const indent = "      "
	switch {
	case action == Create || (a.Before.IsNull() && !a.After.IsNull()):
		fmt.Fprintf(b, "%s%s %s = %s%s\n", indent, markPaint("+", pt), name, formatValue(a.After, a.Sensitive, indent+"  ", "+", pt), suffix)
	case action == Delete || (!a.Before.IsNull() && a.After.IsNull()):
		fmt.Fprintf(b, "%s%s %s = %s -> null%s\n", indent, markPaint("-", pt), name, formatValue(a.Before, a.Sensitive, indent+"  ", "-", pt), suffix)
	default:
		fmt.Fprintf(b, "%s%s %s = %s%s\n", indent, markPaint("~", pt), name, formatChange(a, indent+"  ", pt), suffix)
	}
}

// formatChange renders "before -> after" for scalars and an element diff for
// collections.
func formatChange(a AttrChange, indent string, pt painter) string {
	if a.Sensitive {
		return "(sensitive value)"
	}
	return formatDiff(a.Before, a.After, indent, pt)
}

// formatDiff renders a changed value: an element diff when both sides are
// maps/objects or both sequences (recursing into changed elements, as
// Terraform does for nested maps), else "before -> after".
func formatDiff(before, after cty.Value, indent string, pt painter) string {
	if before.IsMarked() || after.IsMarked() {
		// A marked collection cannot be iterated, and must not be shown.
		return "(sensitive value)"
	}
	if before.IsKnown() && after.IsKnown() && !before.IsNull() && !after.IsNull() {
		bt, at := before.Type(), after.Type()
		if (bt.IsMapType() || bt.IsObjectType()) && (at.IsMapType() || at.IsObjectType()) {
			return formatMapDiff(before, after, indent, pt)
		}
		if isSeq(bt) && isSeq(at) {
			return formatListDiff(before, after, indent, pt)
		}
	}
	return formatValue(before, false, indent, " ", pt) + " -> " + formatValue(after, false, indent, " ", pt)
}

func isSeq(t cty.Type) bool { return t.IsListType() || t.IsTupleType() || t.IsSetType() }

func formatMapDiff(before, after cty.Value, indent string, pt painter) string {
	bm, am := valueMap(before), valueMap(after)
	quoteAll := !before.Type().IsObjectType() || !after.Type().IsObjectType()
	keys := map[string]bool{}
	for k := range bm {
		keys[k] = true
	}
	for k := range am {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	labels := keyLabels(sorted, quoteAll)
	var b strings.Builder
	b.WriteString("{\n")
	hidden := 0
	for i, k := range sorted {
		bv, inB := bm[k]
		av, inA := am[k]
		key := labels[i]
		switch {
		case inB && !inA:
			fmt.Fprintf(&b, "%s  %s %s = %s -> null\n", indent, pt.paint(ansiRed, "-"), key, formatValue(bv, false, indent+"    ", "-", pt))
		case !inB && inA:
			fmt.Fprintf(&b, "%s  %s %s = %s\n", indent, pt.paint(ansiGreen, "+"), key, formatValue(av, false, indent+"    ", "+", pt))
		case !bv.RawEquals(av):
			fmt.Fprintf(&b, "%s  %s %s = %s\n", indent, pt.paint(ansiYellow, "~"), key, formatDiff(bv, av, indent+"    ", pt))
		default:
			hidden++
		}
	}
	if hidden > 0 {
		fmt.Fprintf(&b, "%s    # (%d unchanged %s hidden)\n", indent, hidden, plural(hidden, "element"))
	}
	b.WriteString(indent + "}")
	return b.String()
}

func formatListDiff(before, after cty.Value, indent string, pt painter) string {
	bl, al := valueList(before), valueList(after)
	inAfter := map[string]bool{}
	for _, v := range al {
		inAfter[formatValue(v, false, "", " ", painter{})] = true
	}
	inBefore := map[string]bool{}
	for _, v := range bl {
		inBefore[formatValue(v, false, "", " ", painter{})] = true
	}
	var b strings.Builder
	b.WriteString("[\n")
	for _, v := range bl {
		s := formatValue(v, false, indent+"    ", " ", pt)
		if !inAfter[formatValue(v, false, "", " ", painter{})] {
			fmt.Fprintf(&b, "%s  %s %s,\n", indent, pt.paint(ansiRed, "-"), s)
		} else {
			fmt.Fprintf(&b, "%s    %s,\n", indent, s)
		}
	}
	for _, v := range al {
		if !inBefore[formatValue(v, false, "", " ", painter{})] {
			fmt.Fprintf(&b, "%s  %s %s,\n", indent, pt.paint(ansiGreen, "+"), formatValue(v, false, indent+"    ", " ", pt))
		}
	}
	b.WriteString(indent + "]")
	return b.String()
}

func valueMap(v cty.Value) map[string]cty.Value {
	out := map[string]cty.Value{}
	if v.IsNull() || !v.IsKnown() {
		return out
	}
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		out[k.AsString()] = ev
	}
	return out
}

func valueList(v cty.Value) []cty.Value {
	var out []cty.Value
	if v.IsNull() || !v.IsKnown() {
		return out
	}
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		out = append(out, ev)
	}
	return out
}

// FormatValue renders a value as HCL would write it, on one line where it is
// a scalar and one element a line where it is a collection; sensitive values
// (any mark) are "(sensitive value)", unknown ones "(known after apply)". It
// is the one rendering of values: rayform output, apply's Outputs and the
// plan's attributes all use it.
func FormatValue(v cty.Value) string { return formatValue(v, false, "", " ", painter{}) }

// formatValue renders a value; collections go multi-line with each element
// prefixed by mark ("+", "-" or " ").
func formatValue(v cty.Value, sensitive bool, indent, mark string, pt painter) string {
	switch {
	case sensitive || v.IsMarked():
		return "(sensitive value)"
	case !v.IsKnown():
		return "(known after apply)"
	case v.IsNull():
		return "null"
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return quote(v.AsString())
	case t == cty.Number:
		return v.AsBigFloat().Text('f', -1)
	case t == cty.Bool:
		if v.True() {
			return "true"
		}
		return "false"
	case t.IsMapType() || t.IsObjectType():
		m := valueMap(v)
		if len(m) == 0 {
			return "{}"
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		labels := keyLabels(keys, t.IsMapType())
		var b strings.Builder
		b.WriteString("{\n")
		for i, k := range keys {
			fmt.Fprintf(&b, "%s  %s %s = %s\n", indent, markPaint(mark, pt), labels[i], formatValue(m[k], false, indent+"    ", mark, pt))
		}
		b.WriteString(indent + "}")
		return b.String()
	case isSeq(t):
		l := valueList(v)
		if len(l) == 0 {
			return "[]"
		}
		var b strings.Builder
		b.WriteString("[\n")
		for _, e := range l {
			fmt.Fprintf(&b, "%s  %s %s,\n", indent, markPaint(mark, pt), formatValue(e, false, indent+"    ", mark, pt))
		}
		b.WriteString(indent + "]")
		return b.String()
	}
	return v.GoString()
}

func markPaint(mark string, pt painter) string {
	switch mark {
	case "+":
		return pt.paint(ansiGreen, "+")
	case "-":
		return pt.paint(ansiRed, "-")
	case "~":
		return pt.paint(ansiYellow, "~")
	}
	return mark
}

// keyLabels escapes keys as Terraform prints them and pads them to one
// column. A map's keys are always quoted; an object's attribute names are
// quoted only when they are not HCL identifiers (quoteAll false).
func keyLabels(keys []string, quoteAll bool) []string {
	labels := make([]string, len(keys))
	for i, k := range keys {
		if quoteAll {
			labels[i] = quote(k)
		} else {
			labels[i] = attrName(k)
		}
	}
	return alignLabels(labels)
}

// attrName is an attribute name as Terraform prints it: bare when it is an
// HCL identifier, otherwise quoted ("node[\"spark1\"]", "a b", "").
func attrName(name string) string {
	if hclsyntax.ValidIdentifier(name) {
		return name
	}
	return quote(name)
}

// quote writes s as an HCL quoted string: Go's escapes, and the template
// sequences doubled so that HCL reads back the same string.
func quote(s string) string {
	return strings.NewReplacer("${", "$${", "%{", "%%{").Replace(strconv.Quote(s))
}

// alignLabels pads every label to the widest of them, so the "=" after them
// line up. The width is measured on exactly the strings that are printed, in
// runes as fmt's %-*s pads, so the padding is never negative.
func alignLabels(labels []string) []string {
	width := 0
	for _, l := range labels {
		width = max(width, utf8.RuneCountInString(l))
	}
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = padRight(l, width)
	}
	return out
}

// padRight pads s with spaces to width runes; it never shortens s.
func padRight(s string, width int) string {
	if n := width - utf8.RuneCountInString(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}

func renderOutputs(b *strings.Builder, p *Plan, pt painter) {
	var shown []OutputChange
	for _, o := range p.Outputs {
		if o.Changes() {
			shown = append(shown, o)
		}
	}
	if len(shown) == 0 {
		return
	}
	b.WriteString("\nChanges to Outputs:\n")
	names := make([]string, len(shown))
	for i, o := range shown {
		names[i] = o.Name
	}
	names = alignLabels(names)
	for i, o := range shown {
		switch o.Action {
		case Update:
			v := formatValue(o.Value, o.Sensitive, "    ", "~", pt)
			if o.Before != cty.NilVal {
				v = formatChange(AttrChange{Before: o.Before, After: o.Value, Sensitive: o.Sensitive}, "    ", pt)
			}
			fmt.Fprintf(b, "  %s %s = %s\n", pt.paint(ansiYellow, "~"), names[i], v)
		case Delete:
			fmt.Fprintf(b, "  %s %s = %s -> null\n", pt.paint(ansiRed, "-"), names[i], formatValue(o.Value, o.Sensitive, "    ", "-", pt))
		default:
			fmt.Fprintf(b, "  %s %s = %s\n", pt.paint(ansiGreen, "+"), names[i], formatValue(o.Value, o.Sensitive, "    ", "+", pt))
		}
	}
}

// renderFindings writes findings as Terraform writes diagnostics: boxed,
// red for errors and yellow for warnings.
func renderFindings(b *strings.Builder, findings []Finding, pt painter) {
	for _, f := range findings {
		style, label := ansiRed, "Error: "
		if f.Severity == Warning {
			style, label = ansiYellow, "Warning: "
		}
		bar := pt.paint(style, "│")
		fmt.Fprintf(b, "\n%s\n", pt.paint(style, "╷"))
		fmt.Fprintf(b, "%s %s%s\n", bar, pt.paint(ansiBold+style, label), pt.paint(ansiBold, f.Summary))
		where := strings.Join(nonEmpty(withPrefix("with ", f.Address), withPrefix("on host ", f.Host), withPrefix("at ", f.At)), ", ")
		if where != "" {
			fmt.Fprintf(b, "%s\n%s   %s\n", bar, bar, where)
		}
		if f.Detail != "" {
			fmt.Fprintf(b, "%s\n", bar)
			for _, line := range strings.Split(strings.TrimRight(f.Detail, "\n"), "\n") {
				fmt.Fprintf(b, "%s %s\n", bar, line)
			}
		}
		if f.Fix != "" {
			fmt.Fprintf(b, "%s\n", bar)
			for i, line := range strings.Split(strings.TrimRight(f.Fix, "\n"), "\n") {
				if i == 0 {
					line = "Fix: " + line
				}
				fmt.Fprintf(b, "%s %s\n", bar, line)
			}
		}
		fmt.Fprintf(b, "%s\n", pt.paint(style, "╵"))
	}
}

func withPrefix(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// Plural is noun for one, noun+"s" for any other count (for the CLI's
// own sentences).
func Plural(n int, noun string) string { return plural(n, noun) }

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
