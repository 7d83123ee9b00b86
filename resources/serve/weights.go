package serve

import (
	"fmt"
	"maps"
	"slices"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/cluster"
)

// Weights is implemented by the Go value of a block that provides the
// weights a vllm_serve loads (a model block whose source the serve's model
// names): the serve runs with its environment and revision and reads its
// config.json where it says, and the cluster's containers mount its
// directory. The serve finds it among the blocks of every kind
// (weightsFor), by value, not by kind.
type Weights interface {
	// Provides reports whether the block provides serveModel, a serve's
	// model argument.
	Provides(serveModel string) bool
	// HostDir is the directory on every host that the cluster's
	// containers mount at the same path.
	HostDir() string
	// ServeEnv is the serve's environment for loading the weights from
	// there.
	ServeEnv() map[string]string
	// Revision is the revision the serve runs (--revision), "" for the
	// default; a revision extra_args names wins.
	Revision() string
	// Files is where config.json lies on the hosts: its directory, and
	// with ref the file naming the component observe.RefPlaceholder
	// stands for in it.
	Files() (dir, ref string)
}

// weightsFor is the block of cfg that provides sv's weights, nil when none
// does (the serve loads its model as vLLM does by itself).
func weightsFor(cfg *Blocks, sv *VLLMServe) Weights {
	if cfg == nil || cfg.Config == nil {
		return nil
	}
	for _, typ := range cfg.Config.Kinds() {
		blocks := cfg.Config.Blocks(typ)
		for _, name := range slices.Sorted(maps.Keys(blocks)) {
			if w, ok := blocks[name].(Weights); ok && w.Provides(sv.Model) {
				return w
			}
		}
	}
	return nil
}

// weightsArgs are a serve's arguments for its weights' provider: the
// revision it names, unless extra_args names one.
func weightsArgs(cfg *Blocks, sv *VLLMServe) []string {
	w := weightsFor(cfg, sv)
	if w == nil || serveRevision(sv.ExtraArgs) != "main" {
		return nil
	}
	if r := w.Revision(); r != "" && r != "main" {
		return []string{"--revision", r}
	}
	return nil
}

// weightsEnv sets in env (a serve's environment) what its weights'
// provider sets, over the serve's own.
func weightsEnv(cfg *Blocks, sv *VLLMServe, env map[string]string) {
	if w := weightsFor(cfg, sv); w != nil {
		maps.Copy(env, w.ServeEnv())
	}
}

// locateWeights is locateModel, answered by the block that provides the
// serve's weights when there is one: where it says config.json lies.
func locateWeights(cfg *Blocks, rc *cluster.RayCluster, sv *VLLMServe) modelFiles {
	w := weightsFor(cfg, sv)
	if w == nil {
		return locateModel(rc, sv)
	}
	dir, ref := w.Files()
	mf := modelFiles{Dir: dir, Ref: ref}
	if err := (observe.HostSpec{Reads: []observe.ReadProbe{mf.config()}}).Validate(); err != nil {
		return modelFiles{Why: fmt.Sprintf("the host path %s cannot be read by the probe (%v)", mf.Dir, err)}
	}
	return mf
}
