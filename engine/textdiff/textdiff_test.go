package textdiff

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUnified(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"one line changed", "a\n", "b\n", "--- A\n+++ B\n@@ -1 +1 @@\n-a\n+b\n"},
		{"insert into empty", "", "x\n", "--- A\n+++ B\n@@ -0,0 +1 @@\n+x\n"},
		{"delete all", "x\ny\n", "", "--- A\n+++ B\n@@ -1,2 +0,0 @@\n-x\n-y\n"},
		{
			"context is three lines",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			"1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			"--- A\n+++ B\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
		},
		{
			"distant changes make two hunks",
			"a\n1\n2\n3\n4\n5\n6\n7\nb\n",
			"A\n1\n2\n3\n4\n5\n6\n7\nB\n",
			"--- A\n+++ B\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -6,4 +6,4 @@\n 5\n 6\n 7\n-b\n+B\n",
		},
		{
			"changes six lines apart share a hunk",
			"a\n1\n2\n3\n4\n5\n6\nb\n",
			"A\n1\n2\n3\n4\n5\n6\nB\n",
			"--- A\n+++ B\n@@ -1,8 +1,8 @@\n-a\n+A\n 1\n 2\n 3\n 4\n 5\n 6\n-b\n+B\n",
		},
		{
			"missing final newline",
			"a\nb",
			"a\nb\n",
			"--- A\n+++ B\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
		},
		{
			"insertion in the middle",
			"a\nc\n",
			"a\nb\nc\n",
			"--- A\n+++ B\n@@ -1,2 +1,3 @@\n a\n+b\n c\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(Unified("A", "B", []byte(tt.a), []byte(tt.b)))
			if got != tt.want {
				t.Errorf("wrong diff\ngot:\n%s\nwant:\n%s", got, tt.want)
			}
			if got != "" {
				if patched := applyOrFail(t, tt.a, got); patched != tt.b {
					t.Errorf("patch gives %q, want %q", patched, tt.b)
				}
			}
		})
	}
}

// TestUnifiedApplies checks on random edits that applying the diff
// to the old text always yields the new text.
func TestUnifiedApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a\n", "b\n", "c\n", "}\n", "  x = 1\n", "\n"}
	gen := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = words[r.IntN(len(words))]
		}
		return out
	}
	for i := range 300 {
		a := gen(r.IntN(30))
		b := append([]string(nil), a...)
		for k := r.IntN(5); k > 0; k-- {
			p := r.IntN(len(b) + 1)
			switch r.IntN(3) {
			case 0:
				b = append(b[:p], append(gen(1+r.IntN(3)), b[p:]...)...)
			case 1:
				if p < len(b) {
					b = append(b[:p], b[p+1:]...)
				}
			default:
				if p < len(b) {
					b[p] = words[r.IntN(len(words))]
				}
			}
		}
		as, bs := strings.Join(a, ""), strings.Join(b, "")
		if r.IntN(4) == 0 && len(bs) > 0 {
			bs = strings.TrimSuffix(bs, "\n")
		}
		d := string(Unified("A", "B", []byte(as), []byte(bs)))
		if (d == "") != (as == bs) {
			t.Fatalf("case %d: empty diff %v for equal %v", i, d == "", as == bs)
		}
		if d != "" {
			if got := applyOrFail(t, as, d); got != bs {
				t.Fatalf("case %d: patch of\n%q\nwith\n%s\ngives %q, want %q", i, as, d, got, bs)
			}
		}
	}
}

// applyOrFail is Apply, failing the test on a diff that does not apply.
func applyOrFail(t *testing.T, a, diff string) string {
	t.Helper()
	out, err := Apply(a, diff)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
