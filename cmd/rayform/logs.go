package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/termtext"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources"
)

// logsArgs are rayform logs' arguments, parsed.
type logsArgs struct {
	run    runOptions
	addr   string
	node   string
	follow bool
	tail   int
	since  string
	// previous asks for the log of a serve's previous process.
	previous bool
}

// parseLogsArgs parses rayform logs' arguments; ok false when parsing
// ended the command (with code).
func parseLogsArgs(c *cli, args []string) (a logsArgs, code int, ok bool) {
	fs := newFlagSet(c, "logs", "logs [options] ADDRESS\n\n  Print the logs of ADDRESS, each line prefixed by its node: for a vllm_serve,\n  the vllm serve log on its head; for a ray_cluster, its containers' logs\n  (docker logs) on every node. -f follows them until Ctrl-C.")
	a.run.register(fs)
	fs.StringVar(&a.node, "node", "", "only the logs of node `NAME`")
	fs.BoolVar(&a.follow, "f", false, "follow the logs as they grow, until interrupted")
	fs.IntVar(&a.tail, "tail", 100, "print the last `N` lines of each log first (-1: all)")
	fs.BoolVar(&a.previous, "previous", false, "vllm_serve only: the log of the serve's previous process (a failed or replaced start), which the next start keeps")
	fs.StringVar(&a.since, "since", "", "ray_cluster only: logs since `D`, a duration (10m) or a timestamp (2026-12-01T10:00:00Z), as docker logs --since takes")
	pos, code, ok := parseInterspersed(fs, args)
	if !ok {
		return a, code, false
	}
	if len(pos) != 1 {
		fmt.Fprintf(c.stderr, "Error: logs takes one argument, a resource address (%s)\n", strings.TrimPrefix(run.LogAddresses(resources.Kinds()), "a "))
		return a, exitError, false
	}
	a.addr = pos[0]
	return a, exitOK, true
}

// runLogs prints (or follows) a resource's logs over the session's SSH
// connections, each line prefixed by its node: a vllm_serve's log file on
// its head, a ray_cluster's containers' logs (docker logs) on every node.
func runLogs(ctx context.Context, c *cli, args []string) int {
	a, code, ok := parseLogsArgs(c, args)
	if !ok {
		return code
	}
	a.run.readOnly = true
	s, code := openSession(c, &a.run)
	if s == nil {
		return code
	}
	defer s.close()
	cmds, err := run.Logs(s.run.Kinds, kind.LogQuery{Config: s.cfg, Project: s.project, Address: a.addr, Node: a.node, Follow: a.follow, Tail: a.tail, Since: a.since, Previous: a.previous})
	if err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	var mu sync.Mutex
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
			prefix := fmt.Sprintf("%-*s | ", width, lc.Node)
			out := &prefixWriter{mu: &mu, w: c.stdout, prefix: prefix}
			errw := &prefixWriter{mu: &mu, w: c.stderr, prefix: prefix}
			_, err := conn.Run(ctx, transport.Cmd{Script: lc.Script, Stdout: out, Stderr: errw})
			out.flush()
			errw.flush()
			if err != nil && ctx.Err() == nil {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(c.stderr, "Error: %v\n", err)
		return exitError
	}
	return exitOK
}

// prefixWriter writes complete lines to w, each prefixed, under a mutex
// shared by every node's writers, so lines of different nodes never mix.
// A line ends at \n or \r (a progress bar's redraw becomes lines of its
// own), and reaches w with its terminal control sequences removed
// (termtext.Plain): a log is data, and must not retitle, clear or write the
// clipboard of the operator's terminal.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
	// cr is set when the last line ended at a \r: a \n right after it
	// ends the same line.
	cr bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexAny(p.buf, "\r\n")
		if i < 0 {
			break
		}
		line, sep := p.buf[:i], p.buf[i]
		p.buf = p.buf[i+1:]
		if i == 0 && sep == '\n' && p.cr {
			p.cr = false
			continue
		}
		p.cr = sep == '\r'
		p.emit(line)
	}
	return len(b), nil
}

// emit writes one line, prefixed and made plain.
func (p *prefixWriter) emit(line []byte) {
	p.mu.Lock()
	fmt.Fprintf(p.w, "%s%s\n", p.prefix, termtext.Plain(line))
	p.mu.Unlock()
}

// flush writes a last line without a newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.emit(p.buf)
		p.buf = nil
	}
}
