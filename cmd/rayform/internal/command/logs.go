package command

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/cmd/rayform/internal/views"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/transport"
)

// runLogs prints (or follows) a resource's logs over the session's SSH
// connections, each line prefixed by its node: a vllm_serve's log file on
// its head, a ray_cluster's containers' logs (docker logs) on every node.
func runLogs(ctx context.Context, m *Meta, args []string) int {
	a, code, ok := parse(m, arguments.ParseLogs, args)
	if !ok {
		return code
	}
	view := views.NewLogs(m.View)
	s, code := openSession(m, m.View, a.Run, true)
	if s == nil {
		return code
	}
	defer s.close()
	q := a.Query
	q.Config, q.Project = s.cfg, s.project
	cmds, err := run.Logs(s.run.Kinds, q)
	if err != nil {
		view.Error(err)
		return ExitError
	}
	if err := s.logs(ctx, view, cmds); err != nil {
		view.Error(err)
		return ExitError
	}
	return ExitOK
}

// logs runs every node's log command at once, their lines through view.
func (s *session) logs(ctx context.Context, view *views.Logs, cmds []kind.LogCommand) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cmds))
	width := 0
	for _, lc := range cmds {
		width = max(width, len(lc.Node))
	}
	for i, lc := range cmds {
		conn, ok := s.conns[lc.Node]
		if !ok {
			errs[i] = fmt.Errorf("no SSH settings for node %s", lc.Node)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errw, flush := view.Node(lc.Node, width)
			_, err := conn.Run(ctx, transport.Cmd{Script: lc.Script, Stdout: out, Stderr: errw})
			flush()
			if err != nil && ctx.Err() == nil {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
