// Package clitables holds the option tables of `vllm serve` and `ray start`
// generated from the real packages' own parsers by scripts/gen-flag-tables
// (vLLM's FlexibleArgumentParser as its `vllm` entry point builds it, Ray's
// click command), one JSON file per version with its provenance and the
// recorded results of probe command lines run through the real entry
// points. Nothing here is transcribed by hand: refresh the files with the
// script and review the diff.
package clitables

import (
	"embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The versions the tables describe: the image's (the seeds'
// vllm/vllm-openai:v0.17.1, which ships Ray 2.53.0), the lab image's real
// vLLM (`rflab up -vllm real`: vLLM 0.32.0's CPU build, its table
// made from the lab's own image layers) and the newest on PyPI when the
// tables were generated. scripts/gen-flag-tables pins the same.
const (
	VLLMImage  = "0.17.1"
	VLLMLab    = "0.32.0"
	VLLMNewest = "0.33.0"
	RayImage   = "2.53.0"
	RayNewest  = "2.60.0"
)

//go:embed *.json
var files embed.FS

// Provenance says where a table came from.
type Provenance struct {
	Command   string            `json:"command"`
	Date      string            `json:"date"`
	Python    string            `json:"python"`
	Installed map[string]string `json:"installed"`
	Parser    string            `json:"parser"`
	Probes    string            `json:"probes"`
}

// Probe is one command line run through the real entry point, with what it
// printed on stderr and its exit status: an int, or "exception" where vLLM's
// own code raised after parsing (a traceback, not argparse).
type Probe struct {
	Note   string          `json:"note"`
	Args   []string        `json:"args"`
	Exit   json.RawMessage `json:"exit"`
	Stderr string          `json:"stderr"`
}

// ExitCode is the probe's exit status and whether it was a plain exit (not
// an exception raised by vLLM's own checks after parsing).
func (p Probe) ExitCode() (int, bool) {
	var n int
	if err := json.Unmarshal(p.Exit, &n); err != nil {
		return 0, false
	}
	return n, true
}

// VLLMOption is one argparse action of `vllm serve`.
type VLLMOption struct {
	// Strings are the option strings as registered, the --no- forms of a
	// BooleanOptionalAction included ("--enforce-eager", "--no-enforce-eager").
	Strings []string `json:"strings"`
	Dest    string   `json:"dest"`
	// Action is argparse's action: store, store_true, boolean_optional,
	// append, help, version, ...
	Action string `json:"action"`
	// Nargs is null (one value), "?", "+", "*" or a number.
	Nargs json.RawMessage `json:"nargs"`
	// Type names the conversion: str, int, float, human_readable_int,
	// human_readable_int_or_auto, json, union_dict_and_str,
	// dataclass:<Name>, lower_underscore, optional:<inner>.
	Type *string `json:"type"`
	// Choices are the allowed converted values (strings or numbers).
	Choices    []any `json:"choices"`
	Default    any   `json:"default"`
	Required   bool  `json:"required"`
	Suppressed bool  `json:"suppressed_help"`
	Deprecated bool  `json:"deprecated"`
}

// NargsString is Nargs as text: "" for null.
func (o *VLLMOption) NargsString() string {
	s := strings.TrimSpace(string(o.Nargs))
	if s == "" || s == "null" {
		return ""
	}
	return strings.Trim(s, `"`)
}

// TypeName is Type, "" when null.
func (o *VLLMOption) TypeName() string {
	if o.Type == nil {
		return ""
	}
	return *o.Type
}

// VLLMParser describes the parsers around the options.
type VLLMParser struct {
	Prog           string   `json:"prog"`
	Usage          string   `json:"usage"`
	TopProg        string   `json:"top_prog"`
	TopUsage       string   `json:"top_usage"`
	AllowAbbrev    bool     `json:"allow_abbrev"`
	TopAllowAbbrev bool     `json:"top_allow_abbrev"`
	Class          string   `json:"class"`
	Subcommands    []string `json:"subcommands"`
}

// VLLM is the table of one vLLM version.
type VLLM struct {
	Version     string       `json:"version"`
	Provenance  Provenance   `json:"provenance"`
	Parser      VLLMParser   `json:"parser"`
	Positionals []VLLMOption `json:"positionals"`
	Options     []VLLMOption `json:"options"`
	Probes      []Probe      `json:"probes"`
}

// RayOption is one click option of `ray start`.
type RayOption struct {
	Name          string   `json:"name"`
	Opts          []string `json:"opts"`
	SecondaryOpts []string `json:"secondary_opts"`
	IsFlag        bool     `json:"is_flag"`
	Count         bool     `json:"count"`
	// Type is click's type name: text, integer, float, boolean, choice,
	// integer range, or a function's name (loads).
	Type       string   `json:"type"`
	Choices    []string `json:"choices"`
	Multiple   bool     `json:"multiple"`
	Required   bool     `json:"required"`
	Hidden     bool     `json:"hidden"`
	Deprecated any      `json:"deprecated"`
	Help       string   `json:"help"`
	Default    any      `json:"default"`
}

// Ray is the table of one Ray version.
type Ray struct {
	Version    string      `json:"version"`
	Provenance Provenance  `json:"provenance"`
	Options    []RayOption `json:"options"`
	Probes     []Probe     `json:"probes"`
}

func load(name string, v any) error {
	b, err := files.ReadFile(name)
	if err != nil {
		return fmt.Errorf("no option table %s (generate it with scripts/gen-flag-tables): %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("option table %s: %w", name, err)
	}
	return nil
}

// LoadVLLM returns the `vllm serve` table of version.
func LoadVLLM(version string) (*VLLM, error) {
	t := &VLLM{}
	if err := load("vllm-serve-"+version+".json", t); err != nil {
		return nil, err
	}
	return t, nil
}

// VLLMTableVersion is the table version that describes an installed vLLM
// whose version string is installed: PEP 440's public version, without a
// leading "v" and without the local segment that builds such as vLLM's
// own CPU wheels add ("0.32.0+cpu" is described by 0.32.0's table: a
// local version labels the build, not the command line). ok is false when
// no embedded table has that version.
func VLLMTableVersion(installed string) (version string, ok bool) {
	version = PublicVersion(installed)
	for _, v := range Versions("vllm-serve") {
		if v == version {
			return v, true
		}
	}
	return version, false
}

// PublicVersion is a PEP 440 version without its local segment ("+cpu",
// "+cu130") and without a leading "v": what releases are compared by.
func PublicVersion(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	v, _, _ = strings.Cut(v, "+")
	return v
}

// LoadRay returns the `ray start` table of version.
func LoadRay(version string) (*Ray, error) {
	t := &Ray{}
	if err := load("ray-start-"+version+".json", t); err != nil {
		return nil, err
	}
	return t, nil
}

// MustVLLM is LoadVLLM for the versions embedded at build time; a missing
// or broken table is a build defect, caught by the package's tests.
func MustVLLM(version string) *VLLM {
	t, err := LoadVLLM(version)
	if err != nil {
		panic(err)
	}
	return t
}

// MustRay is LoadRay for the embedded versions.
func MustRay(version string) *Ray {
	t, err := LoadRay(version)
	if err != nil {
		panic(err)
	}
	return t
}

// Versions lists the embedded tables' versions of tool ("vllm-serve",
// "ray-start"), sorted.
func Versions(tool string) []string {
	ents, _ := files.ReadDir(".")
	var out []string
	for _, e := range ents {
		if v, ok := strings.CutPrefix(e.Name(), tool+"-"); ok {
			out = append(out, strings.TrimSuffix(v, ".json"))
		}
	}
	sort.Strings(out)
	return out
}

// OptionStrings returns every option string the table accepts.
func (t *VLLM) OptionStrings() []string {
	var out []string
	for _, o := range t.Options {
		out = append(out, o.Strings...)
	}
	return out
}

// OptionStrings returns every option string of the command (secondary
// --no-x spellings included).
func (t *Ray) OptionStrings() []string {
	var out []string
	for _, o := range t.Options {
		out = append(out, o.Opts...)
		out = append(out, o.SecondaryOpts...)
	}
	return out
}
