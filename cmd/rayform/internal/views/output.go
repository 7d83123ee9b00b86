package views

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/plan"
)

// Output shows the outputs: as HCL values for a person (OutputHuman), as
// Terraform's output -json document (OutputJSON), or one value as is for
// a script (OutputRaw, -raw).
type Output interface {
	// All shows every output.
	All(outs map[string]*config.Output) error
	// One shows output name's value, known.
	One(name string, o *config.Output) error
	// NotFound says the configuration has no output name; suggestion is
	// the name meant, perhaps ("" for none).
	NotFound(name, suggestion string)
	// Unknown says output name's value is not known.
	Unknown(name string)
	// NoOutputs warns that there is nothing to print: the state records
	// no applied resource (stateFile), or the configuration declares no
	// output (stateFile "").
	NoOutputs(stateFile string)
	Error(err error)
	Diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics)
}

// NewOutput is the output view vt (or raw, -raw) chooses.
func NewOutput(vt arguments.ViewType, raw bool, v *View) Output {
	switch {
	case raw:
		return &OutputRaw{outputBase{v}}
	case vt == arguments.ViewJSON:
		return &OutputJSON{outputBase{v}}
	}
	return &OutputHuman{outputBase{v}}
}

// outputBase is what every output view shows alike: the errors and
// warnings, on stderr.
type outputBase struct{ *View }

// NotFound says the configuration has no output name.
func (v outputBase) NotFound(name, suggestion string) {
	hint := ""
	if suggestion != "" {
		hint = fmt.Sprintf(" Did you mean %q?", suggestion)
	}
	fmt.Fprintf(v.stderr, "Error: Output %q not found\n\nThe configuration has no output named %q.%s\n", name, name, hint)
}

// Unknown says output name's value is not known.
func (v outputBase) Unknown(name string) {
	v.Error(fmt.Errorf("output %q is not known: it depends on a variable without a value (set it with -var, -var-file or RAYFORM_VAR_NAME) or on a fabric address no apply has recorded", name))
}

// NoOutputs warns that there is nothing to print.
func (v outputBase) NoOutputs(stateFile string) {
	if stateFile != "" {
		fmt.Fprintf(v.stderr, "Warning: No outputs found\n\nThe state (%s) records no applied resource: run rayform apply first.\n", stateFile)
		return
	}
	fmt.Fprintln(v.stderr, "Warning: No outputs found\n\nThe configuration declares no output block.")
}

// sortedNames are the outputs' names, sorted.
func sortedNames(outs map[string]*config.Output) []string {
	names := make([]string, 0, len(outs))
	for n := range outs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// OutputHuman prints NAME = VALUE lines, a sensitive value masked.
type OutputHuman struct{ outputBase }

// All prints every output.
func (v *OutputHuman) All(outs map[string]*config.Output) error {
	for _, n := range sortedNames(outs) {
		o := outs[n]
		switch {
		case o.Sensitive:
			fmt.Fprintf(v.stdout, "%s = <sensitive>\n", n)
		default:
			fmt.Fprintf(v.stdout, "%s = %s\n", n, plan.FormatValue(o.Value))
		}
	}
	return nil
}

// One prints one value.
func (v *OutputHuman) One(_ string, o *config.Output) error {
	fmt.Fprintln(v.stdout, plan.FormatValue(o.Value))
	return nil
}

// OutputJSON prints Terraform's output -json shapes.
type OutputJSON struct{ outputBase }

// All prints the document of every known output.
func (v *OutputJSON) All(outs map[string]*config.Output) error {
	doc := map[string]jsonOutput{}
	for _, n := range sortedNames(outs) {
		val := outs[n].Value
		if !val.IsWhollyKnown() {
			continue
		}
		ty, err := ctyjson.MarshalType(val.Type())
		if err != nil {
			return fmt.Errorf("output %q: %w", n, err)
		}
		js, err := ctyjson.Marshal(val, val.Type())
		if err != nil {
			return fmt.Errorf("output %q: %w", n, err)
		}
		doc[n] = jsonOutput{Sensitive: outs[n].Sensitive, Type: ty, Value: js}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(v.stdout, "%s\n", b)
	return nil
}

// One prints one value as JSON.
func (v *OutputJSON) One(_ string, o *config.Output) error {
	b, err := ctyjson.Marshal(o.Value, o.Value.Type())
	if err != nil {
		return err
	}
	fmt.Fprintf(v.stdout, "%s\n", b)
	return nil
}

// OutputRaw prints one value as is, without quotes (-raw needs a name:
// All is never asked of it).
type OutputRaw struct{ outputBase }

// All refuses: -raw needs a name.
func (*OutputRaw) All(map[string]*config.Output) error {
	return errors.New("-raw needs an output name: rayform output -raw NAME")
}

// One prints one value as is.
func (v *OutputRaw) One(name string, o *config.Output) error {
	val := o.Value
	switch {
	case val.IsNull():
		return fmt.Errorf("output %q is null", name)
	case val.Type() == cty.String:
		fmt.Fprint(v.stdout, val.AsString())
	case val.Type() == cty.Number:
		fmt.Fprint(v.stdout, val.AsBigFloat().Text('f', -1))
	case val.Type() == cty.Bool:
		fmt.Fprint(v.stdout, val.True())
	default:
		return fmt.Errorf("Unsupported value for raw output\n\nThe -raw option only supports strings, numbers and bools; output %q is %s. Use -json instead.", name, val.Type().FriendlyName())
	}
	return nil
}

// jsonOutput is one output in `output -json`, Terraform's shape.
type jsonOutput struct {
	Sensitive bool            `json:"sensitive"`
	Type      json.RawMessage `json:"type"`
	Value     json.RawMessage `json:"value"`
}
