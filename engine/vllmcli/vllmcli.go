// Package vllmcli is the command line of `vllm serve` as the vLLM version
// rayform targets parses it: every option with its argparse action and value
// type, and the way vLLM's FlexibleArgumentParser (underscores accepted for
// dashes) and Python argparse (unambiguous prefixes, --opt=value) bind a word
// to an option. rayform uses it to find what extra_args override; simnode
// uses it to accept exactly what real vLLM accepts.
//
// The table follows the upstream sources listed in
// testdata/simnode/SOURCES.md; testdata/simnode/vllm/serve-flags.txt is the
// cited list it is tested against.
package vllmcli

import (
	"regexp"
	"slices"
	"strings"
)

// Version is the vLLM version the table describes.
const Version = "0.17.1"

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
)

// Type is the type of an option's values.
type Type int

// Value types.
const (
	Str Type = iota
	Int
	Float
	// HumanInt is vLLM's human_readable_int (32k, 1K, 25.6k).
	HumanInt
	// JSON is a JSON object (or dotted keys, --opt.key value).
	JSON
)

// Option is one optional argument of `vllm serve`.
type Option struct {
	// Names are the option strings, long first: "--tensor-parallel-size", "-tp".
	Names   []string
	Action  Action
	Type    Type
	Choices []string
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
	return strings.ReplaceAll(strings.TrimLeft(o.Long(), "-"), "-", "_")
}

// Strings are the option strings argparse registers, with the --no- forms
// of a BooleanOptionalAction after their positive form.
func (o *Option) Strings() []string {
	out := append([]string(nil), o.Names...)
	if o.Action == BoolOpt {
		for _, n := range o.Names {
			if strings.HasPrefix(n, "--") {
				out = append(out, "--no-"+n[2:])
			}
		}
	}
	return out
}

// Label is argparse's name for the option in errors: its option strings
// joined by '/'.
func (o *Option) Label() string { return strings.Join(o.Strings(), "/") }

// Set is a parser's options, in registration order.
type Set []Option

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
		return Match{Option: c.o, Given: c.given, Negated: c.o.Action == BoolOpt && strings.HasPrefix(c.given, "--no-") && !slices.Contains(c.o.Names, c.given), Value: val, HasValue: has}
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
