package run

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"sort"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/planfile"
)

// Current gathers what a saved plan commits to: rayform's version, the
// configuration's files and variables, the state's lineage and serial,
// and the hosts' fingerprints.
func (r *Runner) Current(obs *Observation) planfile.Current {
	cur := planfile.Current{
		RayformVersion: r.Version,
		ConfigFiles:    map[string][]byte{},
		Variables:      map[string]json.RawMessage{},
		Sensitive:      map[string]json.RawMessage{},
		StateLineage:   r.State.Lineage,
		StateSerial:    r.State.Serial,
		Observed:       HostFingerprints(r.Kinds, obs.Facts),
	}
	lang := r.Config
	for name, f := range lang.Files {
		rel, err := filepath.Rel(r.Dir, name)
		if err != nil {
			rel = name
		}
		cur.ConfigFiles[rel] = f.Bytes
	}
	for name, v := range lang.Variables {
		if v.Value == cty.NilVal || !v.Value.IsWhollyKnown() || v.Value.IsNull() {
			continue
		}
		b, err := ctyjson.Marshal(v.Value, v.Value.Type())
		if err != nil {
			continue
		}
		if v.Sensitive {
			cur.Sensitive[name] = b
		} else {
			cur.Variables[name] = b
		}
	}
	cur.ObservedFingerprint = planfile.Fingerprint(cur.Observed)
	return cur
}

// Planned is what a saved plan records of p and the run's options.
func (r *Runner) Planned(p *plan.Plan) planfile.Planned {
	c := p.Counts()
	out := planfile.Planned{Targets: append([]string{}, r.Options.Targets...), Replace: append([]string(nil), r.Options.Replace...),
		Summary: planfile.Summary{Add: c.Add, Change: c.Change, Destroy: c.Destroy}}
	for _, ch := range p.Changes {
		if ch.Action != plan.NoOp {
			out.Changes = append(out.Changes, planfile.Change{Addr: ch.Address, Action: string(ch.Action)})
		}
	}
	sort.Slice(out.Changes, func(i, j int) bool { return out.Changes[i].Addr < out.Changes[j].Addr })
	return out
}

// SavePlan writes obs's plan to path, with its text and -json renderings
// for show.
func (r *Runner) SavePlan(obs *Observation, path string, destroy bool) error {
	pl := r.Planned(obs.Result.Plan)
	pl.Destroy = destroy
	var txt, js bytes.Buffer
	if err := plan.RenderText(&txt, obs.Result.Plan, plan.TextOptions{}); err != nil {
		return err
	}
	if err := plan.RenderJSON(&js, obs.Result.Plan, plan.JSONOptions{Version: r.Version}); err != nil {
		return err
	}
	pl.Rendered = txt.String()
	for _, line := range bytes.Split(bytes.TrimSpace(js.Bytes()), []byte("\n")) {
		if len(line) > 0 {
			pl.RenderedJSON = append(pl.RenderedJSON, json.RawMessage(line))
		}
	}
	f, err := planfile.New(r.Current(obs), pl, planfile.Options{})
	if err != nil {
		return err
	}
	return planfile.Write(path, f)
}
