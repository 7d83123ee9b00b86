package run_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRunReachesKindsOnlyThroughTheContract: engine/run's own code imports
// no package of the resources (nor of the CLI), and its every type
// assertion is to an optional interface of the contract
// (kind.KindWith...): the run drives the registered kinds through
// engine/kind alone, never through a kind's own types.
func TestRunReachesKindsOnlyThroughTheContract(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked, asserts := 0, 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range []string{"github.com/rayform/rayform/resources", "github.com/rayform/rayform/cmd/"} {
				if path == bad || strings.HasPrefix(path, strings.TrimSuffix(bad, "/")+"/") {
					t.Errorf("%s imports %s", name, path)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var typ ast.Expr
			switch x := n.(type) {
			case *ast.TypeAssertExpr:
				typ = x.Type
			case *ast.TypeSwitchStmt:
				t.Errorf("%s: a type switch: the run asks a kind through the contract's interfaces, one at a time", fset.Position(x.Pos()))
				return true
			default:
				return true
			}
			asserts++
			if !contractInterface(typ) {
				t.Errorf("%s: a type assertion to %s, not to an optional interface of the contract (kind.KindWith...)", fset.Position(n.Pos()), exprString(typ))
			}
			return true
		})
	}
	if checked < 5 || asserts == 0 {
		t.Fatalf("checked %d files and %d type assertions: the scan is broken", checked, asserts)
	}
}

// contractInterface reports whether typ names kind.KindWith...
func contractInterface(typ ast.Expr) bool {
	sel, ok := typ.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "kind" && strings.HasPrefix(sel.Sel.Name, "KindWith")
}

// exprString is typ as written, roughly.
func exprString(typ ast.Expr) string {
	switch x := typ.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(x.X)
	}
	return "an expression"
}
