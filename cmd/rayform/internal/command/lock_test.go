package command

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources"
)

// Finding 9: the lock's holder record names the command that holds it.
func TestLockHolderNamesTheCommand(t *testing.T) {
	for _, op := range []string{"apply", "destroy"} {
		h := run.Holder(op)
		if !strings.HasSuffix(h, fmt.Sprintf(" pid=%d rayform %s", os.Getpid(), op)) || !strings.Contains(h, "@") {
			t.Errorf("run.Holder(%q) = %q, want who@host pid=N rayform %s", op, h, op)
		}
	}
}

// Issue 23, item 2: the locks cover the head and the name the state
// recorded for a cluster, not only the configuration's.
func TestLockTargetsCoverTheStatesHeads(t *testing.T) {
	src := `
node "a" {
  host = "10.0.0.1"
  gpus = 1
}
node "b" {
  host = "10.0.0.2"
  gpus = 1
}
ray_cluster "main" {
  image = "img"
  head  = node.b
}
`
	cfg, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{Kinds: resources.Kinds().Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	hosts := []state.Host{{Node: "a", Host: "10.0.0.1"}, {Node: "b", Host: "10.0.0.2"}}
	for _, tc := range []struct {
		name string
		set  func(*state.State)
		want []string
	}{
		{"no state", func(*state.State) {}, []string{"p.main@b"}},
		{"same head", func(st *state.State) {
			st.Set("ray_cluster.main", state.Resource{Type: "ray_cluster", Hosts: hosts, Head: "b"})
		}, []string{"p.main@b"}},
		{"another head", func(st *state.State) {
			st.Set("ray_cluster.main", state.Resource{Type: "ray_cluster", Hosts: hosts, Head: "a"})
		}, []string{"p.main@a", "p.main@b"}},
		{"renamed", func(st *state.State) {
			st.Set("ray_cluster.old", state.Resource{Type: "ray_cluster", Hosts: hosts, Head: "a"})
		}, []string{"p.main@b", "p.old@a"}},
		{"older state without a head", func(st *state.State) {
			st.Set("ray_cluster.main", state.Resource{Type: "ray_cluster", Hosts: hosts})
		}, []string{"p.main@a", "p.main@b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := state.New("p")
			if err != nil {
				t.Fatal(err)
			}
			tc.set(st)
			r := &run.Runner{Kinds: resources.Kinds(), Config: cfg, State: st, Project: "p"}
			got := r.LockNames()
			if !slices.Equal(got, tc.want) {
				t.Errorf("locks %v, want %v", got, tc.want)
			}
		})
	}
}
