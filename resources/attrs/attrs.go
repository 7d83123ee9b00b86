// Package attrs is how a resource kind's attributes are planned and
// recorded: their schema (Attr, from the kind's applied arguments), their
// values (Values) as a container label or a serve record keeps them, with
// every sensitive value kept only as its digest (SecretDigest), and the
// changes a plan shows between two records (Changes, ChangedPaths).
package attrs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
)

// Attr describes one attribute of a kind as plans show it and records keep
// it: its type, whether a change to it forces the resource's replacement,
// whether other blocks can refer to it, whether it may hold a sensitive
// value, and what it means.
type Attr struct {
	Name string
	Type cty.Type
	// ForcesReplacement: a change restarts the resource's main process
	// (the head container, the serve process).
	ForcesReplacement bool
	// Exported: other blocks and outputs can refer to it.
	Exported bool
	// MaySensitive: its elements may come from sensitive variables; such
	// values are recorded and compared only as digests.
	MaySensitive bool
	// Sensitive: always recorded and compared as a digest, and masked.
	Sensitive   bool
	Description string
}

// FromArgs are the applied arguments of a block type's schema (its
// config.Kind's Args) as plan attributes.
func FromArgs(args []config.Arg) []Attr {
	var out []Attr
	for _, a := range args {
		if a.Applied {
			out = append(out, Attr{Name: a.Name, Type: a.ValueType(), ForcesReplacement: a.ForcesReplacement,
				Exported: a.Exported, MaySensitive: a.MaySensitive, Sensitive: a.Sensitive, Description: a.Description})
		}
	}
	return out
}

// ArgValues are the values of a block's applied arguments (args, its
// kind's) as decoded (config.Decl.Args): an empty collection is null (not
// set), and every string a sensitive variable gave is replaced by its
// digest, marked.
func ArgValues(args []config.Arg, d *config.Decl, key []byte) Values {
	out := Values{}
	for _, a := range FromArgs(args) {
		v, ok := d.Args[a.Name]
		if !ok || v.IsNull() || v.IsKnown() && v.CanIterateElements() && v.LengthInt() == 0 {
			out[a.Name] = cty.NullVal(a.Type)
			continue
		}
		if a.MaySensitive || a.Sensitive {
			v, _ = cty.Transform(v, func(p cty.Path, ev cty.Value) (cty.Value, error) {
				if ev.Type() == cty.String && ev.IsKnown() && !ev.IsNull() && (a.Sensitive || d.IsSensitive(config.FormatPath(a.Name, p))) {
					return SensitiveString(key, ev.AsString()), nil
				}
				return ev, nil
			})
		}
		out[a.Name] = v
	}
	return out
}

// Values are a resource's attribute values by name. Sensitive elements
// hold the digest of their value (see SecretDigest), marked with
// config.Sensitive.
type Values map[string]cty.Value

// SecretDigest is how a sensitive value is hashed wherever rayform records
// or compares one without keeping it: spec hashes, container labels, serve
// records, plans. It is the first 64 bits of an HMAC-SHA256 under key, the
// deployment's secret-digest key (kind.Facts.SecretKeys, kept 0600 on the
// cluster's head: see engine/lock.AdvanceFence), so a digest seen in a
// label, a record, a command line or a log cannot be checked against a
// guess of the secret without the key.
//
// A nil key is the unkeyed digest of earlier versions, the first 64 bits of
// a plain SHA-256: what a plan computes before the key exists (the first
// apply makes it, under the lock, before it creates anything), and the
// form a container or serve made by an earlier version is recognised by
// (see ContainerSpec.Current), so an upgrade replaces nothing whose secret
// did not change.
func SecretDigest(key []byte, v string) string {
	if key == nil {
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:8])
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(v))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil)[:8])
}

// UnkeyedDigests reports whether a sensitive value of v is an unkeyed
// digest (see SecretDigest): v was recorded by an earlier rayform.
func (v Values) UnkeyedDigests() bool {
	for _, val := range v {
		unmarked, pvm := val.UnmarkDeepWithPaths()
		for _, pv := range pvm {
			if _, ok := pv.Marks[config.Sensitive]; !ok {
				continue
			}
			s, err := pv.Path.Apply(unmarked)
			if err == nil && s.Type() == cty.String && s.IsKnown() && !s.IsNull() && strings.HasPrefix(s.AsString(), "sha256:") {
				return true
			}
		}
	}
	return false
}

// SensitiveString is the digest of a sensitive value under key, marked.
func SensitiveString(key []byte, v string) cty.Value {
	return cty.StringVal(SecretDigest(key, v)).Mark(config.Sensitive)
}

// StringMap converts a map; an empty map is null (not set).
func StringMap(m map[string]string) cty.Value {
	if len(m) == 0 {
		return cty.NullVal(cty.Map(cty.String))
	}
	out := make(map[string]cty.Value, len(m))
	for k, v := range m {
		out[k] = cty.StringVal(v)
	}
	return cty.MapVal(out)
}

// KnownRecord records the values that are wholly known (a value known only
// after observing the hosts is left out of the record).
func (v Values) KnownRecord() observe.Record {
	known := Values{}
	for k, val := range v {
		if val.IsWhollyKnown() {
			known[k] = val
		}
	}
	return known.Record()
}

// Record encodes values as apply records them.
func (v Values) Record() observe.Record {
	rec := observe.Record{Attrs: map[string]json.RawMessage{}}
	for _, name := range slices.Sorted(maps.Keys(v)) {
		val, pvs := v[name].UnmarkDeepWithPaths()
		b, err := ctyjson.Marshal(val, val.Type())
		if err != nil {
			continue
		}
		rec.Attrs[name] = b
		for _, pv := range pvs {
			rec.Sensitive = append(rec.Sensitive, config.FormatPath(name, pv.Path))
		}
	}
	sort.Strings(rec.Sensitive)
	return rec
}

// Decode reads recorded values back with the types of schema; an
// attribute absent from the record or unreadable is absent from the result.
func Decode(schema []Attr, raw map[string]string, sensitive []string) Values {
	out := Values{}
	sens := map[string]bool{}
	for _, s := range sensitive {
		sens[s] = true
	}
	for _, a := range schema {
		text, ok := raw[a.Name]
		if !ok {
			continue
		}
		v, err := ctyjson.Unmarshal([]byte(text), a.Type)
		if err != nil {
			continue
		}
		if len(sens) > 0 {
			v, _ = cty.Transform(v, func(p cty.Path, ev cty.Value) (cty.Value, error) {
				if sens[config.FormatPath(a.Name, p)] {
					return ev.Mark(config.Sensitive), nil
				}
				return ev, nil
			})
		}
		out[a.Name] = v
	}
	return out
}

// EncodeRecordLabel is a record as a container label value: base64url of
// its JSON, so that docker ps's comma-joined label list stays parseable.
func EncodeRecordLabel(rec observe.Record) string {
	b, _ := json.Marshal(rec)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeRecordLabel reads a label written by EncodeRecordLabel.
func DecodeRecordLabel(s string) (observe.Record, bool) {
	var rec observe.Record
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return observe.Record{}, false
	}
	return rec, true
}

// Raw is a record's attributes as text, the form observe reports.
func Raw(rec observe.Record) map[string]string {
	out := make(map[string]string, len(rec.Attrs))
	for k, v := range rec.Attrs {
		out[k] = string(v)
	}
	return out
}

// Changes lists schema's attributes from before to after. A name
// absent from before is null there (the resource is created); a name
// absent from after is left out.
func Changes(schema []Attr, before, after Values) []plan.AttrChange {
	var out []plan.AttrChange
	for _, a := range schema {
		av, ok := after[a.Name]
		if !ok {
			continue
		}
		bv, ok := before[a.Name]
		if !ok {
			bv = cty.NullVal(av.Type())
		}
		out = append(out, plan.AttrChange{Name: a.Name, Before: bv, After: av, ForcesReplacement: a.ForcesReplacement})
	}
	return out
}

// ChangedPaths names what differs between before and after, down to map
// elements and object attributes (env["FOO"], node.interface); lists are
// named whole. Only attributes present on both sides are compared.
func ChangedPaths(schema []Attr, before, after Values) []string {
	var out []string
	for _, a := range schema {
		bv, okB := before[a.Name]
		av, okA := after[a.Name]
		if !okB || !okA {
			continue
		}
		out = append(out, diffPaths(a.Name, bv, av)...)
	}
	return out
}

func diffPaths(path string, b, a cty.Value) []string {
	if b.RawEquals(a) {
		return nil
	}
	if b.IsNull() || a.IsNull() || !b.IsKnown() || !a.IsKnown() || b.IsMarked() || a.IsMarked() {
		return []string{path}
	}
	t := a.Type()
	if !(t.IsMapType() || t.IsObjectType()) || !b.Type().Equals(t) {
		return []string{path}
	}
	bm, am := b.AsValueMap(), a.AsValueMap()
	keys := map[string]bool{}
	for k := range bm {
		keys[k] = true
	}
	for k := range am {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		sub := path + "[" + strconv.Quote(k) + "]"
		if t.IsObjectType() {
			sub = path + "." + k
		}
		bv, okB := bm[k]
		av, okA := am[k]
		switch {
		case !okB || !okA:
			out = append(out, sub)
		default:
			out = append(out, diffPaths(sub, bv, av)...)
		}
	}
	return out
}

// Exported names the attributes of schema that other blocks and outputs
// can refer to (kind.Traits.Exported).
func Exported(schema []Attr) map[string]bool {
	out := map[string]bool{}
	for _, a := range schema {
		if a.Exported {
			out[a.Name] = true
		}
	}
	return out
}

// Normalize gives values the exact form a record reads back as (numbers,
// empty collections), so that an unchanged attribute compares equal to its
// record. Values not wholly known stay as they are.
func Normalize(schema []Attr, v Values) Values {
	rec := v.KnownRecord()
	out := Decode(schema, Raw(rec), rec.Sensitive)
	for k, val := range v {
		if _, ok := out[k]; !ok {
			out[k] = val
		}
	}
	return out
}
