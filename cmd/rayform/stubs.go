package main

import (
	"context"
	"fmt"
)

// Placeholders replaced by the real commands as they land.

func runValidate(_ context.Context, c *cli, _ []string) int {
	fmt.Fprintln(c.stderr, "Error: validate is not implemented yet")
	return exitError
}

func runGraph(_ context.Context, c *cli, _ []string) int {
	fmt.Fprintln(c.stderr, "Error: graph is not implemented yet")
	return exitError
}
