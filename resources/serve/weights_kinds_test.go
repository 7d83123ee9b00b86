package serve_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/resourcestest"
	"github.com/rayform/rayform/resources/serve"
)

// stash is the Go type of a toy kind whose blocks provide a serve's
// weights (serve.Weights): a kind the serve and the cluster have never
// heard of.
type stash struct {
	config.Decl
	Name   string `rayform:",name"`
	Source string `rayform:"source"`
	Dir    string `rayform:"dir"`
	Rev    string `rayform:"rev"`
}

func (s *stash) Provides(m string) bool      { return m == s.Source }
func (s *stash) HostDir() string             { return s.Dir }
func (s *stash) ServeEnv() map[string]string { return map[string]string{"STASH_DIR": s.Dir} }
func (s *stash) Revision() string            { return s.Rev }
func (s *stash) Files() (dir, ref string)    { return s.Dir + "/" + s.Source, "" }

var _ serve.Weights = (*stash)(nil)

func stashKind() config.Kind {
	return config.Kind{
		Type: "stash",
		Args: []config.Arg{
			{Name: "source", Type: cty.String, Required: true, Exported: true},
			{Name: "dir", Type: cty.String, Required: true, Exported: true},
			{Name: "rev", Type: cty.String, Exported: true},
		},
		New: func() any { return &stash{} },
	}
}

// TestWeightsFromAnotherKind: a block of any kind whose value provides a
// serve's model (serve.Weights) is where the serve's weights come
// from: the cluster's containers mount its directory, the serve runs with
// its environment and revision (extra_args' wins), and the preflight reads
// config.json where it says. Without one, nothing of it appears.
func TestWeightsFromAnotherKind(t *testing.T) {
	src := `
node "a" {
  host = "10.0.0.1"
  gpus = 1
}
ray_cluster "main" {
  image = "img"
  head  = node.a
}
stash "w" {
  source = "Org/M"
  dir    = "/srv/stash"
  rev    = "0123456789abcdef0123456789abcdef01234567"
}
vllm_serve "s" {
  cluster = ray_cluster.main
  model   = stash.w.source
}
vllm_serve "pinned" {
  cluster    = ray_cluster.main
  model      = stash.w.source
  port       = 8001
  extra_args = ["--revision", "v2"]
}
`
	cfg, diags := resourcestest.LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: ".", Kinds: append(resources.Kinds().Schemas(), stashKind())})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	rc := cfg.RayClusters["main"]
	specs := cluster.ClusterSpecs(cluster.View(cfg.Config), rc, map[string]netip.Addr{}, nil)
	if len(specs) != 1 || !slices.Contains(specs[0].Volumes, "/srv/stash:/srv/stash:ro") {
		t.Errorf("cluster volumes %v, want the stash mounted read-only", specs[0].Volumes)
	}
	s, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["s"])
	if err != nil {
		t.Fatal(err)
	}
	if s.Env["STASH_DIR"] != "/srv/stash" || !slices.Contains(s.Args, "0123456789abcdef0123456789abcdef01234567") {
		t.Errorf("serve env %v args %v, want the stash's", s.Env, s.Args)
	}
	pinned, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["pinned"])
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pinned.Args, "0123456789abcdef0123456789abcdef01234567") {
		t.Errorf("extra_args' revision lost to the stash's: %v", pinned.Args)
	}
	spec := run.ObserveSpec(resources.Kinds(), cfg.Config, nil, "p", false)
	var reads []string
	for _, r := range spec.Hosts["a"].Reads {
		reads = append(reads, r.Path)
	}
	if !slices.Contains(reads, "/srv/stash/Org/M/config.json") {
		t.Errorf("preflight reads %v, want the stash's config.json", reads)
	}

	// The same serve without the stash: no mount, no environment.
	plain, diags := resourcestest.LoadFiles(map[string][]byte{"main.hcl": []byte(`
node "a" {
  host = "10.0.0.1"
  gpus = 1
}
ray_cluster "main" {
  image = "img"
  head  = node.a
}
vllm_serve "s" {
  cluster = ray_cluster.main
  model   = "Org/M"
}
`)}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if v := cluster.ClusterSpecs(cluster.View(plain.Config), plain.RayClusters["main"], map[string]netip.Addr{}, nil)[0].Volumes; len(v) != 0 {
		t.Errorf("volumes %v without a provider", v)
	}
}
