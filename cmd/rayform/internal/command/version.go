package command

import (
	"context"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
)

// runVersion prints the rayform version.
func runVersion(_ context.Context, m *Meta, args []string) int {
	if _, code, ok := parse(m, arguments.ParseVersion, args); !ok {
		return code
	}
	views.NewVersion(m.View).Version(m.version)
	return ExitOK
}
