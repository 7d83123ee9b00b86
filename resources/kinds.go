// Package resources is the registry of rayform's resource kinds: which
// kinds exist, in the order they are planned and the README documents
// them. Each kind lives in a package of its own (node, network, cluster,
// serve, model) and implements the engine's contract (engine/kind);
// engine/run drives them through it. Registering a kind is one line here.
package resources

import (
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/model"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/node"
	"github.com/rayform/rayform/resources/serve"
)

// Kinds returns the resource kinds rayform knows, in the order they are
// planned.
func Kinds() kind.Registry {
	return kind.Registry{node.Kind{}, network.Kind{}, cluster.Kind{}, serve.Kind{}, model.Kind{}}
}
