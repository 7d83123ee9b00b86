package clitables

import (
	"slices"
	"strings"
	"testing"
)

// Every embedded table is whole: the version its name says, its provenance
// (who made it, when, with which Python and packages), options, and probes
// that all ran (an exit status recorded for each).
func TestTablesAreWhole(t *testing.T) {
	if got := Versions("vllm-serve"); !slices.Equal(got, []string{VLLMImage, VLLMLab, VLLMNewest}) {
		t.Errorf("vllm-serve tables %v, want %s, %s and %s", got, VLLMImage, VLLMLab, VLLMNewest)
	}
	if got := Versions("ray-start"); !slices.Equal(got, []string{RayImage, RayNewest}) {
		t.Errorf("ray-start tables %v, want %s and %s", got, RayImage, RayNewest)
	}
	for _, v := range Versions("vllm-serve") {
		tb := MustVLLM(v)
		p := tb.Provenance
		// The lab's CPU build is installed as 0.32.0+cpu (a local version).
		installed, _, _ := strings.Cut(p.Installed["vllm"], "+")
		if tb.Version != v || installed != v || p.Python == "" || p.Date == "" || p.Command == "" || p.Parser == "" {
			t.Errorf("vllm-serve-%s: version %q, provenance %+v", v, tb.Version, p)
		}
		if len(tb.Options) < 200 || len(tb.Probes) < len(tb.Options) || tb.Parser.Prog != "vllm serve" || !tb.Parser.AllowAbbrev {
			t.Errorf("vllm-serve-%s: %d options, %d probes, parser %+v", v, len(tb.Options), len(tb.Probes), tb.Parser)
		}
		for _, pr := range tb.Probes {
			if len(pr.Exit) == 0 || string(pr.Exit) == "null" {
				t.Errorf("vllm-serve-%s: probe %v has no result", v, pr.Args)
			}
		}
	}
	for _, v := range Versions("ray-start") {
		tb := MustRay(v)
		p := tb.Provenance
		if tb.Version != v || p.Installed["ray"] != v || p.Installed["click"] == "" || p.Python == "" || p.Date == "" {
			t.Errorf("ray-start-%s: version %q, provenance %+v", v, tb.Version, p)
		}
		if len(tb.Options) < 40 || len(tb.Probes) < len(tb.Options) {
			t.Errorf("ray-start-%s: %d options, %d probes", v, len(tb.Options), len(tb.Probes))
		}
	}
}

// What the image's tables say, as measured when they were generated
// (issue 21): vLLM 0.17.1's `vllm serve` has 222 options besides -h, with
// no option argparse or vLLM marks deprecated; Ray 2.53.0's `ray start` 48.
func TestImageCounts(t *testing.T) {
	n := 0
	for _, o := range MustVLLM(VLLMImage).Options {
		if o.Action != "help" {
			n++
		}
		if o.Deprecated {
			t.Errorf("%v is marked deprecated", o.Strings)
		}
	}
	if n != 222 {
		t.Errorf("vllm serve %s has %d options, want 222", VLLMImage, n)
	}
	if n := len(MustRay(RayImage).Options); n != 48 {
		t.Errorf("ray start %s has %d options, want 48", RayImage, n)
	}
}
