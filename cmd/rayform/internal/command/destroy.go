package command

import (
	"context"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/run"
)

// runDestroy stops and removes everything rayform created.
func runDestroy(ctx context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseDestroy, args)
	if !ok {
		return code
	}
	s, code := openSession(m, m.View, a.Run, false)
	if s == nil {
		return code
	}
	defer s.close()
	return s.apply(ctx, run.ApplyRequest{AutoApprove: a.AutoApprove, Destroy: true})
}
