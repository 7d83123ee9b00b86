//go:build linux

package lab

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenFiles pins the files a default lab writes for its clients
// (testdata/lab/ at the repository root): rayform.hcl, ssh_config, the head's
// sshd_config and hardware.json.
func TestGoldenFiles(t *testing.T) {
	c, err := Config{Dir: "/tmp/rayform-lab-rflab"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := c.nodes()
	if err != nil {
		t.Fatal(err)
	}
	l := &Lab{Name: c.Name, Dir: c.Dir, ClientNetns: c.Name + "-client", Nodes: nodes, Docker: true,
		SSHConfig: filepath.Join(c.Dir, "ssh_config"), KnownHosts: filepath.Join(c.Dir, "known_hosts"), Key: filepath.Join(c.Dir, "id_ed25519")}
	hw, err := nodes[0].hardwareJSON(c.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"rayform.hcl":          l.rayformHCL(),
		"ssh_config":           l.sshConfig(),
		"spark1.sshd_config":   nodes[0].sshdConfig(filepath.Join(c.Dir, "authorized_keys")),
		"spark1.hardware.json": string(hw),
	}
	for name, got := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("..", "..", "..", "testdata", "lab", name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, path, got, want)
			}
		})
	}
}
