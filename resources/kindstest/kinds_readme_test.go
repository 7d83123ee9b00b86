package kindstest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/hostplan"
)

// readmePath is the README, from this package's directory.
const readmePath = "../../README.md"

// TestReadmeReference checks that the README's reference of every resource
// kind (its heading and argument table) and the table of exported
// attributes are what the kinds' schemas generate; -update rewrites those
// sections of README.md. A new argument is documented by its schema row.
func TestReadmeReference(t *testing.T) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	out := readme
	for _, sec := range readmeSections() {
		var ok bool
		out, ok = replaceSection(out, sec.name, sec.body)
		if !ok {
			t.Errorf("README.md has no section %q: add the lines %q and %q where it belongs, then run go test ./resources/kindstest -run TestReadmeReference -update",
				sec.name, beginMarker(sec.name), endMarker(sec.name))
		}
	}
	if out == readme {
		return
	}
	if updatingGolden() {
		if err := os.WriteFile(readmePath, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gotLines, wantLines := strings.Split(readme, "\n"), strings.Split(out, "\n")
	for i := range min(len(gotLines), len(wantLines)) {
		if gotLines[i] != wantLines[i] {
			t.Errorf("README.md line %d differs from the kinds' schemas (run go test ./resources/kindstest -run TestReadmeReference -update):\n got: %s\nwant: %s", i+1, gotLines[i], wantLines[i])
			return
		}
	}
	t.Errorf("README.md differs in length from what the kinds' schemas generate (run go test ./resources/kindstest -run TestReadmeReference -update)")
}

// section is a generated part of the README.
type section struct{ name, body string }

// readmeSections generates one section per kind and the exported
// attributes table.
func readmeSections() []section {
	var out []section
	exports := "| Block | Attributes |\n|---|---|\n"
	for _, k := range Schemas() {
		out = append(out, section{"kind " + k.Type, kindReference(k)})
		exports += fmt.Sprintf("| `%s` | %s |\n", k.Type, exportsDoc(k))
	}
	return append(out, section{"kind exports", exports})
}

func beginMarker(name string) string {
	return "<!-- BEGIN: " + name + " (generated from resources.Kinds(); go test ./resources/kindstest -run TestReadmeReference -update) -->"
}

func endMarker(name string) string { return "<!-- END: " + name + " -->" }

// replaceSection replaces the lines between the section's markers with
// body; false when the markers are missing.
func replaceSection(s, name, body string) (string, bool) {
	begin, end := beginMarker(name), endMarker(name)
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		return s, false
	}
	return s[:i] + begin + "\n" + body + s[j:], true
}

// kindReference is a kind's heading and argument table.
func kindReference(k config.Kind) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### `%s \"NAME\"` — %s\n\n", k.Type, k.Summary)
	b.WriteString("| Argument | Type | Default | Meaning |\n|---|---|---|---|\n")
	for _, a := range k.Args {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", a.Name, typeDoc(a), defaultDoc(a), a.Description)
	}
	if k.ForEach {
		fmt.Fprintf(&b, "| `for_each` | map, or set of strings | none | one %s per key; `each.key` and `each.value` are available in the block's arguments. Must be known from the configuration alone |\n", k.Type)
	}
	return b.String()
}

// typeDoc is an argument's type as the README shows it.
func typeDoc(a config.Arg) string {
	switch {
	case a.TypeDoc != "":
		return a.TypeDoc
	case a.Ref != "" && a.ValueType().IsListType():
		return a.Ref + "s"
	case a.Ref != "":
		return a.Ref
	}
	return typeexpr.TypeString(a.Type)
}

// defaultDoc is an argument's default as the README shows it.
func defaultDoc(a config.Arg) string {
	switch t := a.ValueType(); {
	case a.Required:
		return "required"
	case a.DefaultDoc != "":
		return a.DefaultDoc
	case a.Default != cty.NilVal:
		return "`" + literal(a.Default) + "`"
	case t.IsListType():
		return "`[]`"
	case t.IsMapType():
		return "`{}`"
	}
	return "none"
}

// literal writes a default as HCL.
func literal(v cty.Value) string {
	switch v.Type() {
	case cty.String:
		return strconv.Quote(v.AsString())
	case cty.Bool:
		return strconv.FormatBool(v.True())
	case cty.Number:
		return v.AsBigFloat().Text('f', -1)
	}
	return plan.FormatValue(v)
}

// exportsDoc lists a kind's exported attributes with their notes.
func exportsDoc(k config.Kind) string {
	parts := []string{fmt.Sprintf("`id` (`\"%s.NAME\"`)", k.Type), "`name`"}
	if k.ForEach {
		parts = append(parts, "`key` (for_each key or null)")
	}
	for _, a := range k.Args {
		switch {
		case !a.Exported:
		case a.ExportDoc != "":
			parts = append(parts, fmt.Sprintf("`%s` (%s)", a.Name, a.ExportDoc))
		default:
			parts = append(parts, "`"+a.Name+"`")
		}
	}
	for _, a := range k.Computed {
		switch {
		case a.Doc == "":
			parts = append(parts, "`"+a.Name+"`")
		case strings.HasPrefix(a.Doc, "("):
			parts = append(parts, fmt.Sprintf("`%s` %s", a.Name, a.Doc))
		default:
			parts = append(parts, fmt.Sprintf("`%s` — %s", a.Name, a.Doc))
		}
	}
	return strings.Join(parts, ", ")
}

// TestReadmeDocumentsPinnedEnv checks that the README's table of what the
// network pins, after the network kind's reference, names every
// environment variable rayform pins in the Ray containers (hostplan.PinnedEnv) and
// Ray's --node-ip-address.
func TestReadmeDocumentsPinnedEnv(t *testing.T) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), endMarker("kind "+KindNetwork))
	if !ok {
		t.Fatal("README.md has no network reference")
	}
	pins, _, _ := strings.Cut(after, "<!-- BEGIN: ")
	needles := []string{"`ray start --node-ip-address`"}
	for k := range hostplan.PinnedEnv() {
		needles = append(needles, "`"+k+"`")
	}
	for _, n := range needles {
		if !strings.Contains(pins, n) {
			t.Errorf("README.md's table of what a network pins (after the network reference) does not document %s", n)
		}
	}
}
