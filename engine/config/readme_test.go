package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeDocumentsLanguage checks that the README's HCL reference names
// every block, argument, exported attribute, function and pinned
// environment variable, so the reference cannot fall behind the code.
func TestReadmeDocumentsLanguage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
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
	for _, kind := range []string{kindNode, kindNetwork, kindRayCluster, kindVLLMServe, kindOutput, kindVariable} {
		want["`"+kind+` "NAME"`+"`"] = nil
		for _, a := range kindSpecs(kind) {
			want[kind] = append(want[kind], "`"+a.Name+"`")
		}
		for _, a := range exportAttrs(kind) {
			want[kind+" export"] = append(want[kind+" export"], "`"+a+"`")
		}
	}
	want["node"] = append(want["node"], "`for_each`")
	for _, a := range variableSchema().Attributes {
		want["variable"] = append(want["variable"], "`"+a.Name+"`")
	}
	want["variable"] = append(want["variable"], "`validation`", "`condition`", "`error_message`", "`locals`", "RAYFORM_VAR_")
	for _, f := range functionNames() {
		want["functions"] = append(want["functions"], "`"+f+"(")
	}
	for k := range pinnedEnv() {
		want["env"] = append(want["env"], "`"+k+"`")
	}
	want["env"] = append(want["env"], "--node-ip-address")
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
