package click

import (
	"fmt"

	"github.com/rayform/rayform/resources/clitables"
)

// OptionsFromTable converts the options of a generated `ray start` table
// (resources/clitables, read from Ray's own click command) into the options
// this package parses with, in the command's order.
func OptionsFromTable(t *clitables.Ray) ([]Option, error) {
	var out []Option
	for _, to := range t.Options {
		if to.Multiple {
			return nil, fmt.Errorf("ray start %s: multiple=True is not emulated", to.Opts[0])
		}
		o := Option{Names: to.Opts, Flag: to.IsFlag, Count: to.Count, Choices: to.Choices, Hidden: to.Hidden, Help: to.Help}
		if len(to.SecondaryOpts) > 1 {
			return nil, fmt.Errorf("ray start %s: %d secondary spellings are not emulated", to.Opts[0], len(to.SecondaryOpts))
		}
		if len(to.SecondaryOpts) == 1 {
			o.Off = to.SecondaryOpts[0]
		}
		switch to.Type {
		case "text":
			o.Type = String
		case "integer", "integer range":
			o.Type = Int
		case "float":
			o.Type = Float
		case "boolean":
			o.Type = Bool
		case "choice":
			o.Type = Choice
		case "loads":
			o.Type = JSONLoads
		default:
			return nil, fmt.Errorf("ray start %s: click type %q is not emulated", to.Opts[0], to.Type)
		}
		out = append(out, o)
	}
	return out, nil
}
