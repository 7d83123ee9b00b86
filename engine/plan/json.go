package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// UIVersion is the version of rayform's machine-readable event stream.
// A minor bump adds fields or event types; a major bump breaks consumers,
// which should reject a major version they do not know.
const UIVersion = "1.0"

// JSONOptions control the NDJSON rendering.
type JSONOptions struct {
	Version string           // rayform's version, for the version event
	Now     func() time.Time // clock for @timestamp; time.Now when nil
}

// Event is one line of the NDJSON stream. Every line has @level, @message,
// @module, @timestamp and type, plus the payload of its type.
type Event map[string]any

// NewEvent builds an event with the common fields filled in.
func NewEvent(now time.Time, level, typ, message string) Event {
	return Event{
		"@level":     level,
		"@message":   message,
		"@module":    "rayform.ui",
		"@timestamp": now.UTC().Format(time.RFC3339Nano),
		"type":       typ,
	}
}

// VersionEvent is the first line of every stream.
func VersionEvent(now time.Time, version string) Event {
	e := NewEvent(now, "info", "version", "rayform "+version)
	e["rayform"] = version
	e["ui"] = UIVersion
	return e
}

// WriteEvent writes one event as a line of JSON.
func WriteEvent(w io.Writer, e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding %v event: %w", e["type"], err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// RenderJSON writes the plan as NDJSON events: version, resource_drift,
// planned_change, diagnostic (findings), outputs and change_summary.
func RenderJSON(w io.Writer, p *Plan, opts JSONOptions) error {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	events := []Event{VersionEvent(now(), opts.Version)}
	events = append(events, driftEvents(p, now)...)
	if !p.RefreshOnly {
		events = append(events, changeEvents(p, now)...)
	}
	events = append(events, findingEvents(p, now)...)
	if len(p.Outputs) > 0 {
		events = append(events, outputsEvent(p, now))
	}
	events = append(events, summaryEvent(p, now))
	for _, e := range events {
		if err := WriteEvent(w, e); err != nil {
			return err
		}
	}
	return nil
}

// driftEvents is one resource_drift event per drift found on the hosts.
func driftEvents(p *Plan, now func() time.Time) []Event {
	var events []Event
	for _, d := range p.Drift {
		e := NewEvent(now(), "warn", "resource_drift", fmt.Sprintf("%s: Drift detected (%s)", d.Address, d.Summary))
		a := ParseAddress(d.Address)
		typ, name := a.Type, a.Instance()
		e["change"] = map[string]any{
			"resource": resourceJSON(d.Address, typ, name),
			"action":   string(Update),
			"host":     d.Host,
			"summary":  d.Summary,
			"attrs":    attrsJSON(d.Attrs),
		}
		events = append(events, e)
	}
	return events
}

// changeEvents is one planned_change event per resource with an action.
func changeEvents(p *Plan, now func() time.Time) []Event {
	var events []Event
	for _, rc := range p.Changes {
		if rc.Action == NoOp {
			continue
		}
		typ, name := rc.Type, rc.Name
		if typ == "" {
			a := ParseAddress(rc.Address)
			typ, name = a.Type, a.Instance()
		}
		e := NewEvent(now(), "info", "planned_change", fmt.Sprintf("%s: Plan to %s", rc.Address, rc.Action))
		change := map[string]any{
			"resource": resourceJSON(rc.Address, typ, name),
			"action":   string(rc.Action),
			"attrs":    attrsJSON(rc.Attrs),
		}
		if len(rc.Reasons) > 0 {
			change["reasons"] = rc.Reasons
		}
		if len(rc.Hosts) > 0 {
			change["hosts"] = rc.Hosts
		}
		e["change"] = change
		events = append(events, e)
	}
	return events
}

// findingEvents is one diagnostic event per finding.
func findingEvents(p *Plan, now func() time.Time) []Event {
	var events []Event
	for _, f := range p.Findings {
		level := "error"
		if f.Severity == Warning {
			level = "warn"
		}
		e := NewEvent(now(), level, "diagnostic", fmt.Sprintf("%s: %s", capitalize(string(f.Severity)), f.Summary))
		e["diagnostic"] = f
		events = append(events, e)
	}
	return events
}

// outputsEvent is the outputs event: each output's action, and its value
// unless sensitive.
func outputsEvent(p *Plan, now func() time.Time) Event {
	outs := map[string]any{}
	for _, o := range p.Outputs {
		action := o.Action
		if action == "" {
			action = Create
		}
		entry := map[string]any{"sensitive": o.Sensitive, "action": string(action)}
		if !o.Sensitive {
			entry["value"] = jsonValue(o.Value)
		}
		if !o.Value.IsWhollyKnown() {
			entry["unknown"] = true
		}
		outs[o.Name] = entry
	}
	e := NewEvent(now(), "info", "outputs", "Outputs: "+fmt.Sprint(len(outs)))
	e["outputs"] = outs
	return e
}

// summaryEvent is the change_summary event: the counts, and the health a
// drift cron alerts on.
func summaryEvent(p *Plan, now func() time.Time) Event {
	c := p.Counts()
	op := "plan"
	msg := fmt.Sprintf("Plan: %d to add, %d to change, %d to destroy.", c.Add, c.Change, c.Destroy)
	if p.RefreshOnly {
		op = "refresh-only"
		msg = fmt.Sprintf("Drift: %d resources changed outside rayform.", len(p.Drift))
	}
	sum := NewEvent(now(), "info", "change_summary", msg)
	sum["changes"] = map[string]any{"add": c.Add, "change": c.Change, "remove": c.Destroy, "operation": op}
	// What a drift cron alerts on, in one place.
	unreachable := append([]string{}, p.Unreachable...)
	sum["health"] = map[string]any{"drift": len(p.Drift), "errors": len(p.Errors()), "unreachable": len(unreachable), "unreachable_hosts": unreachable}
	return sum
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func resourceJSON(addr, typ, name string) map[string]any {
	return map[string]any{"addr": addr, "resource_type": typ, "resource_name": name}
}

func attrsJSON(attrs []AttrChange) []map[string]any {
	out := []map[string]any{}
	for _, a := range attrs {
		if !a.Changed() {
			continue
		}
		m := map[string]any{"name": a.Name}
		if a.Sensitive {
			m["sensitive"] = true
		} else {
			var bs, as any
			m["before"], bs = maskedJSON(a.Before)
			m["after"], as = maskedJSON(a.After)
			if bs != nil {
				m["before_sensitive"] = bs
			}
			if as != nil {
				m["after_sensitive"] = as
			}
			if !a.After.IsWhollyKnown() {
				m["after_unknown"] = true
			}
		}
		if a.ForcesReplacement {
			m["forces_replacement"] = true
		}
		out = append(out, m)
	}
	return out
}

// maskedJSON converts a value to plain JSON with every marked (sensitive)
// part replaced by null, and returns beside it where those parts are, as
// Terraform's before_sensitive/after_sensitive do: true for a masked value,
// a map or list of the same shape for a collection holding some, nil when
// nothing is masked.
func maskedJSON(v cty.Value) (any, any) {
	if v.IsMarked() {
		return nil, true
	}
	if !v.ContainsMarked() {
		return jsonValue(v), nil
	}
	t := v.Type()
	switch {
	case t.IsMapType() || t.IsObjectType():
		vals, sens := map[string]any{}, map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			val, s := maskedJSON(ev)
			vals[k.AsString()] = val
			if s != nil {
				sens[k.AsString()] = s
			}
		}
		return vals, sens
	case isSeq(t):
		var vals, sens []any
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			val, s := maskedJSON(ev)
			vals = append(vals, val)
			if s == nil {
				s = false
			}
			sens = append(sens, s)
		}
		return vals, sens
	}
	return nil, true
}

// jsonValue converts a cty value to plain JSON; unknown and marked values
// become null (their flags travel separately).
func jsonValue(v cty.Value) any {
	if v.IsMarked() || !v.IsWhollyKnown() || v.IsNull() {
		return nil
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil
	}
	return json.RawMessage(b)
}
