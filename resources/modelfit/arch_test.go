package modelfit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadRegistry(t *testing.T, name string) Registry {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var r Registry
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCheckArchitecture(t *testing.T) {
	oldImage := loadRegistry(t, "registry-old-image.json")
	newImage := loadRegistry(t, "registry-new-image.json")
	// transformers knows qwen2 but vLLM lacks Qwen2ForCausalLM: vLLM's
	// Transformers backend may take it.
	archOnlyMissing := newImage
	archOnlyMissing.Architectures = oldImage.Architectures
	// vLLM has Qwen2ForCausalLM but transformers lacks qwen2.
	typeOnlyMissing := oldImage
	typeOnlyMissing.Architectures = newImage.Architectures
	withAutoMap := func(c ModelConfig) ModelConfig { c.AutoMap = true; return c }
	tests := []struct {
		name      string
		model     string
		edit      func(ModelConfig) ModelConfig
		reg       Registry
		trust     bool
		want      []Severity
		inSummary string
		inFix     string
		skipped   string
	}{
		{name: "llama on an old image", model: "llama-3.2-1b-instruct", reg: oldImage},
		{name: "qwen2 on a new image", model: "qwen2-7b-instruct", reg: newImage},
		{name: "qwen2.5 on an old image", model: "qwen2.5-7b-instruct", reg: oldImage, want: []Severity{Error},
			inSummary: `architecture Qwen2ForCausalLM, model_type "qwen2" (vLLM 0.1.2, transformers 4.31.0)`, inFix: "newer vLLM image"},
		{name: "architecture missing, model_type known", model: "qwen2-7b-instruct", reg: archOnlyMissing, want: []Severity{Warning},
			inSummary: "has no model code for Qwen2ForCausalLM"},
		{name: "model_type unknown to transformers", model: "qwen2-7b-instruct", reg: typeOnlyMissing, want: []Severity{Error},
			inSummary: `transformers does not know model_type "qwen2"`},
		{name: "auto_map without --trust-remote-code", model: "qwen2-7b-instruct", edit: withAutoMap, reg: oldImage, want: []Severity{Error},
			inFix: `add "--trust-remote-code" to extra_args`},
		{name: "auto_map with --trust-remote-code", model: "qwen2-7b-instruct", edit: withAutoMap, reg: oldImage, trust: true, want: []Severity{Warning}},
		{name: "auto_map with --trust-remote-code, architecture known", model: "qwen2-7b-instruct", edit: withAutoMap, reg: typeOnlyMissing, trust: true},
		{name: "image without vLLM", model: "qwen2.5-7b-instruct", reg: Registry{Transformers: "4.57.1", Unchecked: "the image has no vLLM Python package (No module named 'vllm')"},
			skipped: "no vLLM Python package"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := load(t, tt.model)
			if tt.edit != nil {
				c = tt.edit(c)
			}
			got, skipped := CheckArchitecture(c, tt.reg, tt.trust)
			var sev []Severity
			for _, f := range got {
				sev = append(sev, f.Severity)
				if f.Attribute != "model" {
					t.Errorf("attribute %q, want model", f.Attribute)
				}
			}
			if len(sev) != len(tt.want) || (len(sev) > 0 && sev[0] != tt.want[0]) {
				t.Fatalf("severities %v, want %v: %+v", sev, tt.want, got)
			}
			if tt.inSummary != "" && !strings.Contains(got[0].Summary, tt.inSummary) {
				t.Errorf("summary %q lacks %q", got[0].Summary, tt.inSummary)
			}
			if tt.inFix != "" && !strings.Contains(got[0].Fix, tt.inFix) {
				t.Errorf("fix %q lacks %q", got[0].Fix, tt.inFix)
			}
			if !strings.Contains(skipped, tt.skipped) || (tt.skipped == "") != (skipped == "") {
				t.Errorf("skipped %q, want %q", skipped, tt.skipped)
			}
		})
	}
}
