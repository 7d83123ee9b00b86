package kind_test

import (
	"slices"
	"testing"

	"github.com/rayform/rayform/engine/kind"
)

// TestRegistry: a registry finds a kind by block type and by address,
// lists the types that have a trait or an optional part in registration
// order, and With finds the kinds of one optional interface.
func TestRegistry(t *testing.T) {
	r := kind.Registry{bare{}, logged{}}
	for _, tt := range []struct {
		name string
		got  kind.Kind
		want string // "" for none
	}{
		{"of bare", r.Of("bare"), "bare"},
		{"at logged.x", r.At("logged.x"), "logged"},
		{"of unknown", r.Of("dns"), ""},
		{"at unknown", r.At("dns.x"), ""},
	} {
		got := ""
		if tt.got != nil {
			got = tt.got.Schema().Type
		}
		if got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := r.TypesWith(kind.HasLogs); !slices.Equal(got, []string{"logged"}) {
		t.Errorf("TypesWith(HasLogs) = %v", got)
	}
	if got := kind.With[kind.KindWithLogs](r); len(got) != 1 || got[0].Schema().Type != "logged" {
		t.Errorf("With[KindWithLogs] = %v", got)
	}
	if got := r.Schemas(); len(got) != 2 || got[0].Type != "bare" || got[1].Type != "logged" {
		t.Errorf("Schemas = %v", got)
	}
}

// TestShared: what a walk's steps share is found under its key, nil under
// another or in no walk.
func TestShared(t *testing.T) {
	type key struct{}
	var s kind.Shared
	s.Set(key{}, 7)
	if s.Value(key{}) != 7 || s.Value("other") != nil {
		t.Errorf("Value = %v, %v", s.Value(key{}), s.Value("other"))
	}
	var none *kind.Shared
	if none.Value(key{}) != nil {
		t.Error("a value outside of a walk")
	}
}
