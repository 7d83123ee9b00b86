package config

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeDocumentsLanguage checks that the README's HCL reference names
// every argument of the language's own blocks (variable, output, locals)
// and every function, so the reference cannot fall behind the code. The
// resource kinds' tables are generated from their schemas, and the pinned
// environment variables are checked beside them (resources,
// TestReadmeReference, TestReadmeDocumentsPinnedEnv).
func TestReadmeDocumentsLanguage(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "<!-- BEGIN: hcl-reference")
	end := strings.Index(s, "<!-- END: hcl-reference -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no hcl-reference section")
	}
	ref := s[start:end]
	want := map[string][]string{}
	for _, kind := range []string{kindOutput, kindVariable} {
		want["`"+kind+` "NAME"`+"`"] = nil
	}
	for _, a := range outputArgs() {
		want["output"] = append(want["output"], "`"+a.Name+"`")
	}
	for _, a := range variableSchema().Attributes {
		want["variable"] = append(want["variable"], "`"+a.Name+"`")
	}
	want["variable"] = append(want["variable"], "`validation`", "`condition`", "`error_message`", "`locals`", "RAYFORM_VAR_")
	for _, f := range functionNames() {
		want["functions"] = append(want["functions"], "`"+f+"(")
	}
	for what, needles := range want {
		if needles == nil && !strings.Contains(ref, what) {
			t.Errorf("README hcl-reference lacks the heading %s", what)
		}
		for _, n := range needles {
			if !strings.Contains(ref, n) {
				t.Errorf("README hcl-reference does not document %s (%s)", n, what)
			}
		}
	}
}
