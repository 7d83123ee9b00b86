package command

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/resources"
)

// TestSSHHosts: each node's SSH settings come from its block (its
// identity file under the home directory, its bastion as ProxyJump); a
// node on "localhost" with nothing else is run locally; a node only the
// state remembers is reached as the state recorded it, a node the
// configuration declares as the configuration says.
func TestSSHHosts(t *testing.T) {
	src := `
node "a" {
  host          = "10.0.0.1"
  user          = "ops"
  port          = 2222
  identity_file = "~/.ssh/spark"
  bastion       = node.jump
}

node "jump" {
  host = "10.0.0.9"
}

node "me" {
  host = "localhost"
}
`
	cfg, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: ".", Kinds: resources.Kinds().Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := state.New("p")
	if err != nil {
		t.Fatal(err)
	}
	st.Set("ray_cluster.old", state.Resource{Type: "ray_cluster", Hosts: []state.Host{{Node: "gone", Host: "10.0.0.5", User: "root", Port: 22}, {Node: "a", Host: "10.9.9.9"}}})
	hosts, local := sshHosts(cfg, st)
	home, _ := os.UserHomeDir()
	a := hosts["a"]
	if a.HostName != "10.0.0.1" || a.User != "ops" || a.Port != 2222 || a.ProxyJump != "jump" || len(a.IdentityFiles) != 1 || a.IdentityFiles[0] != filepath.Join(home, ".ssh/spark") {
		t.Errorf("node a: %+v", a)
	}
	if g := hosts["gone"]; g.HostName != "10.0.0.5" || g.User != "root" || g.Port != 22 {
		t.Errorf("node only the state remembers: %+v", g)
	}
	if _, ok := hosts["me"]; ok || !local["me"] || len(local) != 1 || len(hosts) != 3 {
		t.Errorf("hosts %v, local %v: want a, jump and gone over SSH, me local", hosts, local)
	}
}
