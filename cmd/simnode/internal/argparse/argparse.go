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

	"github.com/rayform/rayform/engine/vllmcli"
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

// ParseHumanInt parses vLLM's human_readable_int (argparse_utils.py): a
// plain integer, or a number with one suffix, k/m/g/t powers of 1000
// (decimals allowed: "25.6k") or K/M/G/T powers of 1024 (integers only).
func ParseHumanInt(s string) (int, error) {
	s = strings.TrimSpace(s)
	if m := humanInt.FindStringSubmatch(s); m != nil {
		suffix := m[2]
		if strings.Contains("kmgt", suffix) {
			f, err := strconv.ParseFloat(m[1], 64)
			exp := strings.Index("kmgt", suffix) + 1
			mult := 1.0
			for range exp {
				mult *= 1000
			}
			return int(f * mult), err
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return 0, fmt.Errorf("Decimals are not allowed with binary suffixes like %s. Did you mean to use %s%s instead?", suffix, m[1], strings.ToLower(suffix))
		}
		return n << (10 * (strings.Index("KMGT", suffix) + 1)), nil
	}
	return strconv.Atoi(s)
}

var humanInt = regexp.MustCompile(`^(\d+(?:\.\d+)?)([kKmMgGtT])$`)

func (p *Parser) fail(msg string) *Error {
	return &Error{Usage: p.Usage, Prog: p.Prog, Msg: msg}
}

func label(o *Option) string { return o.Label() }

func (p *Parser) check(o *Option, v string) *Error {
	switch o.Type {
	case vllmcli.Int:
		if _, err := strconv.Atoi(strings.TrimSpace(v)); err != nil {
			return p.fail(fmt.Sprintf("argument %s: invalid int value: %s", label(o), pyRepr(v)))
		}
	case vllmcli.HumanInt:
		if _, err := ParseHumanInt(v); err != nil {
			return p.fail(fmt.Sprintf("argument %s: invalid human_readable_int value: %s", label(o), pyRepr(v)))
		}
	case vllmcli.JSON:
		if !json.Valid([]byte(v)) && !strings.HasPrefix(strings.TrimSpace(v), "{") {
			// union_dict_and_str: a non-JSON-object value is kept as a string.
			break
		}
		if !json.Valid([]byte(v)) {
			return p.fail(fmt.Sprintf("argument %s: invalid loads value: %s", label(o), pyRepr(v)))
		}
	case vllmcli.Float:
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

// taskHint is what vLLM's FlexibleArgumentParser.error adds when `vllm
// serve` is given the removed --task option.
const taskHint = "\n\nHint: --task is not a vllm serve option. For embedding, reranking, or reward models, use --runner pooling. To adapt a generative model for pooling, also use --convert embed, --convert classify, or --convert reward."

var (
	taskArg = regexp.MustCompile(`^--task(=.+|$)`)
	taskMsg = regexp.MustCompile(`(^|\s)--task(=|\s|$)`)
)

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
	showTaskHint := false
	for _, a := range args {
		if taskArg.MatchString(a) {
			showTaskHint = true
		}
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
		if w == "-h" || w == "--help" {
			return &Result{Help: true}, nil
		}
		m := p.Options.Resolve(w)
		if len(m.Ambiguous) > 0 {
			return nil, p.fail(fmt.Sprintf("ambiguous option: %s could match %s", w, strings.Join(m.Ambiguous, ", ")))
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
		if showTaskHint && taskMsg.MatchString(msg) {
			msg += taskHint
		}
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
