package vllmcli

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Entry is one line of testdata/simnode/vllm/serve-flags.txt.
type entry struct {
	names        []string
	action, typ  string
	source, line string
	lineNo       int
}

func readFlagTable(t *testing.T) []entry {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "simnode", "vllm", "serve-flags.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []entry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 4 || cols[3] == "" {
			t.Fatalf("serve-flags.txt:%d: want 4 tab-separated columns with a source, got %q", n, line)
		}
		out = append(out, entry{names: strings.Fields(cols[0]), action: cols[1], typ: cols[2], source: cols[3], line: line, lineNo: n})
	}
	return out
}

func actionName(a Action) string {
	return map[Action]string{Store: "store", Append: "append", Many: "nargs+", MaybeOne: "nargs?", StoreTrue: "store_true", BoolOpt: "boolean_optional"}[a]
}

func typeName(o *Option) string {
	if o.Action == StoreTrue || o.Action == BoolOpt {
		return "-"
	}
	if len(o.Choices) > 0 {
		return "choice:" + strings.Join(o.Choices, ",")
	}
	return map[Type]string{Str: "str", Int: "int", Float: "float", HumanInt: "human_int", JSON: "json"}[o.Type]
}

// The table in code is exactly the cited list: same options, same order,
// same actions and value types.
func TestServeOptionsMatchCitedList(t *testing.T) {
	want := readFlagTable(t)
	got := ServeOptions()
	if len(got) != len(want) {
		t.Errorf("ServeOptions has %d options, serve-flags.txt %d", len(got), len(want))
	}
	for i := 0; i < min(len(got), len(want)); i++ {
		o, e := &got[i], want[i]
		if strings.Join(o.Names, " ") != strings.Join(e.names, " ") || actionName(o.Action) != e.action || typeName(o) != e.typ {
			t.Errorf("serve-flags.txt:%d is %s %s %s; ServeOptions()[%d] is %s %s %s", e.lineNo, strings.Join(e.names, " "), e.action, e.typ,
				i, strings.Join(o.Names, " "), actionName(o.Action), typeName(o))
		}
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
