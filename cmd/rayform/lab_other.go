//go:build !linux

package main

import (
	"context"
	"fmt"
)

// runLab reports that the lab needs Linux (network namespaces).
func runLab(_ context.Context, c *cli, _ []string) int {
	fmt.Fprintln(c.stderr, "Error: rayform lab needs Linux (network namespaces, sshd, dockerd) and root")
	return exitError
}
