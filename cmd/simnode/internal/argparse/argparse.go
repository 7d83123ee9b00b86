// Package argparse parses command lines the way Python's argparse does for
// vLLM's CLI (FlexibleArgumentParser: no abbreviations, underscores in long
// options accepted as dashes), with argparse's exact error lines:
//
//	usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...
//	vllm: error: unrecognized arguments: --foo
package argparse

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is how an option consumes values.
type Kind int

// Option kinds.
const (
	// One takes exactly one value.
	One Kind = iota
	// Many takes one or more values (nargs='+').
	Many
	// StoreTrue takes none.
	StoreTrue
	// BoolOpt is argparse.BooleanOptionalAction: --x / --no-x.
	BoolOpt
	// Optional takes zero or one value (nargs='?').
	Optional
)

// Type validates a value.
type Type int

// Value types.
const (
	Str Type = iota
	Int
	Float
	// HumanInt accepts vLLM's human-readable integers (32k, 1M).
	HumanInt
)

// Option is one optional argument.
type Option struct {
	Names   []string // "--tensor-parallel-size", "-tp"
	Kind    Kind
	Type    Type
	Choices []string
	Default string
}

// Dest is the attribute name: the first long name, without dashes, with
// '-' replaced by '_'.
func (o *Option) Dest() string {
	for _, n := range o.Names {
		if strings.HasPrefix(n, "--") {
			return strings.ReplaceAll(n[2:], "-", "_")
		}
	}
	return strings.TrimLeft(o.Names[0], "-")
}

// Parser is one (sub)parser.
type Parser struct {
	// Prog is "vllm serve".
	Prog string
	// Usage is the usage line without "usage: ".
	Usage string
	// TopProg and TopUsage are the parent parser's, used for
	// "unrecognized arguments" (reported by the top-level parser).
	TopProg, TopUsage string
	Options           []Option
	// Positional is the name of the single optional positional ("model_tag").
	Positional string
}

// Error is a parse error, printed as argparse does, exit status 2.
type Error struct {
	Usage string
	Prog  string
	Msg   string
}

func (e *Error) Error() string { return e.Msg }

// Format renders the error for stderr.
func (e *Error) Format() string {
	return fmt.Sprintf("usage: %s\n%s: error: %s\n", e.Usage, e.Prog, e.Msg)
}

// Result holds parsed values.
type Result struct {
	vals map[string][]string
	set  []string // dests in the order first given
	// Positional is the positional value ("" when absent).
	Positional string
	// Help is true when -h/--help was given.
	Help bool
}

// Get returns the last value of dest ("" when unset).
func (r *Result) Get(dest string) string {
	v := r.vals[dest]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// List returns all values of a Many option.
func (r *Result) List(dest string) []string { return r.vals[dest] }

// IsSet reports whether dest was given.
func (r *Result) IsSet(dest string) bool {
	_, ok := r.vals[dest]
	return ok
}

// Set returns the dests given, in order.
func (r *Result) Set() []string { return r.set }

// Bool returns a StoreTrue/BoolOpt value.
func (r *Result) Bool(dest string) bool { return r.Get(dest) == "True" }

// Int returns an integer value (HumanInt suffixes applied).
func (r *Result) Int(dest string) int {
	n, _ := ParseHumanInt(r.Get(dest))
	return n
}

// Float returns a float value.
func (r *Result) Float(dest string) float64 {
	f, _ := strconv.ParseFloat(r.Get(dest), 64)
	return f
}

// ParseHumanInt parses vLLM's human-readable integers: "32768", "25.6k"
// (lower-case suffixes are powers of 1000) and "1K" (upper-case, powers of
// 1024), as documented for --max-model-len.
func ParseHumanInt(s string) (int, error) {
	s = strings.TrimSpace(s)
	mult := 1
	if s != "" {
		switch s[len(s)-1] {
		case 'k':
			mult = 1000
		case 'K':
			mult = 1024
		case 'm':
			mult = 1000 * 1000
		case 'M':
			mult = 1024 * 1024
		case 'g':
			mult = 1000 * 1000 * 1000
		case 'G':
			mult = 1024 * 1024 * 1024
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	if mult == 1 {
		return strconv.Atoi(s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return int(f * float64(mult)), nil
}

func (p *Parser) lookup(name string) (*Option, bool) {
	if strings.HasPrefix(name, "--") {
		name = "--" + strings.ReplaceAll(name[2:], "_", "-")
	}
	for i := range p.Options {
		o := &p.Options[i]
		for _, n := range o.Names {
			if n == name {
				return o, true
			}
			if o.Kind == BoolOpt && strings.HasPrefix(n, "--") && name == "--no-"+n[2:] {
				return o, false
			}
		}
	}
	return nil, false
}

func (p *Parser) fail(msg string) *Error {
	return &Error{Usage: p.Usage, Prog: p.Prog, Msg: msg}
}

// label is argparse's name for an option in errors: its option strings
// joined by '/' (BooleanOptionalAction adds the --no- forms).
func label(o *Option) string {
	names := append([]string(nil), o.Names...)
	if o.Kind == BoolOpt {
		for _, n := range o.Names {
			if strings.HasPrefix(n, "--") {
				names = append(names, "--no-"+n[2:])
			}
		}
	}
	return strings.Join(names, "/")
}

func (p *Parser) check(o *Option, v string) *Error {
	switch o.Type {
	case Int:
		if _, err := strconv.Atoi(v); err != nil {
			return p.fail(fmt.Sprintf("argument %s: invalid int value: %s", label(o), pyRepr(v)))
		}
	case HumanInt:
		if _, err := ParseHumanInt(v); err != nil {
			return p.fail(fmt.Sprintf("argument %s: invalid human_readable_int value: %s", label(o), pyRepr(v)))
		}
	case Float:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return p.fail(fmt.Sprintf("argument %s: invalid float value: %s", label(o), pyRepr(v)))
		}
	}
	if len(o.Choices) > 0 {
		ok := false
		for _, c := range o.Choices {
			if c == v {
				ok = true
			}
		}
		if !ok {
			q := make([]string, len(o.Choices))
			for i, c := range o.Choices {
				q[i] = pyRepr(c)
			}
			return p.fail(fmt.Sprintf("argument %s: invalid choice: %s (choose from %s)", label(o), pyRepr(v), strings.Join(q, ", ")))
		}
	}
	return nil
}

func pyRepr(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

func isOption(s string) bool {
	if !strings.HasPrefix(s, "-") || s == "-" {
		return false
	}
	// Negative numbers are values, as in argparse when no option looks like one.
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return false
	}
	return true
}

// Parse parses args (after the subcommand name).
func (p *Parser) Parse(args []string) (*Result, *Error) {
	r := &Result{vals: map[string][]string{}}
	var extras []string
	add := func(o *Option, v string) {
		d := o.Dest()
		if _, ok := r.vals[d]; !ok {
			r.set = append(r.set, d)
		}
		r.vals[d] = append(r.vals[d], v)
	}
	afterUnknown := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest := args[i+1:]
			if r.Positional == "" && len(rest) > 0 && p.Positional != "" {
				r.Positional, rest = rest[0], rest[1:]
			}
			extras = append(extras, rest...)
			break
		}
		if a == "-h" || a == "--help" {
			r.Help = true
			return r, nil
		}
		if !isOption(a) {
			if r.Positional == "" && p.Positional != "" && !afterUnknown {
				r.Positional = a
				continue
			}
			extras = append(extras, a)
			continue
		}
		afterUnknown = false
		name, val, hasVal := strings.Cut(a, "=")
		o, on := p.lookup(name)
		if o == nil {
			extras = append(extras, a)
			afterUnknown = r.Positional != ""
			continue
		}
		switch o.Kind {
		case StoreTrue, BoolOpt:
			if hasVal {
				return nil, p.fail(fmt.Sprintf("argument %s: ignored explicit argument %s", label(o), pyRepr(val)))
			}
			if on {
				add(o, "True")
			} else {
				add(o, "False")
			}
		case One:
			if !hasVal {
				if i+1 >= len(args) || isOption(args[i+1]) {
					return nil, p.fail(fmt.Sprintf("argument %s: expected one argument", label(o)))
				}
				i++
				val = args[i]
			}
			if err := p.check(o, val); err != nil {
				return nil, err
			}
			add(o, val)
		case Optional:
			if !hasVal && i+1 < len(args) && !isOption(args[i+1]) {
				i++
				val = args[i]
				hasVal = true
			}
			if !hasVal {
				val = o.Default
			}
			if err := p.check(o, val); err != nil {
				return nil, err
			}
			add(o, val)
		case Many:
			var vals []string
			if hasVal {
				vals = append(vals, val)
			}
			for i+1 < len(args) && !isOption(args[i+1]) {
				i++
				vals = append(vals, args[i])
			}
			if len(vals) == 0 {
				return nil, p.fail(fmt.Sprintf("argument %s: expected at least one argument", label(o)))
			}
			d := o.Dest()
			if _, ok := r.vals[d]; !ok {
				r.set = append(r.set, d)
			}
			r.vals[d] = vals
		}
	}
	if len(extras) > 0 {
		return nil, &Error{Usage: p.TopUsage, Prog: p.TopProg, Msg: "unrecognized arguments: " + strings.Join(extras, " ")}
	}
	return r, nil
}
