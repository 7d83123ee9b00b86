// Package argparse parses command lines the way Python 3.12's argparse does
// for vLLM's CLI (FlexibleArgumentParser: underscores in long options
// accepted as dashes, dotted JSON keys; argparse: unambiguous prefixes,
// --opt=value, the last value wins), with argparse's exact error lines:
//
//	usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...
//	vllm: error: unrecognized arguments: --foo
package argparse

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rayform/rayform/resources/vllmcli"
)

// Option is one optional argument (vllmcli's table entry).
type Option = vllmcli.Option

// Parser is one (sub)parser.
type Parser struct {
	// Prog is "vllm serve".
	Prog string
	// Usage is the usage line without "usage: ".
	Usage string
	// TopProg and TopUsage are the parent parser's, used for
	// "unrecognized arguments" (reported by the top-level parser).
	TopProg, TopUsage string
	Options           vllmcli.Set
	// Positional is the name of the single optional positional ("model_tag").
	Positional string
	// ServeModelRewrite is FlexibleArgumentParser.parse_args' rule for
	// `vllm serve`: a --model option becomes the positional model.
	ServeModelRewrite bool
}

var modelArg = regexp.MustCompile(`^--model(=.+|$)`)

// moveModel does what vLLM's FlexibleArgumentParser.parse_args does for
// `vllm serve` (vllm/utils/argparse_utils.py): the first --model X (or
// --model=X) is taken out and X put first, as the positional model_tag.
func moveModel(args []string) []string {
	for i, a := range args {
		if !modelArg.MatchString(a) {
			continue
		}
		tag, rest := strings.TrimPrefix(a, "--model="), i+1
		if a == "--model" {
			if i+1 >= len(args) {
				return args
			}
			tag, rest = args[i+1], i+2
		}
		out := append([]string{tag}, args[:i]...)
		return append(out, args[rest:]...)
	}
	return args
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

// ParseHumanInt parses vLLM's human_readable_int (vllmcli.ParseHumanInt).
func ParseHumanInt(s string) (int, error) { return vllmcli.ParseHumanInt(s) }

func (p *Parser) fail(msg string) *Error {
	return &Error{Usage: p.Usage, Prog: p.Prog, Msg: msg}
}

func label(o *Option) string { return o.Label() }

// loadsRepr is how Python prints json.loads in vLLM's parse_type error
// ("Value x cannot be converted to <function loads at 0x...>."); the
// address differs from run to run.
const loadsRepr = "<function loads at 0x7f3a2c1d8e00>"

// convert applies the option's type= callable as vLLM's arg_utils.py
// defines it and returns the Python repr of the converted value, or the
// error argparse prints after "argument <label>: ".
func convert(o *Option, v string) (string, string) {
	if o.Optional && (v == "" || v == "None") {
		return "None", ""
	}
	// parse_type(T) (inside optional_type) turns a ValueError into
	// "Value <v> cannot be converted to <T>."; bare builtins fail with
	// argparse's "invalid <name> value: <repr>".
	wrapped := o.Optional || o.Type == JSONType
	fail := func(pyType, name string) (string, string) {
		if wrapped {
			return "", fmt.Sprintf("Value %s cannot be converted to %s.", v, pyType)
		}
		return "", fmt.Sprintf("invalid %s value: %s", name, pyRepr(v))
	}
	switch o.Type {
	case vllmcli.Int:
		n, ok := pyInt(v)
		if !ok {
			return fail("<class 'int'>", "int")
		}
		return n, ""
	case vllmcli.Float:
		f, err := strconv.ParseFloat(strings.TrimSpace(strings.ReplaceAll(v, "_", "")), 64)
		if err != nil {
			return fail("<class 'float'>", "float")
		}
		return strconv.FormatFloat(f, 'g', -1, 64), ""
	case vllmcli.HumanInt, vllmcli.HumanIntOrAuto:
		name := "human_readable_int"
		if o.Type == vllmcli.HumanIntOrAuto {
			name = "human_readable_int_or_auto"
			if t := strings.TrimSpace(v); t == "-1" || strings.ToLower(t) == "auto" {
				return "-1", ""
			}
		}
		n, err := ParseHumanInt(v)
		if err != nil {
			if strings.HasPrefix(err.Error(), "Decimals") {
				return "", err.Error()
			}
			if o.Optional {
				return "", fmt.Sprintf("Value %s cannot be converted to <function %s at 0x7f3a2c1d8e00>.", v, name)
			}
			return "", fmt.Sprintf("invalid %s value: %s", name, pyRepr(v))
		}
		return strconv.Itoa(n), ""
	case JSONType:
		if !json.Valid([]byte(v)) {
			return "", fmt.Sprintf("Value %s cannot be converted to %s.", v, loadsRepr)
		}
		return v, ""
	case vllmcli.DictOrStr:
		if !dictLike.MatchString(v) {
			return pyRepr(v), ""
		}
		if !json.Valid([]byte(v)) {
			return "", fmt.Sprintf("Value %s cannot be converted to %s.", v, loadsRepr)
		}
		return v, ""
	case vllmcli.Dataclass:
		if !json.Valid([]byte(v)) {
			name := strings.TrimPrefix(strings.TrimPrefix(o.TypeName, "optional:"), "dataclass:")
			return "", fmt.Sprintf("1 validation error for %s\n  Invalid JSON: the value is not valid JSON [type=json_invalid, input_value=%s, input_type=str]", name, pyRepr(v))
		}
		return v, ""
	case vllmcli.LowerUnderscore:
		return pyRepr(strings.ReplaceAll(strings.ToLower(v), "-", "_")), ""
	}
	return pyRepr(v), ""
}

// JSONType is parse_type(json.loads).
const JSONType = vllmcli.JSON

// dictLike is union_dict_and_str's test for a JSON object.
var dictLike = regexp.MustCompile(`(?s)^\s*{.*}\s*$`)

// pyInt parses like Python's int(str): surrounding whitespace, a sign,
// underscores between digits.
func pyInt(v string) (string, bool) {
	t := strings.TrimSpace(v)
	if strings.Contains(t, "__") || strings.HasSuffix(t, "_") || strings.HasPrefix(strings.TrimLeft(t, "+-"), "_") {
		return "", false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(n, 10), true
}

func (p *Parser) check(o *Option, v string) *Error {
	val, msg := convert(o, v)
	if msg != "" {
		return p.fail(fmt.Sprintf("argument %s: %s", label(o), msg))
	}
	if len(o.Choices) > 0 && !slices.Contains(o.Choices, val) {
		return p.fail(fmt.Sprintf("argument %s: invalid choice: %s (choose from %s)", label(o), val, strings.Join(o.Choices, ", ")))
	}
	return nil
}

func pyRepr(s string) string { return vllmcli.PyRepr(s) }

// preprocess does what FlexibleArgumentParser.parse_args does before
// argparse sees the words: underscores to dashes in long option names,
// -O<level> to --optimization-level, and dotted JSON keys (--opt.key v)
// folded into one --opt argument appended at the end.
func preprocess(args []string) []string {
	var out, dotted []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(append(out, args[i:]...), dotted...)
		case strings.HasPrefix(a, "--"):
			a = vllmcli.Normalize(a)
			name, _, hasVal := strings.Cut(a, "=")
			if key, _, ok := strings.Cut(name, "."); ok {
				if !hasVal && i+1 < len(args) {
					i++
				}
				if !slices.Contains(dotted, key) {
					dotted = append(dotted, key)
				}
				continue
			}
			out = append(out, a)
		case strings.HasPrefix(a, "-O") && a != "-O":
			lvl := a[2:]
			if strings.HasPrefix(lvl, "=") {
				lvl = lvl[1:]
			}
			out = append(out, "--optimization-level", lvl)
		case a == "-O" && i+1 < len(args) && len(args[i+1]) == 1 && strings.Contains("0123", args[i+1]):
			out = append(out, "--optimization-level")
		default:
			out = append(out, a)
		}
	}
	for _, k := range dotted {
		out = append(out, k, "{}")
	}
	return out
}

// Parse parses args (after the subcommand name).
func (p *Parser) Parse(args []string) (*Result, *Error) {
	if p.ServeModelRewrite {
		args = moveModel(args)
	}
	words := preprocess(args)
	// argparse classifies every word first; an ambiguous prefix is an error
	// wherever it stands.
	matches := make([]vllmcli.Match, len(words))
	isOpt := make([]bool, len(words))
	for i, w := range words {
		if w == "--" {
			break
		}
		m := p.Options.Resolve(w)
		if len(m.Ambiguous) > 0 {
			return nil, p.fail(fmt.Sprintf("ambiguous option: %s could match %s", w, strings.Join(m.Ambiguous, ", ")))
		}
		if m.Option != nil && m.Option.Action == vllmcli.Help {
			return &Result{Help: true}, nil
		}
		matches[i], isOpt[i] = m, m.Option != nil || m.Unknown
	}
	r := &Result{vals: map[string][]string{}}
	var extras []string
	add := func(o *Option, vals ...string) {
		d := o.Dest()
		if _, ok := r.vals[d]; !ok {
			r.set = append(r.set, d)
		}
		if o.Action == vllmcli.Append {
			r.vals[d] = append(r.vals[d], vals...)
		} else {
			r.vals[d] = vals
		}
	}
	positional := func(w string, afterUnknown bool) {
		if r.Positional == "" && p.Positional != "" && !afterUnknown {
			r.Positional = w
			return
		}
		extras = append(extras, w)
	}
	afterUnknown := false
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			for _, rest := range words[i+1:] {
				positional(rest, false)
			}
			break
		}
		if !isOpt[i] {
			positional(w, afterUnknown)
			continue
		}
		m := matches[i]
		if m.Unknown {
			extras = append(extras, w)
			afterUnknown = r.Positional != ""
			continue
		}
		afterUnknown = false
		o := m.Option
		next := func() (string, bool) {
			if i+1 < len(words) && !isOpt[i+1] && words[i+1] != "--" {
				i++
				return words[i], true
			}
			return "", false
		}
		switch o.Action {
		case vllmcli.StoreTrue, vllmcli.BoolOpt:
			if m.HasValue {
				return nil, p.fail(fmt.Sprintf("argument %s: ignored explicit argument %s", label(o), pyRepr(m.Value)))
			}
			add(o, pyBool(!m.Negated))
		case vllmcli.Store, vllmcli.Append:
			val, ok := m.Value, m.HasValue
			if !ok {
				if val, ok = next(); !ok {
					return nil, p.fail(fmt.Sprintf("argument %s: expected one argument", label(o)))
				}
			}
			if err := p.check(o, val); err != nil {
				return nil, err
			}
			add(o, val)
		case vllmcli.MaybeOne:
			val, ok := m.Value, m.HasValue
			if !ok {
				val, ok = next()
			}
			if !ok {
				val = "True"
			} else if err := p.check(o, val); err != nil {
				return nil, err
			}
			add(o, val)
		case vllmcli.Many:
			var vals []string
			if m.HasValue {
				vals = append(vals, m.Value)
			}
			for {
				v, ok := next()
				if !ok {
					break
				}
				vals = append(vals, v)
			}
			if len(vals) == 0 {
				return nil, p.fail(fmt.Sprintf("argument %s: expected at least one argument", label(o)))
			}
			for _, v := range vals {
				if err := p.check(o, v); err != nil {
					return nil, err
				}
			}
			add(o, vals...)
		}
	}
	if len(extras) > 0 {
		msg := "unrecognized arguments: " + strings.Join(extras, " ")
		return nil, &Error{Usage: p.TopUsage, Prog: p.TopProg, Msg: msg}
	}
	return r, nil
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
