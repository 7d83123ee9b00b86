package resources

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeDocumentsKinds checks that the README's HCL reference names
// every resource kind, each of its arguments and exported attributes.
func TestReadmeDocumentsKinds(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ref := string(b)
	for _, k := range Kinds() {
		if h := "`" + k.Type + ` "NAME"` + "`"; !strings.Contains(ref, h) {
			t.Errorf("README lacks the heading %s", h)
		}
		for _, a := range k.Args {
			if !strings.Contains(ref, "`"+a.Name+"`") {
				t.Errorf("README does not document %s's %s", k.Type, a.Name)
			}
		}
		for _, a := range k.Exports() {
			if !strings.Contains(ref, "`"+a+"`") {
				t.Errorf("README does not document %s's attribute %s", k.Type, a)
			}
		}
	}
}
