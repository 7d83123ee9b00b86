// Package vllmcli is the command line of `vllm serve` as the vLLM version
// rayform targets parses it: every option with its argparse action, value
// type and choices, and the way vLLM's FlexibleArgumentParser (underscores
// accepted for dashes) and Python argparse (unambiguous prefixes,
// --opt=value) bind a word to an option. rayform uses it to find what
// extra_args override; simnode uses it to accept exactly what real vLLM
// accepts.
//
// The options come from resources/clitables, generated from vLLM's own parser
// by scripts/gen-flag-tables; nothing here lists options by hand.
package vllmcli

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rayform/rayform/resources/clitables"
)

// Version is the vLLM version the table describes: the image's.
const Version = clitables.VLLMImage

// Action is how argparse consumes an option's values.
type Action int

// Actions.
const (
	// Store takes exactly one value.
	Store Action = iota
	// Append takes one value and may repeat (action="append").
	Append
	// Many takes one or more values (nargs='+').
	Many
	// MaybeOne takes zero or one value (nargs='?').
	MaybeOne
	// StoreTrue takes none and has no --no- form.
	StoreTrue
	// BoolOpt is argparse.BooleanOptionalAction: --x and --no-x, no value.
	BoolOpt
	// Help is -h/--help; Version prints the version.
	Help
	VersionAction
)

// Type is the conversion of an option's values (argparse's type=).
type Type int

// Value types, named as the tables name them.
const (
	Str Type = iota
	Int
	Float
	// HumanInt is vLLM's human_readable_int (32k, 1K, 25.6k).
	HumanInt
	// HumanIntOrAuto is human_readable_int_or_auto: also -1 and "auto".
	HumanIntOrAuto
	// JSON is parse_type(json.loads).
	JSON
	// DictOrStr is union_dict_and_str: a JSON object if it looks like one,
	// else the string.
	DictOrStr
	// Dataclass is a config dataclass validated from JSON (parse_dataclass).
	Dataclass
	// LowerUnderscore lower-cases and turns '-' into '_' (moe backends).
	LowerUnderscore
)

// Option is one optional argument of `vllm serve`.
type Option struct {
	// Names are the option strings as argparse registers them, long first,
	// the --no- forms of a BooleanOptionalAction included:
	// "--enable-expert-parallel", "--no-enable-expert-parallel", "-ep".
	Names []string
	// DestName is argparse's attribute name ("tensor_parallel_size").
	DestName string
	Action   Action
	Type     Type
	// Optional marks vLLM's optional_type wrapper: "" and "None" are None.
	Optional bool
	// TypeName is the table's name of the type ("optional:int").
	TypeName string
	// Choices are the Python reprs of the allowed converted values
	// ("'auto'", "16", "'None'"); nil when any value goes.
	Choices []string
	// Deprecated marks options vLLM warns about ("argument ... is
	// deprecated") but still accepts.
	Deprecated bool
	// Negatives are the option strings that set a BoolOpt false when they
	// are not its --no- forms: vLLM's EnableDisableAction
	// ("--enable-x"/"--disable-x", vllm/entrypoints/openai/cli_args.py).
	Negatives []string
}

// Long is the option's first long name.
func (o *Option) Long() string {
	for _, n := range o.Names {
		if strings.HasPrefix(n, "--") {
			return n
		}
	}
	return o.Names[0]
}

// Dest is argparse's attribute name ("tensor_parallel_size").
func (o *Option) Dest() string {
	if o.DestName != "" {
		return o.DestName
	}
	return strings.ReplaceAll(strings.TrimLeft(o.Long(), "-"), "-", "_")
}

// Strings are the option strings argparse registers.
func (o *Option) Strings() []string { return o.Names }

// Label is argparse's name for the option in errors: its option strings
// joined by '/'.
func (o *Option) Label() string { return strings.Join(o.Names, "/") }

// IsNegative reports whether given is the --no- form of a
// BooleanOptionalAction (argparse: option_string.startswith('--no-')).
func (o *Option) IsNegative(given string) bool {
	if o.Negatives != nil {
		return slices.Contains(o.Negatives, given)
	}
	return o.Action == BoolOpt && strings.HasPrefix(given, "--no-")
}

// Set is a parser's options, in registration order.
type Set []Option

// Lookup returns the option that has the exact option string s.
func (s Set) Lookup(name string) *Option {
	for i := range s {
		if slices.Contains(s[i].Names, name) {
			return &s[i]
		}
	}
	return nil
}

// FromTable converts a generated table into a Set, in registration order
// (-h/--help included, as argparse has it).
func FromTable(t *clitables.VLLM) (Set, error) { return fromTable(t, false) }

// fromTable is FromTable; lenient takes an action or value type it does
// not emulate as a plain string option (Store, Str), which is enough to
// tell which words the parser binds to which option, not to convert
// values.
func fromTable(t *clitables.VLLM, lenient bool) (Set, error) {
	var out Set
	for _, to := range t.Options {
		o := Option{Names: to.Strings, DestName: to.Dest, Deprecated: to.Deprecated, TypeName: to.TypeName()}
		var err error
		if o.Action, o.Negatives, err = actionOf(to, lenient); err != nil {
			return nil, err
		}
		tn := to.TypeName()
		if inner, ok := strings.CutPrefix(tn, "optional:"); ok {
			o.Optional, tn = true, inner
		}
		if o.Type, err = typeOf(to, tn, lenient); err != nil {
			return nil, err
		}
		if o.Choices, err = choicesOf(to, lenient); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// actionOf is the argparse action of table option to, as emulated, and
// the option strings that set it false (an EnableDisableAction's second).
// lenient takes an action not emulated as a store.
func actionOf(to clitables.VLLMOption, lenient bool) (Action, []string, error) {
	nargs := to.NargsString()
	switch {
	case to.Action == "help":
		return Help, nil, nil
	case to.Action == "version":
		return VersionAction, nil, nil
	case to.Action == "store_true":
		return StoreTrue, nil, nil
	case to.Action == "boolean_optional":
		return BoolOpt, nil, nil
	case to.Action == "class:EnableDisableAction" && nargs == "0" && len(to.Strings) == 2:
		// Its first string sets the option true, its second false.
		return BoolOpt, to.Strings[1:], nil
	case to.Action == "append" && nargs == "":
		return Append, nil, nil
	case to.Action == "store" && nargs == "":
		return Store, nil, nil
	case to.Action == "store" && nargs == "?":
		return MaybeOne, nil, nil
	case to.Action == "store" && nargs == "+",
		// cli_args.py LoRAParserAction: nargs='+', each value name=path or
		// a JSON object (its own JSON errors are not emulated).
		to.Action == "class:LoRAParserAction" && nargs == "+":
		return Many, nil, nil
	case lenient:
		return Store, nil, nil
	}
	return 0, nil, fmt.Errorf("vllm serve %s: action %s with nargs %q is not emulated", to.Strings[0], to.Action, nargs)
}

// typeOf is the value type named tn (without its optional: prefix) of
// table option to, as emulated; lenient takes a type not emulated as a
// string.
func typeOf(to clitables.VLLMOption, tn string, lenient bool) (Type, error) {
	switch {
	case tn == "" || tn == "str":
		return Str, nil
	case tn == "int":
		return Int, nil
	case tn == "float":
		return Float, nil
	case tn == "human_readable_int":
		return HumanInt, nil
	case tn == "human_readable_int_or_auto":
		return HumanIntOrAuto, nil
	case tn == "json":
		return JSON, nil
	case tn == "union_dict_and_str":
		return DictOrStr, nil
	case strings.HasPrefix(tn, "dataclass:"):
		return Dataclass, nil
	case tn == "lower_underscore":
		return LowerUnderscore, nil
	case lenient:
		return Str, nil
	}
	return 0, fmt.Errorf("vllm serve %s: type %s is not emulated", to.Strings[0], tn)
}

// choicesOf is the Python reprs of table option to's choices; lenient
// leaves out a choice of a kind not emulated.
func choicesOf(to clitables.VLLMOption, lenient bool) ([]string, error) {
	var out []string
	for _, c := range to.Choices {
		switch v := c.(type) {
		case string:
			out = append(out, PyRepr(v))
		case float64:
			out = append(out, fmt.Sprint(v))
		case nil:
			out = append(out, "None")
		case bool:
			out = append(out, map[bool]string{true: "True", false: "False"}[v])
		default:
			if lenient {
				continue
			}
			return nil, fmt.Errorf("vllm serve %s: choice %v is not emulated", to.Strings[0], c)
		}
	}
	return out, nil
}

// Options returns the `vllm serve` options of an embedded table's version.
func Options(version string) (Set, error) {
	t, err := clitables.LoadVLLM(version)
	if err != nil {
		return nil, err
	}
	return FromTable(t)
}

// OptionNames returns the `vllm serve` options of an embedded table's
// version for binding words to options (Resolve, Unknowns): an action or
// type the package does not emulate is read as a plain string option.
func OptionNames(version string) (Set, error) {
	t, err := clitables.LoadVLLM(version)
	if err != nil {
		return nil, err
	}
	return fromTable(t, true)
}

// ServeOptions are the options of `vllm serve` of the image's vLLM, in
// registration order, from the generated table.
func ServeOptions() Set {
	s, err := Options(Version)
	if err != nil {
		panic(err) // the embedded table is part of the build; its test catches this
	}
	return s
}

// PyRepr is Python's repr of a str.
func PyRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	var b strings.Builder
	b.WriteString(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case string(r) == q:
			b.WriteString(`\` + q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(q)
	return b.String()
}

// Match is what argparse makes of one command-line word.
type Match struct {
	// Option is nil for a positional or an unrecognized option.
	Option *Option
	// Given is the option string the word resolved to ("--no-enforce-eager").
	Given string
	// Negated is true for the --no- form of a BooleanOptionalAction.
	Negated bool
	// Value is the explicit value (after '=' or glued to a short option).
	Value    string
	HasValue bool
	// Ambiguous lists the option strings an ambiguous prefix could match.
	Ambiguous []string
	// Unknown is true for a word that looks like an option and matches none.
	Unknown bool
}

// Normalize applies vLLM's FlexibleArgumentParser to one word: in a long
// option's name (before '=' and before the first '.'), underscores become
// dashes.
func Normalize(word string) string {
	if !strings.HasPrefix(word, "--") {
		return word
	}
	key, val, hasVal := strings.Cut(word, "=")
	name := key[2:]
	head, rest, dotted := strings.Cut(name, ".")
	head = strings.ReplaceAll(head, "_", "-")
	if dotted {
		head += "." + rest
	}
	key = "--" + head
	if hasVal {
		return key + "=" + val
	}
	return key
}

// negativeNumber is argparse's _negative_number_matcher.
var negativeNumber = regexp.MustCompile(`^-\d+$|^-\d*\.\d+$`)

// Resolve binds one (normalized) word the way Python 3.12 argparse's
// _parse_optional does with allow_abbrev=True: an exact option string,
// then "--opt=value", then unique prefixes of long options (and of short
// options, with a value glued to a one-letter option).
func (s Set) Resolve(word string) Match {
	if !strings.HasPrefix(word, "-") || word == "-" {
		return Match{}
	}
	type cand struct {
		o     *Option
		given string
	}
	var all []cand
	for i := range s {
		for _, n := range s[i].Strings() {
			all = append(all, cand{&s[i], n})
		}
	}
	mk := func(c cand, val string, has bool) Match {
		return Match{Option: c.o, Given: c.given, Negated: c.o.IsNegative(c.given), Value: val, HasValue: has}
	}
	for _, c := range all {
		if c.given == word {
			return mk(c, "", false)
		}
	}
	if name, val, ok := strings.Cut(word, "="); ok {
		for _, c := range all {
			if c.given == name {
				return mk(c, val, true)
			}
		}
	}
	var found []cand
	var vals []string
	var has []bool
	if strings.HasPrefix(word, "--") {
		prefix, val, hasVal := strings.Cut(word, "=")
		for _, c := range all {
			if strings.HasPrefix(c.given, prefix) {
				found, vals, has = append(found, c), append(vals, val), append(has, hasVal)
			}
		}
	} else {
		short, glued := word[:min(2, len(word))], word[min(2, len(word)):]
		for _, c := range all {
			switch {
			case c.given == short:
				found, vals, has = append(found, c), append(vals, glued), append(has, true)
			case strings.HasPrefix(c.given, word):
				found, vals, has = append(found, c), append(vals, ""), append(has, false)
			}
		}
	}
	switch len(found) {
	case 0:
		// argparse takes negative numbers and words with spaces for
		// positionals (values).
		if negativeNumber.MatchString(word) || strings.Contains(word, " ") {
			return Match{}
		}
		return Match{Unknown: true}
	case 1:
		return mk(found[0], vals[0], has[0])
	}
	m := Match{}
	for _, c := range found {
		m.Ambiguous = append(m.Ambiguous, c.given)
	}
	return m
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

// LastValue is the value extra_args-style words give the option whose
// long name is long, as argparse binds them (any spelling Resolve
// accepts; the last occurrence wins; nothing after "--"); ok is false
// when no word sets it.
func (s Set) LastValue(args []string, long string) (value string, ok bool) {
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			break
		}
		m := s.Resolve(Normalize(args[i]))
		if m.Option == nil || m.Option.Action != Store {
			continue
		}
		v, has := m.Value, m.HasValue
		if !has && i+1 < len(args) {
			v, has = args[i+1], true
			i++
		}
		if has && m.Option.Long() == long {
			value, ok = v, true
		}
	}
	return value, ok
}

// ForInstalled returns the `vllm serve` options of the vLLM whose version
// an image reports (its distribution's version, local segment included:
// "0.32.0+cpu"), and the table version that describes it; ok is false when
// no embedded table describes that version (clitables.VLLMTableVersion).
func ForInstalled(installed string) (opts Set, table string, ok bool) {
	table, ok = clitables.VLLMTableVersion(installed)
	if !ok {
		return nil, table, false
	}
	s, err := OptionNames(table)
	if err != nil {
		return nil, table, false
	}
	return s, table, true
}

// LongNames are the long option strings of s, in registration order.
func (s Set) LongNames() []string {
	var out []string
	for i := range s {
		for _, n := range s[i].Names {
			if strings.HasPrefix(n, "--") {
				out = append(out, n)
			}
		}
	}
	return out
}

// Unknown is a word of a command line that looks like an option and that
// the parser matches to none.
type Unknown struct {
	// Index is the word's position in the arguments.
	Index int
	// Word is the word as given.
	Word string
	// Name is the option name it was read as (vLLM's normalisation, before
	// any '=' or '.'): what a suggestion is measured against.
	Name string
}

// Unknowns are the words of args (extra_args-style, after `vllm serve
// MODEL`) that argparse would refuse as unrecognized options: words that
// begin with '-', are not negative numbers, and match no option string,
// not even as an unambiguous prefix (after vLLM's underscore
// normalisation; "--opt.key" is read as --opt). Nothing after "--" counts.
func (s Set) Unknowns(args []string) []Unknown {
	var out []Unknown
	for i, a := range args {
		if a == "--" {
			break
		}
		word := Normalize(a)
		if name, _, ok := strings.Cut(strings.SplitN(word, "=", 2)[0], "."); ok && strings.HasPrefix(word, "--") {
			word = name
		}
		if m := s.Resolve(word); m.Unknown {
			name, _, _ := strings.Cut(word, "=")
			out = append(out, Unknown{Index: i, Word: a, Name: name})
		}
	}
	return out
}
