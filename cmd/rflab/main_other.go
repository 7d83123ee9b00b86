//go:build !linux

package main

import (
	"fmt"
	"os"
)

// main reports that the lab needs Linux (network namespaces).
func main() {
	fmt.Fprintln(os.Stderr, "Error: rflab needs Linux (network namespaces, sshd, dockerd) and root")
	os.Exit(1)
}
