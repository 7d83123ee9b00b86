// Package plan holds what rayform intends to do: per resource an action with
// the attribute changes and reasons behind it, the drift found on the hosts,
// and the findings (problems that would make apply fail, with their fix).
// It is pure data plus renderers; computing a plan lives elsewhere.
package plan

import (
	"sort"

	"github.com/zclconf/go-cty/cty"
)

// Action is what apply will do to one resource.
type Action string

// Actions, in the vocabulary of Terraform.
const (
	NoOp    Action = "no-op"
	Create  Action = "create"
	Update  Action = "update"
	Replace Action = "replace" // delete, then create
	Delete  Action = "delete"
)

// Symbol is the three-column marker a rendered plan uses for the action.
func (a Action) Symbol() string {
	switch a {
	case Create:
		return "  +"
	case Update:
		return "  ~"
	case Replace:
		return "-/+"
	case Delete:
		return "  -"
	}
	return "   "
}

// description is the legend text for the action.
func (a Action) description() string {
	switch a {
	case Create:
		return "create"
	case Update:
		return "update in-place"
	case Replace:
		return "destroy and then create replacement"
	case Delete:
		return "destroy"
	}
	return ""
}

// AttrChange is one attribute of a resource, before and after. A null
// Before means the attribute is new; a null After means it goes away. An
// unknown After renders as "(known after apply)". Elements of a collection
// marked (cty marks) are sensitive one by one: they render as "(sensitive
// value)" while their siblings show, as Terraform masks map elements.
type AttrChange struct {
	Name   string    `json:"name"`
	Before cty.Value `json:"-"`
	After  cty.Value `json:"-"`
	// Sensitive values are never rendered, in text or JSON.
	Sensitive bool `json:"sensitive,omitempty"`
	// ForcesReplacement marks the attributes that turn an update into a replace.
	ForcesReplacement bool `json:"forces_replacement,omitempty"`
}

// Changed reports whether the attribute differs between before and after.
func (c AttrChange) Changed() bool {
	if !c.After.IsWhollyKnown() || !c.Before.IsWhollyKnown() {
		return true
	}
	if c.Before.IsNull() != c.After.IsNull() {
		return true
	}
	if c.Before.IsNull() {
		return false
	}
	if !c.Before.Type().Equals(c.After.Type()) {
		return true
	}
	return !c.Before.RawEquals(c.After)
}

// ResourceChange is the plan for one resource.
type ResourceChange struct {
	Address string   `json:"addr"` // e.g. "ray_cluster.main"
	Type    string   `json:"resource_type"`
	Name    string   `json:"resource_name"`
	Action  Action   `json:"action"`
	Hosts   []string `json:"hosts,omitempty"`
	// Attrs lists the resource's attributes; unchanged ones are counted, not
	// shown, when rendered (except for creates and deletes).
	Attrs []AttrChange `json:"-"`
	// Reasons say why the action is needed, in words, e.g.
	// "ray head registered as 10.1.230.180; want 192.168.200.12".
	Reasons []string `json:"reasons,omitempty"`
}

// Drift is a difference between what rayform last applied and what a host
// runs now, made outside rayform.
type Drift struct {
	Address string       `json:"addr"`
	Host    string       `json:"host,omitempty"`
	Summary string       `json:"summary"`
	Attrs   []AttrChange `json:"-"`
}

// Severity of a finding.
type Severity string

// Severities.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Finding is a problem seen while planning: something that would make apply
// fail (an error) or that is likely wrong (a warning). Fix says what to do.
type Finding struct {
	Severity Severity `json:"severity"`
	Address  string   `json:"addr,omitempty"`
	Host     string   `json:"host,omitempty"`
	// At is the file:line of the configuration the finding is about, when
	// it is about one attribute.
	At      string `json:"at,omitempty"`
	Summary string `json:"summary"`
	Detail  string `json:"detail,omitempty"`
	Fix     string `json:"fix,omitempty"`
}

// OutputChange is one root output's value and what applying the plan does
// to it.
type OutputChange struct {
	Name string `json:"name"`
	// Action is Create for a new value, Update for a changed one, Delete
	// for a value that goes away and NoOp for one that stays as it is (not
	// shown as a change). "" is taken as Create.
	Action Action `json:"action,omitempty"`
	// Before is the value before, when known (an Update's); cty.NilVal
	// otherwise.
	Before    cty.Value `json:"-"`
	Value     cty.Value `json:"-"`
	Sensitive bool      `json:"sensitive,omitempty"`
}

// Changes reports whether applying the plan changes the output.
func (o OutputChange) Changes() bool { return o.Action != NoOp }

// Plan is the whole plan.
type Plan struct {
	Changes  []ResourceChange
	Drift    []Drift
	Findings []Finding
	Outputs  []OutputChange
	// RefreshOnly plans report drift and take no action.
	RefreshOnly bool
	// Unreachable lists, sorted, the hosts that could not be observed
	// (each also has an error finding).
	Unreachable []string
}

// Counts is the summary line's arithmetic, Terraform's: a replace counts as
// one to add and one to destroy.
type Counts struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"remove"`
}

// Counts tallies the plan's actions.
func (p *Plan) Counts() Counts {
	var c Counts
	for _, rc := range p.Changes {
		switch rc.Action {
		case Create:
			c.Add++
		case Update:
			c.Change++
		case Replace:
			c.Add++
			c.Destroy++
		case Delete:
			c.Destroy++
		}
	}
	return c
}

// HasChanges reports whether applying the plan would change anything.
func (p *Plan) HasChanges() bool {
	if p.RefreshOnly {
		return len(p.Drift) > 0
	}
	for _, rc := range p.Changes {
		if rc.Action != NoOp {
			return true
		}
	}
	return false
}

// Errors returns the findings of severity Error.
func (p *Plan) Errors() []Finding {
	var out []Finding
	for _, f := range p.Findings {
		if f.Severity == Error {
			out = append(out, f)
		}
	}
	return out
}

// actionsPresent lists the distinct non-no-op actions, in legend order.
func (p *Plan) actionsPresent() []Action {
	seen := map[Action]bool{}
	for _, rc := range p.Changes {
		seen[rc.Action] = true
	}
	var out []Action
	for _, a := range []Action{Create, Update, Delete, Replace} {
		if seen[a] {
			out = append(out, a)
		}
	}
	return out
}

// SortChanges orders changes by address, so renderings are deterministic.
func (p *Plan) SortChanges() {
	sort.SliceStable(p.Changes, func(i, j int) bool { return p.Changes[i].Address < p.Changes[j].Address })
	sort.SliceStable(p.Drift, func(i, j int) bool { return p.Drift[i].Address < p.Drift[j].Address })
}
