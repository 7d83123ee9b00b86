package kind_test

import (
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
)

// TestExported: an output may show a kind's exported arguments and its
// computed attributes, not the others.
func TestExported(t *testing.T) {
	got := kind.Exported(config.Kind{
		Args:     []config.Arg{{Name: "a", Type: cty.String, Exported: true}, {Name: "secret", Type: cty.String}},
		Computed: []config.Attr{{Name: "c"}},
	})
	if !got["a"] || !got["c"] || got["secret"] || len(got) != 2 {
		t.Errorf("Exported = %v, want a and c", got)
	}
}

// TestUsable: a host is judged by its facts when observed completely, or
// in part with its error noted; not when unobserved or failed outright.
func TestUsable(t *testing.T) {
	facts := &observe.Facts{Hosts: map[string]*observe.HostFacts{
		"ok":      {},
		"partial": {Err: "gpus: timeout", Complete: true},
		"failed":  {Err: "connection refused"},
	}}
	for node, want := range map[string]bool{"ok": true, "partial": true, "failed": false, "absent": false} {
		if got := kind.Usable(facts, node) != nil; got != want {
			t.Errorf("Usable(%s) = %v, want %v", node, got, want)
		}
	}
	if kind.Usable(nil, "ok") != nil {
		t.Error("Usable of no facts")
	}
}

type doer string

func (d doer) Container() string { return string(d) }

// TestWorkContainer: a work's container is its kind's value's, none
// without one.
func TestWorkContainer(t *testing.T) {
	if got := (&kind.Work{Do: doer("rayform-main")}).Container(); got != "rayform-main" {
		t.Errorf("Container = %q", got)
	}
	var none *kind.Work
	if none.Container() != "" || (&kind.Work{}).Container() != "" {
		t.Error("a work without a value has a container")
	}
}

// bare is a kind of the required core only; logged one with logs too.
type bare struct{}

func (bare) Schema() config.Kind                             { return config.Kind{Type: "bare"} }
func (bare) Traits() kind.Traits                             { return kind.Traits{} }
func (bare) Plan(kind.Planner)                               {}
func (logged) Schema() config.Kind                           { return config.Kind{Type: "logged"} }
func (logged) Traits() kind.Traits                           { return kind.Traits{} }
func (logged) Plan(kind.Planner)                             {}
func (logged) Logs(kind.LogQuery) ([]kind.LogCommand, error) { return nil, nil }

type logged struct{}

// TestHasLogs: a kind has logs when it implements WithLogs, not otherwise.
func TestHasLogs(t *testing.T) {
	if kind.HasLogs(bare{}) || !kind.HasLogs(logged{}) {
		t.Errorf("HasLogs(bare) = %v, HasLogs(logged) = %v", kind.HasLogs(bare{}), kind.HasLogs(logged{}))
	}
}

// block is the Go type of a test block type "b".
type block struct {
	config.Decl
	N int `rayform:"n"`
}

// TestBlocksOf: a configuration's blocks of one type, as their Go type,
// by name; none of another type.
func TestBlocksOf(t *testing.T) {
	schema := config.Kind{Type: "b", Args: []config.Arg{{Name: "n", Type: cty.Number}}, New: func() any { return &block{} }}
	cfg, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte("b \"x\" {\n  n = 1\n}\nb \"y\" {\n  n = 2\n}\n")}, config.Options{Kinds: []config.Kind{schema}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := kind.BlocksOf[block](cfg, "b")
	if len(got) != 2 || got["x"].N != 1 || got["y"].N != 2 {
		t.Errorf("BlocksOf = %v", got)
	}
	if len(kind.BlocksOf[block](cfg, "other")) != 0 {
		t.Error("blocks of a type the configuration has none of")
	}
}
