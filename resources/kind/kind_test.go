package kind_test

import (
	"errors"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/kind"
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

// TestBase: a kind with nothing on the hosts does nothing and has no logs.
func TestBase(t *testing.T) {
	var b kind.Base
	if b.Steps(nil, nil) != nil || b.PrepareSteps(nil, nil) != nil || b.Locks(nil, nil) != nil || b.Starting(nil, nil) != nil {
		t.Error("Base does something")
	}
	if _, err := b.Logs(kind.LogQuery{}); !errors.Is(err, kind.ErrNoLogs) {
		t.Errorf("Logs: %v", err)
	}
}
