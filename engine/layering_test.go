// Package engine_test enforces the layering of the engine: it never imports
// the resources (what blocks mean) nor the SSH implementation, its tests
// included, and it knows no Ray and no vLLM (their tables, argument models
// and probes live with the kinds that use them); only cmd/rayform wires
// those in, and it hands the kinds (the resources package, the registry)
// to the engine, which drives them.
package engine_test

import (
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestEngineLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-test", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "github.com/rayform/rayform/engine/...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	forbidden := []string{"github.com/rayform/rayform/resources", "github.com/rayform/rayform/engine/transport/ssh", "github.com/rayform/rayform/cmd/"}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		// A test variant is "PKG [PKG.test]" or "PKG_test [PKG.test]".
		name, _, _ := strings.Cut(pkg, " ")
		name = strings.TrimSuffix(strings.TrimSuffix(name, ".test"), "_test")
		if strings.HasPrefix(name, "github.com/rayform/rayform/engine/transport/ssh") {
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
	if checked < 20 {
		t.Fatalf("checked only %d engine packages and their tests: the listing is wrong", checked)
	}
}

// rayOrVLLM is Ray's or vLLM's name in a word (rayform itself is not).
var rayOrVLLM = regexp.MustCompile(`(?i)(^|[^a-z])ray($|[^f])|vllm`)

// TestEngineKnowsNoRayOrVLLM: no identifier or string of the engine's own
// code (comments and tests aside) names Ray or vLLM.
func TestEngineKnowsNoRayOrVLLM(t *testing.T) {
	files := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		fset := token.NewFileSet()
		var s scanner.Scanner
		s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if (tok == token.IDENT || tok == token.STRING) && rayOrVLLM.MatchString(lit) {
				t.Errorf("%s: %s names Ray or vLLM", fset.Position(pos), lit)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read only %d engine files: the walk is wrong", files)
	}
}

// TestCLILayering: cmd/rayform (main and its internal packages: the
// commands, their arguments and their views) parses and shows; it hands
// the registered kinds (the resources package) to engine/run, which
// drives them, and reaches no kind's package nor what the kinds share
// (resources/cluster, model, node, network, stepenv, hostplan...), but for the
// commands that are not runs: the data-plane check (resources/serve's
// Checker, with resources/dataplane's options) and the log classifier
// (resources/diagnose).
func TestCLILayering(t *testing.T) {
	allowed := map[string]bool{
		"github.com/rayform/rayform/resources/serve":     true,
		"github.com/rayform/rayform/resources/dataplane": true,
		"github.com/rayform/rayform/resources/diagnose":  true,
	}
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "github.com/rayform/rayform/cmd/rayform/...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	resources := false
	for _, imp := range imports {
		if imp == "github.com/rayform/rayform/resources" {
			resources = true
		}
		if strings.HasPrefix(imp, "github.com/rayform/rayform/resources/") && !allowed[imp] {
			t.Errorf("cmd/rayform imports %s: reach it through github.com/rayform/rayform/resources", imp)
		}
	}
	if !resources {
		t.Fatalf("cmd/rayform does not import the resources package: the listing is wrong (%v)", imports)
	}
}
