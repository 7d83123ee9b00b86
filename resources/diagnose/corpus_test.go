package diagnose

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// corpusDir holds real public logs, one per file, each with its
// "# source: <url>" and "# cause: <class>" (the thread's established
// cause; "healthy" for a start that did not fail). Rules follow the source
// messages, never a fixture: a fixture that comes out wrong is a finding.
const corpusDir = "../../testdata/diagnose/corpus"

// TestCorpus classifies every corpus log with no context (as `rayform
// diagnose FILE` does) and reports precision and recall per class; every
// fixture must be named right, and no healthy log may show a failure.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	type count struct{ tp, fp, fn int }
	per := map[string]*count{}
	get := func(c string) *count {
		if per[c] == nil {
			per[c] = &count{}
		}
		return per[c]
	}
	healthy, right, quiet := 0, 0, 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var want, source string
		var text []string
		for _, l := range strings.Split(string(raw), "\n") {
			switch {
			case strings.HasPrefix(l, "# source: "):
				source = strings.TrimPrefix(l, "# source: ")
			case strings.HasPrefix(l, "# cause: "):
				want = strings.TrimPrefix(l, "# cause: ")
			case strings.HasPrefix(l, "# "):
			default:
				text = append(text, l)
			}
		}
		name := filepath.Base(f)
		if want == "" || source == "" {
			t.Errorf("%s: no # source: or # cause: line", name)
			continue
		}
		d := Classify(Input{Logs: []Log{{Source: name, Text: []byte(strings.Join(text, "\n"))}}})
		got := string(d.Cause)
		if want == "healthy" {
			healthy++
			if d.Failure {
				t.Errorf("%s: healthy log, got cause %s:\n%s", name, got, d.Text())
				get(got).fp++
			} else {
				right++
				quiet++
			}
			continue
		}
		if got == want {
			get(want).tp++
			right++
			continue
		}
		get(want).fn++
		get(got).fp++
		t.Errorf("%s: cause %s, want %s:\n%s", name, got, want, d.Text())
	}
	classes := make([]string, 0, len(per))
	for c := range per {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	var b strings.Builder
	fmt.Fprintf(&b, "corpus: %d logs (%d healthy), %d named right\n", len(files), healthy, right)
	fmt.Fprintf(&b, "  failures: %d, cause named right %d; healthy: %d, given no cause %d\n", len(files)-healthy, right-quiet, healthy, quiet)
	for _, c := range classes {
		k := per[c]
		p, r := 1.0, 1.0
		if k.tp+k.fp > 0 {
			p = float64(k.tp) / float64(k.tp+k.fp)
		}
		if k.tp+k.fn > 0 {
			r = float64(k.tp) / float64(k.tp+k.fn)
		}
		fmt.Fprintf(&b, "  %-26s precision %.2f recall %.2f (tp %d fp %d fn %d)\n", c, p, r, k.tp, k.fp, k.fn)
	}
	// Per layer: a class's domain in the catalogues (the layer catalogues'
	// cuda, nvml, nccl, loader, weights, hub; catalogue.json's image,
	// distributed, ...), "rule" for a cause only a hand rule names.
	cat, err := loadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	layer := map[string]*count{}
	for _, c := range classes {
		d := cat.class(c).Domain
		if d == "" {
			d = "rule"
		}
		if layer[d] == nil {
			layer[d] = &count{}
		}
		layer[d].tp += per[c].tp
		layer[d].fp += per[c].fp
		layer[d].fn += per[c].fn
	}
	ls := make([]string, 0, len(layer))
	for l := range layer {
		ls = append(ls, l)
	}
	slices.Sort(ls)
	for _, l := range ls {
		k := layer[l]
		fmt.Fprintf(&b, "  layer %-20s tp %d fp %d fn %d\n", l, k.tp, k.fp, k.fn)
	}
	t.Log(b.String())
}
