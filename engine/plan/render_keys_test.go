package plan

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/zclconf/go-cty/cty"
)

// keysNeedingQuotes are map keys of the shapes rayform produces and worse:
// for_each node addresses (node["spark1"]), quotes, spaces, dots, a dash, a
// plain identifier and the empty key.
func keysNeedingQuotes() map[string]cty.Value {
	return map[string]cty.Value{
		"":                str("empty"),
		"a b":             str("space"),
		"a-b":             str("dash"),
		"a.b":             str("dot"),
		`node["spark1"]`:  str("10.0.0.1"),
		`node["spark12"]`: str("10.0.0.12"),
		"plain":           str("ident"),
		`say "hi"`:        str("quote"),
	}
}

func withKeys(m map[string]cty.Value, set map[string]cty.Value, del ...string) map[string]cty.Value {
	out := map[string]cty.Value{}
	for k, v := range m {
		out[k] = v
	}
	for k, v := range set {
		out[k] = v
	}
	for _, k := range del {
		delete(out, k)
	}
	return out
}

func fabric(ib0 string) cty.Value {
	return cty.MapVal(map[string]cty.Value{
		`h100["h1"]`: cty.MapVal(map[string]cty.Value{"ib0": str(ib0), `mlx5_0 "port 1"`: str("up")}),
		"h2":         cty.MapVal(map[string]cty.Value{"": str("x")}),
	})
}

// colourTags makes coloured output readable in expectations.
var colourTags = strings.NewReplacer(ansiGreen, "<g>", ansiRed, "<r>", ansiYellow, "<y>", ansiBold, "<b>", ansiReset, "</>")

func renderOne(rc ResourceChange, color bool) string {
	var b strings.Builder
	renderChange(&b, rc, painter{color})
	if color {
		return colourTags.Replace(b.String())
	}
	return b.String()
}

// TestRenderMapKeys renders map and object values whose keys need quoting.
// Terraform quotes every map key (strconv-style, inner quotes escaped:
// "node[\"spark1\"]") and an object's attribute names only when they are not
// identifiers; the "=" of sibling keys line up, measured on the printed key.
// Before 1f29b3e the width came from the unquoted key, which panicked with
// "strings: negative Repeat count" for node["spark1"] (for_each nodes).
func TestRenderMapKeys(t *testing.T) {
	keys := keysNeedingQuotes()
	m := cty.MapVal(keys)
	obj := cty.ObjectVal(keys)
	mNull := cty.NullVal(m.Type())
	after := withKeys(keys, map[string]cty.Value{`node["spark12"]`: str("10.0.0.13"), `new "k"`: str("added")}, `say "hi"`)
	ra := func(action Action, attrs ...AttrChange) ResourceChange {
		return ResourceChange{Address: "ray_cluster.main", Action: action, Attrs: attrs}
	}
	cases := []struct {
		name  string
		rc    ResourceChange
		color bool
		want  string
	}{
		{name: "map create", rc: ra(Create, AttrChange{Name: "node_ips", Before: mNull, After: m}, AttrChange{Name: "port", Before: cty.NullVal(cty.Number), After: cty.NumberIntVal(6379)}), want: `  # ray_cluster.main will be created
  + resource "ray_cluster" "main" {
      + node_ips = {
          + ""                  = "empty"
          + "a b"               = "space"
          + "a-b"               = "dash"
          + "a.b"               = "dot"
          + "node[\"spark1\"]"  = "10.0.0.1"
          + "node[\"spark12\"]" = "10.0.0.12"
          + "plain"             = "ident"
          + "say \"hi\""        = "quote"
        }
      + port     = 6379
    }
`},
		{name: "map update", rc: ra(Update, AttrChange{Name: "node_ips", Before: m, After: cty.MapVal(after)}), want: `  # ray_cluster.main will be updated in-place
  ~ resource "ray_cluster" "main" {
      ~ node_ips = {
          + "new \"k\""         = "added"
          ~ "node[\"spark12\"]" = "10.0.0.12" -> "10.0.0.13"
          - "say \"hi\""        = "quote" -> null
            # (6 unchanged elements hidden)
        }
    }
`},
		{name: "map delete", rc: ra(Delete, AttrChange{Name: "node_ips", Before: m, After: mNull}), want: `  # ray_cluster.main will be destroyed
  - resource "ray_cluster" "main" {
      - node_ips = {
          - ""                  = "empty"
          - "a b"               = "space"
          - "a-b"               = "dash"
          - "a.b"               = "dot"
          - "node[\"spark1\"]"  = "10.0.0.1"
          - "node[\"spark12\"]" = "10.0.0.12"
          - "plain"             = "ident"
          - "say \"hi\""        = "quote"
        } -> null
    }
`},
		{name: "object create", rc: ra(Create, AttrChange{Name: "labels", Before: cty.NullVal(obj.Type()), After: obj}), want: `  # ray_cluster.main will be created
  + resource "ray_cluster" "main" {
      + labels = {
          + ""                  = "empty"
          + "a b"               = "space"
          + a-b                 = "dash"
          + "a.b"               = "dot"
          + "node[\"spark1\"]"  = "10.0.0.1"
          + "node[\"spark12\"]" = "10.0.0.12"
          + plain               = "ident"
          + "say \"hi\""        = "quote"
        }
    }
`},
		{name: "object update", rc: ra(Update, AttrChange{Name: "labels", Before: obj, After: cty.ObjectVal(after)}), want: `  # ray_cluster.main will be updated in-place
  ~ resource "ray_cluster" "main" {
      ~ labels = {
          + "new \"k\""         = "added"
          ~ "node[\"spark12\"]" = "10.0.0.12" -> "10.0.0.13"
          - "say \"hi\""        = "quote" -> null
            # (6 unchanged elements hidden)
        }
    }
`},
		{name: "object delete", rc: ra(Delete, AttrChange{Name: "labels", Before: obj, After: cty.NullVal(obj.Type())}), want: `  # ray_cluster.main will be destroyed
  - resource "ray_cluster" "main" {
      - labels = {
          - ""                  = "empty"
          - "a b"               = "space"
          - a-b                 = "dash"
          - "a.b"               = "dot"
          - "node[\"spark1\"]"  = "10.0.0.1"
          - "node[\"spark12\"]" = "10.0.0.12"
          - plain               = "ident"
          - "say \"hi\""        = "quote"
        } -> null
    }
`},
		{name: "nested create", rc: ra(Create, AttrChange{Name: "fabric", Before: cty.NullVal(fabric("").Type()), After: fabric("10.200.0.1")}), want: `  # ray_cluster.main will be created
  + resource "ray_cluster" "main" {
      + fabric = {
          + "h100[\"h1\"]" = {
              + "ib0"               = "10.200.0.1"
              + "mlx5_0 \"port 1\"" = "up"
            }
          + "h2"           = {
              + "" = "x"
            }
        }
    }
`},
		{name: "nested update", rc: ra(Update, AttrChange{Name: "fabric", Before: fabric("10.200.0.1"), After: fabric("10.200.0.9")}), want: `  # ray_cluster.main will be updated in-place
  ~ resource "ray_cluster" "main" {
      ~ fabric = {
          ~ "h100[\"h1\"]" = {
              ~ "ib0"               = "10.200.0.1" -> "10.200.0.9"
                # (1 unchanged element hidden)
            }
            # (1 unchanged element hidden)
        }
    }
`},
		{name: "nested delete", rc: ra(Delete, AttrChange{Name: "fabric", Before: fabric("10.200.0.1"), After: cty.NullVal(fabric("").Type())}), want: `  # ray_cluster.main will be destroyed
  - resource "ray_cluster" "main" {
      - fabric = {
          - "h100[\"h1\"]" = {
              - "ib0"               = "10.200.0.1"
              - "mlx5_0 \"port 1\"" = "up"
            }
          - "h2"           = {
              - "" = "x"
            }
        } -> null
    }
`},
		// Columns are runes, as fmt pads: "é" is two bytes but one column.
		{name: "non-ascii key", rc: ra(Create, AttrChange{Name: "env", Before: cty.NullVal(cty.Map(cty.String)), After: cty.MapVal(map[string]cty.Value{"ab": str("1"), "é": str("2")})}), want: `  # ray_cluster.main will be created
  + resource "ray_cluster" "main" {
      + env = {
          + "ab" = "1"
          + "é"  = "2"
        }
    }
`},
		// A marked (sensitive) map cannot be iterated; it must render, not panic.
		{name: "marked map update", rc: ra(Update, AttrChange{Name: "env", Before: m.Mark("sensitive"), After: cty.MapVal(after)}), want: `  # ray_cluster.main will be updated in-place
  ~ resource "ray_cluster" "main" {
      ~ env = (sensitive value)
    }
`},
		// The attribute marks are coloured like the element marks, with
		// nothing of the escape sequence left over.
		{name: "colour create", color: true, rc: ra(Create, AttrChange{Name: "node_ips", Before: mNull, After: cty.MapVal(map[string]cty.Value{`node["spark1"]`: str("10.0.0.1")})}), want: `  <b># ray_cluster.main will be created</>
<g>  +</> resource "ray_cluster" "main" {
      <g>+</> node_ips = {
          <g>+</> "node[\"spark1\"]" = "10.0.0.1"
        }
    }
`},
		{name: "colour update", color: true, rc: ra(Update, AttrChange{Name: "node_ips", Before: cty.MapVal(map[string]cty.Value{`node["spark1"]`: str("10.0.0.1")}), After: cty.MapVal(map[string]cty.Value{`node["spark1"]`: str("10.0.0.2")})}), want: `  <b># ray_cluster.main will be updated in-place</>
<y>  ~</> resource "ray_cluster" "main" {
      <y>~</> node_ips = {
          <y>~</> "node[\"spark1\"]" = "10.0.0.1" -> "10.0.0.2"
        }
    }
`},
		{name: "colour delete", color: true, rc: ra(Delete, AttrChange{Name: "node_ips", Before: cty.MapVal(map[string]cty.Value{`node["spark1"]`: str("10.0.0.1")}), After: mNull}), want: `  <b># ray_cluster.main will be destroyed</>
<r>  -</> resource "ray_cluster" "main" {
      <r>-</> node_ips = {
          <r>-</> "node[\"spark1\"]" = "10.0.0.1"
        } -> null
    }
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := renderOne(tc.rc, tc.color)
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestRenderOutputsAndAttrNamesAligned covers the other padded columns:
// attribute names (printed verbatim, even a drift traversal) and outputs.
func TestRenderOutputsAndAttrNamesAligned(t *testing.T) {
	p := &Plan{
		Drift: []Drift{{Address: "ray_cluster.main", Attrs: []AttrChange{
			{Name: `node_ip["gpu[\"h1\"]"]`, Before: str("192.168.0.10"), After: str("10.1.230.10")},
			{Name: "port", Before: cty.NumberIntVal(1), After: cty.NumberIntVal(2)},
		}}},
		Changes: []ResourceChange{{Address: "ray_cluster.main", Action: Create, Attrs: []AttrChange{{Name: "port", Before: cty.NullVal(cty.Number), After: cty.NumberIntVal(6379)}}}},
		Outputs: []OutputChange{{Name: "endpoint", Value: str("http://x")}, {Name: "fabric_ips", Value: cty.ObjectVal(map[string]cty.Value{`h100["h1"]`: str("10.200.0.1"), "head": str("10.200.0.1")})}},
	}
	var b strings.Builder
	if err := RenderText(&b, p, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\n      ~ node_ip[\"gpu[\\\"h1\\\"]\"] = \"192.168.0.10\" -> \"10.1.230.10\"\n      ~ port                   = 1 -> 2\n",
		"\n  + endpoint   = \"http://x\"\n  + fabric_ips = {\n      + \"h100[\\\"h1\\\"]\" = \"10.200.0.1\"\n      + head           = \"10.200.0.1\"\n    }\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks\n%s\ngot:\n%s", want, b.String())
		}
	}
}

// checkAligned asserts that in a rendered flat map every key line is
// <indent><mark> <quoted key><spaces> = <value>, that the "=" of all lines is
// in one column, and that the widest key has no padding. It parses the key
// with strconv.QuotedPrefix, independently of the renderer.
func checkAligned(t *testing.T, out string, n int) {
	t.Helper()
	lines := strings.Split(out, "\n")
	var cols []int
	minPad := -1
	for _, line := range lines {
		rest, ok := strings.CutPrefix(strings.TrimLeft(line, " "), "+ ")
		if !ok {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		key, err := strconv.QuotedPrefix(rest)
		if err != nil {
			continue // the attribute line ("+ m = {")
		}
		after := rest[len(key):]
		pad := len(after) - len(strings.TrimLeft(after, " "))
		if !strings.HasPrefix(after[pad:], "= ") || pad < 1 {
			t.Fatalf("line %q: key %s not followed by padding and \"= \"", line, key)
		}
		cols = append(cols, indent+2+utf8.RuneCountInString(key)+pad)
		if minPad < 0 || pad < minPad {
			minPad = pad
		}
	}
	if len(cols) != n {
		t.Fatalf("found %d key lines, want %d:\n%s", len(cols), n, out)
	}
	for _, c := range cols {
		if c != cols[0] {
			t.Fatalf("\"=\" not aligned (columns %v):\n%s", cols, out)
		}
	}
	if minPad != 1 {
		t.Fatalf("widest key padded by %d, want 1 space before \"=\":\n%s", minPad, out)
	}
}

// FuzzRenderMapKeys: any keys render without panicking, quoted and aligned.
// `go test` runs the seeds; `go test -fuzz FuzzRenderMapKeys` explores.
func FuzzRenderMapKeys(f *testing.F) {
	f.Add(`node["spark1"]`, "x", "")
	f.Add(`"`, `\`, "\x00\xff")
	f.Add("é", "世界", "a b.c")
	f.Add("\n\t", `a\"b`, "[[[")
	f.Fuzz(func(t *testing.T, k1, k2, k3 string) {
		m := cty.MapVal(map[string]cty.Value{k1: str("1"), k2: str("2"), k3: str("3")})
		n := m.LengthInt() // cty may merge keys equal after normalisation
		var b strings.Builder
		renderAttrs(&b, Create, []AttrChange{{Name: "m", Before: cty.NullVal(m.Type()), After: m}}, painter{})
		checkAligned(t, b.String(), n)
		o := cty.ObjectVal(map[string]cty.Value{k1: str("1"), k2: str("2"), k3: str("3")})
		for _, a := range []AttrChange{
			{Name: "o", Before: cty.NullVal(o.Type()), After: o},
			{Name: "o", Before: o, After: cty.ObjectVal(map[string]cty.Value{k1: str("9")})},
			{Name: "m", Before: m, After: cty.MapVal(map[string]cty.Value{k2 + "x": str("9")})},
		} {
			for _, action := range []Action{Create, Update, Delete, Replace} {
				b.Reset()
				renderAttrs(&b, action, []AttrChange{a}, painter{true})
			}
		}
	})
}

// TestRenderRandomValuesNeverPanic renders random nested maps, objects,
// lists and scalars with awkward keys, in every action and diff shape.
func TestRenderRandomValuesNeverPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	runes := []string{"a", "Z", "_", "-", ".", " ", `"`, `\`, "[", "]", "=", "\n", "\t", "\x00", "\xff", "é", "世", "0"}
	key := func() string {
		var s strings.Builder
		for range r.IntN(6) {
			s.WriteString(runes[r.IntN(len(runes))])
		}
		return s.String()
	}
	var value func(depth int) cty.Value
	value = func(depth int) cty.Value {
		switch n := r.IntN(8); {
		case depth > 2 || n < 2:
			return str(key())
		case n == 2:
			return cty.NumberIntVal(r.Int64N(1000) - 500)
		case n == 3:
			return cty.UnknownVal(cty.String)
		case n == 4:
			vs := []cty.Value{}
			for range r.IntN(3) {
				vs = append(vs, value(depth+1))
			}
			return cty.TupleVal(vs)
		case n == 5:
			m := map[string]cty.Value{}
			for range r.IntN(4) {
				m[key()] = str(key())
			}
			if len(m) == 0 {
				return cty.MapValEmpty(cty.String)
			}
			return cty.MapVal(m)
		default:
			m := map[string]cty.Value{}
			for range r.IntN(4) {
				m[key()] = value(depth + 1)
			}
			return cty.ObjectVal(m)
		}
	}
	for range 2000 {
		before, after := value(0), value(0)
		if r.IntN(4) == 0 {
			before = before.Mark("sensitive")
		}
		p := &Plan{
			Changes: []ResourceChange{{Address: "x.y", Action: []Action{Create, Update, Delete, Replace}[r.IntN(4)],
				Attrs: []AttrChange{{Name: key(), Before: before, After: after}, {Name: key(), Before: cty.NullVal(cty.DynamicPseudoType), After: after}}}},
			Drift:   []Drift{{Address: "x.y", Attrs: []AttrChange{{Name: key(), Before: before, After: after}}}},
			Outputs: []OutputChange{{Name: key(), Value: after}, {Name: key(), Value: before}},
		}
		for _, color := range []bool{false, true} {
			var b strings.Builder
			func() {
				defer func() {
					if e := recover(); e != nil {
						t.Fatalf("panic %v rendering before=%#v after=%#v", e, before, after)
					}
				}()
				if err := RenderText(&b, p, TextOptions{Color: color}); err != nil {
					t.Fatal(err)
				}
			}()
		}
	}
}
