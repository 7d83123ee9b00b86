// Package engine_test enforces the layering of the engine: it never imports
// the resources (what blocks mean) nor the SSH implementation; only
// cmd/rayform wires those in, and it reaches the kinds only through the
// resources package (the registry), never a kind's package.
package engine_test

import (
	"os/exec"
	"strings"
	"testing"
)

func TestEngineLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "github.com/rayform/rayform/engine/...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	forbidden := []string{"github.com/rayform/rayform/resources", "github.com/rayform/rayform/engine/transport/ssh", "github.com/rayform/rayform/cmd/"}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		if strings.HasPrefix(pkg, "github.com/rayform/rayform/engine/transport/ssh") {
			continue
		}
		checked++
		for _, dep := range strings.Fields(deps) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d engine packages: the listing is wrong", checked)
	}
}

// TestCLILayering: cmd/rayform parses and shows; it reaches the kinds and
// what they share (resources/cluster, serve, model, node, network,
// hostenv, kind, diagnose, dataplane...) only through the resources
// package, the registry and its wiring.
func TestCLILayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "github.com/rayform/rayform/cmd/rayform").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	resources := false
	for _, imp := range imports {
		if imp == "github.com/rayform/rayform/resources" {
			resources = true
		}
		if strings.HasPrefix(imp, "github.com/rayform/rayform/resources/") {
			t.Errorf("cmd/rayform imports %s: reach it through github.com/rayform/rayform/resources", imp)
		}
	}
	if !resources {
		t.Fatalf("cmd/rayform does not import the resources package: the listing is wrong (%v)", imports)
	}
}
