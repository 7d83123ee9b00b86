package resources

import "github.com/rayform/rayform/resources/node"

// Node is a node block, the node kind's Go type (resources/node).
type Node = node.Node
