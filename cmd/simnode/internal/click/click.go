// Package click parses command lines the way Python's click does for the
// commands simnode plays (Ray's CLI): long and short options, --opt=value,
// flags, counted flags, typed values, choices, arguments, and click's exact
// usage errors ("Error: No such option: --foo Did you mean --head?", exit 2).
package click

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Type is the type of an option's value.
type Type int

// Option value types.
const (
	String Type = iota
	Int
	Float
	Bool
	Choice
	// JSONLoads is Python's json.loads as type (click's FuncParamType, Ray's
	// --system-config): a value it refuses is echoed in the error.
	JSONLoads
)

// Option is one click option.
type Option struct {
	// Names are the spellings, long first: "--num-gpus", or "-f", "--force".
	Names []string
	// Flag marks an is_flag option (no value).
	Flag bool
	// Off is the secondary spelling of a --x/--no-x flag pair.
	Off string
	// Count marks a count=True option (-v -v).
	Count bool
	Type  Type
	// Choices lists the accepted values of a Choice option.
	Choices []string
	// Metavar overrides the value placeholder in help ("TEXT", "INTEGER").
	Metavar string
	Help    string
	Hidden  bool
	// Default is shown in help only.
	Default string
}

// Dest is the Python parameter name: the longest name without dashes and
// with '-' replaced by '_'.
func (o *Option) Dest() string {
	best := ""
	for _, n := range o.Names {
		if len(n) > len(best) && strings.HasPrefix(n, "--") {
			best = n
		}
	}
	if best == "" {
		best = o.Names[0]
	}
	return strings.ReplaceAll(strings.TrimLeft(best, "-"), "-", "_")
}

// Argument is one positional argument.
type Argument struct {
	Name     string // upper-case in messages: RESOURCE
	Required bool
	Choices  []string
	// Variadic takes every remaining argument (nargs=-1).
	Variadic bool
}

// Command is a click command.
type Command struct {
	// Path is the command path as printed: "ray start".
	Path    string
	Help    string
	Options []Option
	Args    []Argument
	// IgnoreUnknown passes unknown options through as arguments.
	IgnoreUnknown bool
}

// Values is the result of a successful parse.
type Values struct {
	opts  map[string]string
	set   map[string]bool
	count map[string]int
	// Args are the positional arguments in order.
	Args []string
	// Help is true when --help was given; the caller prints Command.HelpText.
	Help bool
}

// Str returns an option's value ("" when unset).
func (v *Values) Str(dest string) string { return v.opts[dest] }

// IsSet reports whether the option was given.
func (v *Values) IsSet(dest string) bool { return v.set[dest] }

// Count returns how often a counted flag was given.
func (v *Values) Count(dest string) int { return v.count[dest] }

// Flag returns a flag's value.
func (v *Values) Flag(dest string) bool { return v.opts[dest] == "true" }

// IntValue returns an Int option (0 when unset; parse already validated it).
func (v *Values) IntValue(dest string) int {
	n, _ := strconv.Atoi(v.opts[dest])
	return n
}

// BoolValue returns a Bool option parsed with click's rules, and whether it
// was set.
func (v *Values) BoolValue(dest string) (bool, bool) {
	if !v.set[dest] {
		return false, false
	}
	b, _ := parseBool(v.opts[dest])
	return b, true
}

// UsageError is a click.UsageError: printed with the command's usage line and
// a hint, exit code 2.
type UsageError struct {
	Path string
	Msg  string
	// Usage overrides the default "Usage: <path> [OPTIONS]" line.
	Usage string
	// Bare is an error click's parser raises before the command's context
	// is attached (a missing value, a value given to a flag): printed as the
	// "Error: ..." line alone.
	Bare bool
}

func (e *UsageError) Error() string { return e.Msg }

// Format renders the error as click prints it on stderr.
func (e *UsageError) Format() string {
	if e.Bare {
		return "Error: " + e.Msg + "\n"
	}
	usage := e.Usage
	if usage == "" {
		usage = "Usage: " + e.Path + " [OPTIONS]"
	}
	return fmt.Sprintf("%s\nTry '%s --help' for help.\n\nError: %s\n", usage, e.Path, e.Msg)
}

// UsageLine is the first help line: "Usage: ray list [OPTIONS] {actors|...}".
func (c *Command) UsageLine() string {
	parts := []string{"Usage:", c.Path, "[OPTIONS]"}
	for _, a := range c.Args {
		name := strings.ToUpper(a.Name)
		if len(a.Choices) > 0 {
			name = "{" + strings.Join(a.Choices, "|") + "}"
		}
		if a.Variadic {
			name = "[" + name + "]..."
		} else if !a.Required {
			name = "[" + name + "]"
		}
		parts = append(parts, name)
	}
	return strings.Join(parts, " ")
}

func (c *Command) fail(msg string) *UsageError {
	return &UsageError{Path: c.Path, Msg: msg, Usage: c.UsageLine()}
}

// bare is a parser error printed without the usage lines (click 8.3).
func (c *Command) bare(msg string) *UsageError {
	return &UsageError{Path: c.Path, Msg: msg, Bare: true}
}

func (c *Command) longNames() []string {
	var out []string
	for _, o := range c.Options {
		for _, n := range o.Names {
			if strings.HasPrefix(n, "--") {
				out = append(out, n)
			}
		}
		if o.Off != "" {
			out = append(out, o.Off)
		}
	}
	return append(out, "--help")
}

func (c *Command) find(name string) (*Option, bool) {
	for i := range c.Options {
		o := &c.Options[i]
		for _, n := range o.Names {
			if n == name {
				return o, true
			}
		}
		if o.Off == name {
			return o, false
		}
	}
	return nil, false
}

// Parse parses args (after the command name).
func (c *Command) Parse(args []string) (*Values, *UsageError) {
	v := &Values{opts: map[string]string{}, set: map[string]bool{}, count: map[string]int{}}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if a == "--help" {
			v.Help = true
			return v, nil
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasVal := strings.Cut(a, "=")
			o, on := c.find(name)
			if o == nil {
				if c.IgnoreUnknown {
					pos = append(pos, a)
					continue
				}
				msg := "No such option: " + name
				if p := closeMatches(name, c.longNames()); len(p) > 0 {
					sort.Strings(p)
					if len(p) == 1 {
						msg += " Did you mean " + p[0] + "?"
					} else {
						msg += " (Possible options: " + strings.Join(p, ", ") + ")"
					}
				}
				return nil, c.fail(msg)
			}
			if o.Flag || o.Count {
				if hasVal {
					return nil, c.bare(fmt.Sprintf("Option '%s' does not take a value.", name))
				}
				c.setFlag(v, o, on || o.Off == "")
				continue
			}
			if !hasVal {
				if i+1 >= len(args) {
					return nil, c.bare(fmt.Sprintf("Option '%s' requires an argument.", name))
				}
				i++
				val = args[i]
			}
			if err := c.setValue(v, o, val); err != nil {
				return nil, err
			}
			continue
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			// Short options, possibly combined (-vv) or with a value (-g16).
			for j := 1; j < len(a); j++ {
				name := "-" + string(a[j])
				o, _ := c.find(name)
				if o == nil {
					if c.IgnoreUnknown {
						pos = append(pos, a)
						break
					}
					return nil, c.fail("No such option: " + name)
				}
				if o.Flag || o.Count {
					c.setFlag(v, o, true)
					continue
				}
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						return nil, c.bare(fmt.Sprintf("Option '%s' requires an argument.", name))
					}
					i++
					val = args[i]
				}
				if err := c.setValue(v, o, val); err != nil {
					return nil, err
				}
				break
			}
			continue
		}
		pos = append(pos, a)
	}
	// Positional arguments.
	k := 0
	for _, arg := range c.Args {
		if arg.Variadic {
			v.Args = append(v.Args, pos[k:]...)
			k = len(pos)
			continue
		}
		if k >= len(pos) {
			if arg.Required {
				return nil, c.fail(fmt.Sprintf("Missing argument '%s'.", strings.ToUpper(arg.Name)))
			}
			continue
		}
		if len(arg.Choices) > 0 && !slices.Contains(arg.Choices, pos[k]) {
			return nil, c.fail(fmt.Sprintf("Invalid value for '%s': %s is not one of %s.", strings.ToUpper(arg.Name), quote(pos[k]), quoteList(arg.Choices)))
		}
		v.Args = append(v.Args, pos[k])
		k++
	}
	if k < len(pos) {
		extra := pos[k:]
		if len(extra) == 1 {
			return nil, c.fail(fmt.Sprintf("Got unexpected extra argument (%s)", extra[0]))
		}
		return nil, c.fail(fmt.Sprintf("Got unexpected extra arguments (%s)", strings.Join(extra, " ")))
	}
	return v, nil
}

func (c *Command) setFlag(v *Values, o *Option, on bool) {
	d := o.Dest()
	v.set[d] = true
	if o.Count {
		v.count[d]++
		v.opts[d] = strconv.Itoa(v.count[d])
		return
	}
	v.opts[d] = strconv.FormatBool(on)
}

func (c *Command) setValue(v *Values, o *Option, val string) *UsageError {
	label := strings.Join(o.Names, "' / '")
	switch o.Type {
	case Int:
		if _, err := strconv.Atoi(strings.TrimSpace(val)); err != nil {
			return c.fail(fmt.Sprintf("Invalid value for '%s': %s is not a valid integer.", label, quote(val)))
		}
		val = strings.TrimSpace(val)
	case Float:
		if _, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err != nil {
			return c.fail(fmt.Sprintf("Invalid value for '%s': %s is not a valid float.", label, quote(val)))
		}
	case Bool:
		if _, ok := parseBool(val); !ok {
			return c.fail(fmt.Sprintf("Invalid value for '%s': %s is not a valid boolean. Recognized values: , 0, 1, f, false, n, no, off, on, t, true, y, yes", label, quote(val)))
		}
	case Choice:
		if !slices.Contains(o.Choices, val) {
			return c.fail(fmt.Sprintf("Invalid value for '%s': %s is not one of %s.", label, quote(val), quoteList(o.Choices)))
		}
	case JSONLoads:
		if !json.Valid([]byte(val)) {
			return c.fail(fmt.Sprintf("Invalid value for '%s': %s", label, val))
		}
	}
	d := o.Dest()
	v.set[d] = true
	v.opts[d] = val
	return nil
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "t", "yes", "y", "on":
		return true, true
	case "0", "false", "f", "no", "n", "off", "":
		return false, true
	}
	return false, false
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

func quoteList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = quote(s)
	}
	return strings.Join(q, ", ")
}

// HelpText renders click-style help for the command.
func (c *Command) HelpText() string {
	var b strings.Builder
	b.WriteString(c.UsageLine() + "\n\n")
	if c.Help != "" {
		b.WriteString("  " + c.Help + "\n\n")
	}
	b.WriteString("Options:\n")
	type row struct{ left, right string }
	var rows []row
	width := 0
	for _, o := range c.Options {
		if o.Hidden {
			continue
		}
		left := strings.Join(o.Names, ", ")
		if o.Off != "" {
			left += " / " + o.Off
		}
		if !o.Flag && !o.Count {
			mv := o.Metavar
			if mv == "" {
				switch o.Type {
				case Int:
					mv = "INTEGER"
				case Float:
					mv = "FLOAT"
				case Bool:
					mv = "BOOLEAN"
				case Choice:
					mv = "[" + strings.Join(o.Choices, "|") + "]"
				default:
					mv = "TEXT"
				}
			}
			left += " " + mv
		}
		rows = append(rows, row{left, o.Help})
		if len(left) > width && len(left) <= 30 {
			width = len(left)
		}
	}
	rows = append(rows, row{"--help", "Show this message and exit."})
	for _, r := range rows {
		if len(r.left) > width {
			fmt.Fprintf(&b, "  %s\n  %s  %s\n", r.left, strings.Repeat(" ", width), r.right)
			continue
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, r.left, r.right)
	}
	return b.String()
}

// Group is a click group: group options, then a subcommand name.
type Group struct {
	Path     string
	Help     string
	Options  []Option
	Commands []string
	// CommandHelp maps command names to their one-line help.
	CommandHelp map[string]string
}

// Split parses group options and returns the subcommand and its args. A
// missing subcommand returns ("", nil, nil): the caller prints HelpText and
// exits 2 (click >= 8.2 NoArgsIsHelpError).
func (g *Group) Split(args []string) (string, []string, bool, *UsageError) {
	cmd := Command{Path: g.Path, Options: g.Options}
	fail := func(msg string) *UsageError {
		return &UsageError{Path: g.Path, Msg: msg, Usage: "Usage: " + g.Path + " [OPTIONS] COMMAND [ARGS]..."}
	}
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--help" {
			return "", nil, true, nil
		}
		if !strings.HasPrefix(a, "-") {
			break
		}
		name, _, hasVal := strings.Cut(a, "=")
		o, _ := cmd.find(name)
		if o == nil {
			msg := "No such option: " + name
			if p := closeMatches(name, cmd.longNames()); len(p) > 0 && strings.HasPrefix(name, "--") {
				sort.Strings(p)
				if len(p) == 1 {
					msg += " Did you mean " + p[0] + "?"
				} else {
					msg += " (Possible options: " + strings.Join(p, ", ") + ")"
				}
			}
			return "", nil, false, fail(msg)
		}
		if !o.Flag && !hasVal {
			i++
		}
		i++
	}
	if i >= len(args) {
		return "", nil, false, nil
	}
	name := args[i]
	if !slices.Contains(g.Commands, name) {
		return "", nil, false, fail(fmt.Sprintf("No such command '%s'.", name))
	}
	return name, args[i+1:], false, nil
}

// HelpText renders the group help with its commands.
func (g *Group) HelpText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s [OPTIONS] COMMAND [ARGS]...\n\n", g.Path)
	if g.Help != "" {
		b.WriteString("  " + g.Help + "\n\n")
	}
	b.WriteString("Options:\n")
	for _, o := range g.Options {
		left := strings.Join(o.Names, ", ")
		if !o.Flag {
			left += " TEXT"
		}
		fmt.Fprintf(&b, "  %-20s  %s\n", left, o.Help)
	}
	fmt.Fprintf(&b, "  %-20s  %s\n", "--help", "Show this message and exit.")
	b.WriteString("\nCommands:\n")
	names := append([]string(nil), g.Commands...)
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-20s  %s\n", n, g.CommandHelp[n])
	}
	return b.String()
}
