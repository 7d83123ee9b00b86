package run_test

import (
	"testing"

	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
)

// TestFindLock: force-unlock finds a resource's lock by its address or its
// key, on the host the configuration gives it before the state's; a
// resource only the state remembers by the state's host; none for a
// resource neither knows.
func TestFindLock(t *testing.T) {
	r := runner(t, newWorld(), twoSvcs, run.Options{})
	r.State.Set("svc.a", state.Resource{Type: "svc", Head: "n0"})
	r.State.Set("svc.old", state.Resource{Type: "svc", Head: "n9"})
	for _, tt := range []struct {
		arg, resource, host string
		ok                  bool
	}{
		{"svc.a", "svc.a", "n1", true},
		{"a", "svc.a", "n1", true},
		{"old", "svc.old", "n9", true},
		{"nope", "", "", false},
	} {
		got, ok := r.FindLock(tt.arg)
		if ok != tt.ok || got.Resource != tt.resource || got.Host != tt.host {
			t.Errorf("FindLock(%s) = %+v, %v; want %s on %s, %v", tt.arg, got, ok, tt.resource, tt.host, tt.ok)
		}
	}
}
