package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
)

// runOutput prints the outputs as the last apply left them, without
// contacting any host: the configuration is evaluated with the facts the
// state recorded at that apply (each node's fabric address). Variables
// without a value are unknown, as in validate, so an output that does not
// depend on a secret needs none.
func runOutput(_ context.Context, c *cli, args []string) int {
	fs := newFlagSet(c, "output", "output [options] [NAME]\n\n  Print the outputs (or the output NAME) as the last apply left them, from the\n  configuration and the state, without contacting any host.")
	var vars varFlags
	vars.register(fs)
	asJSON := fs.Bool("json", false, "print the outputs as JSON: {\"NAME\": {\"sensitive\": BOOL, \"type\": TYPE, \"value\": VALUE}}, or NAME's value")
	raw := fs.Bool("raw", false, "print NAME's value as is, without quotes (strings, numbers and bools only), for shell scripts")
	stateFile := fs.String("state", state.DefaultPath, "local state `FILE`, relative to the configuration directory")
	pos, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 1 {
		fmt.Fprintf(c.stderr, "Error: output takes at most one argument, an output's name (got %q)\n", pos)
		return exitError
	}
	name := ""
	if len(pos) > 0 {
		name = pos[0]
	}
	if *raw && name == "" {
		fmt.Fprintln(c.stderr, "Error: -raw needs an output name: rayform output -raw NAME")
		return exitError
	}
	if *raw && *asJSON {
		fmt.Fprintln(c.stderr, "Error: -raw and -json cannot be combined")
		return exitError
	}
	view := newOutputView(c, *asJSON, *raw)
	outs, code := appliedOutputs(c, &vars, *stateFile)
	if outs == nil {
		return code
	}
	if name == "" {
		if err := view.All(outs); err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		return exitOK
	}
	o, ok := outs[name]
	if !ok {
		names := make([]string, 0, len(outs))
		for n := range outs {
			names = append(names, n)
		}
		sort.Strings(names)
		hint := ""
		if s := config.Suggest(name, names); s != "" {
			hint = fmt.Sprintf(" Did you mean %q?", s)
		}
		fmt.Fprintf(c.stderr, "Error: Output %q not found\n\nThe configuration has no output named %q.%s\n", name, name, hint)
		return exitError
	}
	if !o.Value.IsWhollyKnown() {
		fmt.Fprintf(c.stderr, "Error: output %q is not known: %s\n", name, unknownWhy())
		return exitError
	}
	if err := view.One(name, o); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	return exitOK
}

// outputView shows the outputs: as HCL values for a person (outputText),
// as Terraform's output -json document (outputJSON), or one value as is
// for a script (outputRaw, -raw), chosen once per command.
type outputView interface {
	// All shows every output.
	All(outs map[string]*config.Output) error
	// One shows output name's value, known.
	One(name string, o *config.Output) error
}

func newOutputView(c *cli, asJSON, raw bool) outputView {
	switch {
	case raw:
		return outputRaw{w: c.stdout}
	case asJSON:
		return outputJSON{w: c.stdout}
	}
	return outputText{w: c.stdout}
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

// outputText prints NAME = VALUE lines, a sensitive value masked.
type outputText struct{ w io.Writer }

func (v outputText) All(outs map[string]*config.Output) error {
	for _, n := range sortedNames(outs) {
		o := outs[n]
		switch {
		case o.Sensitive:
			fmt.Fprintf(v.w, "%s = <sensitive>\n", n)
		default:
			fmt.Fprintf(v.w, "%s = %s\n", n, plan.FormatValue(o.Value))
		}
	}
	return nil
}

func (v outputText) One(_ string, o *config.Output) error {
	fmt.Fprintln(v.w, plan.FormatValue(o.Value))
	return nil
}

// outputJSON prints Terraform's output -json shapes.
type outputJSON struct{ w io.Writer }

func (v outputJSON) All(outs map[string]*config.Output) error {
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
	fmt.Fprintf(v.w, "%s\n", b)
	return nil
}

func (v outputJSON) One(_ string, o *config.Output) error {
	b, err := ctyjson.Marshal(o.Value, o.Value.Type())
	if err != nil {
		return err
	}
	fmt.Fprintf(v.w, "%s\n", b)
	return nil
}

// outputRaw prints one value as is, without quotes (-raw needs a name:
// All is never asked of it).
type outputRaw struct{ w io.Writer }

func (outputRaw) All(map[string]*config.Output) error {
	return errors.New("-raw needs an output name: rayform output -raw NAME")
}

func (v outputRaw) One(name string, o *config.Output) error {
	val := o.Value
	switch {
	case val.IsNull():
		return fmt.Errorf("output %q is null", name)
	case val.Type() == cty.String:
		fmt.Fprint(v.w, val.AsString())
	case val.Type() == cty.Number:
		fmt.Fprint(v.w, val.AsBigFloat().Text('f', -1))
	case val.Type() == cty.Bool:
		fmt.Fprint(v.w, val.True())
	default:
		return fmt.Errorf("Unsupported value for raw output\n\nThe -raw option only supports strings, numbers and bools; output %q is %s. Use -json instead.", name, val.Type().FriendlyName())
	}
	return nil
}

func unknownWhy() string {
	return "it depends on a variable without a value (set it with -var, -var-file or RAYFORM_VAR_NAME) or on a fabric address no apply has recorded"
}

// appliedOutputs evaluates the configuration's outputs with the fabric
// addresses the state recorded. It returns nil and the exit code when
// there is nothing to print or an error (printed).
func appliedOutputs(c *cli, vars *varFlags, stateFile string) (map[string]*config.Output, int) {
	st, err := state.Load(c.statePath(stateFile))
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return nil, exitError
	}
	if len(st.Addresses()) == 0 {
		fmt.Fprintf(c.stderr, "Warning: No outputs found\n\nThe state (%s) records no applied resource: run rayform apply first.\n", stateFile)
		return nil, exitOK
	}
	cfg, diags := loadConfigChecking(c, vars)
	if diags.HasErrors() {
		writeDiagnostics(c, c.stderr, cfg.Files, diags)
		return nil, exitError
	}
	loaded := cfg
	cfg, diags = kind.WithFacts(loaded, kind.Facts{FabricAddrs: recordedFabric(st)})
	if diags.HasErrors() {
		writeDiagnostics(c, c.stderr, loaded.Files, diags)
		return nil, exitError
	}
	if len(cfg.Outputs) == 0 {
		fmt.Fprintln(c.stderr, "Warning: No outputs found\n\nThe configuration declares no output block.")
		return nil, exitOK
	}
	return cfg.Outputs, exitOK
}

// recordedFabric is each node's fabric address as the last apply recorded
// it in the state.
func recordedFabric(st *state.State) map[string]netip.Addr {
	out := map[string]netip.Addr{}
	for _, addr := range st.Addresses() {
		r, _ := st.Get(addr)
		for _, h := range r.Hosts {
			if a, err := netip.ParseAddr(h.FabricAddress); err == nil {
				out[h.Node] = a
			}
		}
	}
	return out
}

// jsonOutput is one output in `output -json`, Terraform's shape.
type jsonOutput struct {
	Sensitive bool            `json:"sensitive"`
	Type      json.RawMessage `json:"type"`
	Value     json.RawMessage `json:"value"`
}
