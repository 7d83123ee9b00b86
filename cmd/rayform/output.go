package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources"
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
	outs, code := appliedOutputs(c, &vars, *stateFile)
	if outs == nil {
		return code
	}
	if name == "" {
		return printAllOutputs(c, outs, *asJSON)
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
	switch {
	case *raw:
		v := o.Value
		switch {
		case v.IsNull():
			fmt.Fprintf(c.stderr, "Error: output %q is null\n", name)
			return exitError
		case v.Type() == cty.String:
			fmt.Fprint(c.stdout, v.AsString())
		case v.Type() == cty.Number:
			fmt.Fprint(c.stdout, v.AsBigFloat().Text('f', -1))
		case v.Type() == cty.Bool:
			fmt.Fprint(c.stdout, v.True())
		default:
			fmt.Fprintf(c.stderr, "Error: Unsupported value for raw output\n\nThe -raw option only supports strings, numbers and bools; output %q is %s. Use -json instead.\n", name, v.Type().FriendlyName())
			return exitError
		}
	case *asJSON:
		b, err := ctyjson.Marshal(o.Value, o.Value.Type())
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		fmt.Fprintf(c.stdout, "%s\n", b)
	default:
		fmt.Fprintln(c.stdout, plan.FormatValue(o.Value))
	}
	return exitOK
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
	cfg, diags = cfg.WithFacts(resources.Facts{FabricAddrs: recordedFabric(st)})
	if diags.HasErrors() {
		writeDiagnostics(c, c.stderr, cfg.Files, diags)
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

func printAllOutputs(c *cli, outs map[string]*config.Output, asJSON bool) int {
	names := make([]string, 0, len(outs))
	for n := range outs {
		names = append(names, n)
	}
	sort.Strings(names)
	if asJSON {
		doc := map[string]jsonOutput{}
		for _, n := range names {
			v := outs[n].Value
			if !v.IsWhollyKnown() {
				continue
			}
			ty, err := ctyjson.MarshalType(v.Type())
			if err != nil {
				fmt.Fprintf(c.stderr, "Error: output %q: %v\n", n, err)
				return exitError
			}
			val, err := ctyjson.Marshal(v, v.Type())
			if err != nil {
				fmt.Fprintf(c.stderr, "Error: output %q: %v\n", n, err)
				return exitError
			}
			doc[n] = jsonOutput{Sensitive: outs[n].Sensitive, Type: ty, Value: val}
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			fmt.Fprintf(c.stderr, "Error: %v\n", err)
			return exitError
		}
		fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK
	}
	for _, n := range names {
		o := outs[n]
		switch {
		case o.Sensitive:
			fmt.Fprintf(c.stdout, "%s = <sensitive>\n", n)
		default:
			fmt.Fprintf(c.stdout, "%s = %s\n", n, plan.FormatValue(o.Value))
		}
	}
	return exitOK
}
