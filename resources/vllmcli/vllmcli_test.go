package vllmcli

import (
	"slices"
	"strings"
	"testing"

	"github.com/rayform/rayform/resources/clitables"
)

// The image's table converts whole: every action, nargs and type of real
// vLLM's `vllm serve` is one the package emulates, in registration order.
func TestServeOptionsFromTable(t *testing.T) {
	table := clitables.MustVLLM(Version)
	got := ServeOptions()
	if len(got) != len(table.Options) {
		t.Fatalf("ServeOptions has %d options, the %s table %d", len(got), Version, len(table.Options))
	}
	for i, o := range got {
		if strings.Join(o.Names, " ") != strings.Join(table.Options[i].Strings, " ") || o.Dest() != table.Options[i].Dest {
			t.Errorf("option %d: %v (%s), table %v (%s)", i, o.Names, o.Dest(), table.Options[i].Strings, table.Options[i].Dest)
		}
	}
	ep := got.Lookup("-ep")
	if ep == nil || ep.Action != BoolOpt || ep.Label() != "--enable-expert-parallel/--no-enable-expert-parallel/-ep" {
		t.Errorf("-ep: %+v", ep)
	}
	bs := got.Lookup("--block-size")
	if bs == nil || bs.Type != Int || strings.Join(bs.Choices, ",") != "1,8,16,32,64,128,256" {
		t.Errorf("--block-size: %+v", bs)
	}
}

// Resolve follows argparse (allow_abbrev) after FlexibleArgumentParser's
// underscore rewriting.
func TestResolve(t *testing.T) {
	s := ServeOptions()
	tests := []struct {
		word, want, value  string
		negated, ambiguous bool
	}{
		{"--tensor-parallel-size", "--tensor-parallel-size", "", false, false},
		{Normalize("--tensor_parallel_size"), "--tensor-parallel-size", "", false, false},
		{"--tensor-parallel", "--tensor-parallel-size", "", false, false},
		{Normalize("--tensor_parallel=4"), "--tensor-parallel-size", "4", false, false},
		{"--port=9000", "--port", "9000", false, false},
		{"-tp", "--tensor-parallel-size", "", false, false},
		{"-t", "--tensor-parallel-size", "", false, false},
		{"-qfp8", "--quantization", "fp8", false, false},
		{"--no-enforce-eager", "--enforce-eager", "", true, false},
		{"--no-enforce", "--enforce-eager", "", true, false},
		{"--kv-cache-memory", "--kv-cache-memory-bytes", "", false, false},
		{"--max", "", "", false, true},
		{"--served", "--served-model-name", "", false, false},
	}
	for _, tt := range tests {
		m := s.Resolve(tt.word)
		if tt.ambiguous {
			if len(m.Ambiguous) < 2 {
				t.Errorf("%s: want ambiguous, got %+v", tt.word, m)
			}
			continue
		}
		if m.Option == nil || m.Option.Long() != tt.want || m.Value != tt.value || m.Negated != tt.negated {
			t.Errorf("%s: got %+v, want %s value %q negated %v", tt.word, m, tt.want, tt.value, tt.negated)
		}
	}
	for _, w := range []string{"--disable-log-requests", "--no-headless", "--foo"} {
		if m := s.Resolve(w); !m.Unknown {
			t.Errorf("%s: want unknown, got %+v", w, m)
		}
	}
	for _, w := range []string{"-1", "-0.5", "Qwen/Qwen3-8B"} {
		if m := s.Resolve(w); m.Option != nil || m.Unknown {
			t.Errorf("%s: want a positional, got %+v", w, m)
		}
	}
}

// LastValue binds words as argparse does: every spelling, the last wins,
// a flag's value is not taken for an option, nothing after "--".
func TestLastValue(t *testing.T) {
	opts := ServeOptions()
	tests := []struct {
		args []string
		want string
		ok   bool
	}{
		{[]string{"--kv-cache-memory-bytes", "64M", "--enforce-eager"}, "64M", true},
		{[]string{"--kv_cache_memory_bytes=1G"}, "1G", true},
		{[]string{"--kv-cache-memory-bytes", "1G", "--kv-cache-memory-bytes", "2G"}, "2G", true},
		{[]string{"--enforce-eager", "--dtype", "float32"}, "", false},
		{[]string{"--", "--kv-cache-memory-bytes", "1G"}, "", false},
	}
	for _, tc := range tests {
		got, ok := opts.LastValue(tc.args, "--kv-cache-memory-bytes")
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
	for in, want := range map[string]int{"64M": 64 << 20, "50m": 50_000_000, "25.6k": 25600, "4096": 4096} {
		if n, err := ParseHumanInt(in); err != nil || n != want {
			t.Errorf("ParseHumanInt(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
}

// Every embedded table converts (an image of any of these versions gets its
// extra_args checked), and the installed version's local segment picks the
// release's table: the lab's real vLLM reports 0.32.0+cpu.
func TestForInstalled(t *testing.T) {
	for _, tc := range []struct {
		installed, table string
		ok               bool
	}{
		{"0.17.1", "0.17.1", true},
		{"0.32.0+cpu", "0.32.0", true},
		{"v0.33.0", "0.33.0", true},
		{"0.11.0", "0.11.0", false},
	} {
		opts, table, ok := ForInstalled(tc.installed)
		if table != tc.table || ok != tc.ok || ok && len(opts) < 200 {
			t.Errorf("ForInstalled(%q) = %d options, %q, %v; want %q, %v", tc.installed, len(opts), table, ok, tc.table, tc.ok)
		}
	}
}

// Unknowns finds the words vLLM's parser would refuse as unrecognized, and
// nothing else: values, negative
// numbers, prefixes, underscores, the --no- and --disable- forms, and
// words after "--" pass.
func TestUnknowns(t *testing.T) {
	for _, tc := range []struct {
		version string
		args    []string
		want    []Unknown
	}{
		{"0.32.0", []string{"--enforce-eagr"}, []Unknown{{0, "--enforce-eagr", "--enforce-eagr"}}},
		{"0.32.0", []string{"--dtype", "float32", "--enforce_eager", "--max-num-seqs=4"}, nil},
		{"0.32.0", []string{"--seed", "-1", "--no-enable-prefix-caching"}, nil},
		{"0.32.0", []string{"--swap-space", "4"}, []Unknown{{0, "--swap-space", "--swap-space"}}},
		{"0.17.1", []string{"--swap-space", "4"}, nil},
		{"0.33.0", []string{"--disable-auto-tool-choice"}, nil},
		{"0.32.0", []string{"--kv-cache-memroy-bytes=1G", "--", "--whatever"}, []Unknown{{0, "--kv-cache-memroy-bytes=1G", "--kv-cache-memroy-bytes"}}},
		{"0.32.0", []string{"--frobnicate-everything"}, []Unknown{{0, "--frobnicate-everything", "--frobnicate-everything"}}},
	} {
		opts, err := OptionNames(tc.version)
		if err != nil {
			t.Fatal(err)
		}
		if got := opts.Unknowns(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("vLLM %s: Unknowns(%q) = %+v, want %+v", tc.version, tc.args, got, tc.want)
		}
	}
}

// EnableDisableAction's second string is its negative form.
func TestEnableDisableNegative(t *testing.T) {
	opts, err := OptionNames("0.33.0")
	if err != nil {
		t.Fatal(err)
	}
	for word, neg := range map[string]bool{"--enable-auto-tool-choice": false, "--disable-auto-tool-choice": true} {
		if m := opts.Resolve(word); m.Option == nil || m.Negated != neg {
			t.Errorf("Resolve(%q) = %+v, want negated %v", word, m, neg)
		}
	}
}
