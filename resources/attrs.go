package resources

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

// attr describes one attribute of a kind as plans show it and records keep
// it: its type, whether a change to it forces the resource's replacement,
// whether other blocks can refer to it, whether it may hold a sensitive
// value, and what it means.
type attr struct {
	name string
	typ  cty.Type
	// forcesReplacement: a change restarts the resource's main process
	// (the head container, the serve process).
	forcesReplacement bool
	// exported: other blocks and outputs can refer to it.
	exported bool
	// maySensitive: its elements may come from sensitive variables; such
	// values are recorded and compared only as digests.
	maySensitive bool
	// sensitive: always recorded and compared as a digest, and masked.
	sensitive   bool
	description string
}

// argAttrs are the applied arguments of a block type's schema as plan
// attributes.
func argAttrs(kind string) []attr {
	var out []attr
	for _, a := range kindArgs(kind) {
		if a.Applied {
			out = append(out, attr{name: a.Name, typ: a.ValueType(), forcesReplacement: a.ForcesReplacement,
				exported: a.Exported, maySensitive: a.MaySensitive, sensitive: a.Sensitive, description: a.Description})
		}
	}
	return out
}

// argValues are the values of a block's applied arguments as decoded
// (config.Decl.Args): an empty collection is null (not set), and every
// string a sensitive variable gave is replaced by its digest, marked.
func argValues(kind string, d *config.Decl, key []byte) attrValues {
	out := attrValues{}
	for _, a := range argAttrs(kind) {
		v, ok := d.Args[a.name]
		if !ok || v.IsNull() || v.IsKnown() && v.CanIterateElements() && v.LengthInt() == 0 {
			out[a.name] = cty.NullVal(a.typ)
			continue
		}
		if a.maySensitive || a.sensitive {
			v, _ = cty.Transform(v, func(p cty.Path, ev cty.Value) (cty.Value, error) {
				if ev.Type() == cty.String && ev.IsKnown() && !ev.IsNull() && (a.sensitive || d.IsSensitive(config.FormatPath(a.name, p))) {
					return sensitiveString(key, ev.AsString()), nil
				}
				return ev, nil
			})
		}
		out[a.name] = v
	}
	return out
}

// attrValues are a resource's attribute values by name. Sensitive elements
// hold the digest of their value (see secretDigest), marked with
// config.Sensitive.
type attrValues map[string]cty.Value

// secretDigest is how a sensitive value is hashed wherever rayform records
// or compares one without keeping it: spec hashes, container labels, serve
// records, plans. It is the first 64 bits of an HMAC-SHA256 under key, the
// deployment's secret-digest key (Config.SecretKeys, kept 0600 on the
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
func secretDigest(key []byte, v string) string {
	if key == nil {
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:8])
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(v))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil)[:8])
}

// unkeyedDigests reports whether a sensitive value of v is an unkeyed
// digest (see secretDigest): v was recorded by an earlier rayform.
func (v attrValues) unkeyedDigests() bool {
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

// sensitiveString is the digest of a sensitive value under key, marked.
func sensitiveString(key []byte, v string) cty.Value {
	return cty.StringVal(secretDigest(key, v)).Mark(config.Sensitive)
}

// stringMap converts a map; an empty map is null (not set).
func stringMap(m map[string]string) cty.Value {
	if len(m) == 0 {
		return cty.NullVal(cty.Map(cty.String))
	}
	out := make(map[string]cty.Value, len(m))
	for k, v := range m {
		out[k] = cty.StringVal(v)
	}
	return cty.MapVal(out)
}

// knownRecord records the values that are wholly known (a value known only
// after observing the hosts is left out of the record).
func (v attrValues) knownRecord() observe.Record {
	known := attrValues{}
	for k, val := range v {
		if val.IsWhollyKnown() {
			known[k] = val
		}
	}
	return known.record()
}

// record encodes values as apply records them.
func (v attrValues) record() observe.Record {
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

// decodeAttrs reads recorded values back with the types of schema; an
// attribute absent from the record or unreadable is absent from the result.
func decodeAttrs(schema []attr, raw map[string]string, sensitive []string) attrValues {
	out := attrValues{}
	sens := map[string]bool{}
	for _, s := range sensitive {
		sens[s] = true
	}
	for _, a := range schema {
		text, ok := raw[a.name]
		if !ok {
			continue
		}
		v, err := ctyjson.Unmarshal([]byte(text), a.typ)
		if err != nil {
			continue
		}
		if len(sens) > 0 {
			v, _ = cty.Transform(v, func(p cty.Path, ev cty.Value) (cty.Value, error) {
				if sens[config.FormatPath(a.name, p)] {
					return ev.Mark(config.Sensitive), nil
				}
				return ev, nil
			})
		}
		out[a.name] = v
	}
	return out
}

// encodeRecordLabel is a record as a container label value: base64url of
// its JSON, so that docker ps's comma-joined label list stays parseable.
func encodeRecordLabel(rec observe.Record) string {
	b, _ := json.Marshal(rec)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeRecordLabel reads a label written by encodeRecordLabel.
func decodeRecordLabel(s string) (observe.Record, bool) {
	var rec observe.Record
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return observe.Record{}, false
	}
	return rec, true
}

// rawAttrs is a record's attributes as text, the form observe reports.
func rawAttrs(rec observe.Record) map[string]string {
	out := make(map[string]string, len(rec.Attrs))
	for k, v := range rec.Attrs {
		out[k] = string(v)
	}
	return out
}

// attrChanges lists schema's attributes from before to after. A name
// absent from before is null there (the resource is created); a name
// absent from after is left out.
func attrChanges(schema []attr, before, after attrValues) []plan.AttrChange {
	var out []plan.AttrChange
	for _, a := range schema {
		av, ok := after[a.name]
		if !ok {
			continue
		}
		bv, ok := before[a.name]
		if !ok {
			bv = cty.NullVal(av.Type())
		}
		out = append(out, plan.AttrChange{Name: a.name, Before: bv, After: av, ForcesReplacement: a.forcesReplacement})
	}
	return out
}

// changedPaths names what differs between before and after, down to map
// elements and object attributes (env["FOO"], node.interface); lists are
// named whole. Only attributes present on both sides are compared.
func changedPaths(schema []attr, before, after attrValues) []string {
	var out []string
	for _, a := range schema {
		bv, okB := before[a.name]
		av, okA := after[a.name]
		if !okB || !okA {
			continue
		}
		out = append(out, diffPaths(a.name, bv, av)...)
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
