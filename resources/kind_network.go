package resources

import "github.com/rayform/rayform/resources/network"

// Network is a network block, the network kind's Go type
// (resources/network).
type Network = network.Network
