package arguments

import (
	"strings"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/resources"
)

// Logs is rayform logs' command line.
type Logs struct {
	*Run
	// Query is the logs asked for: the address, the node, -f, -tail,
	// -since and -previous (the caller adds the configuration and the
	// project).
	Query kind.LogQuery
}

// ParseLogs parses rayform logs' arguments.
func ParseLogs(args []string) (*Logs, *ParseError) {
	o, p, json := newRun("logs", "logs [options] ADDRESS\n\n  Print the logs of ADDRESS, each line prefixed by its node: for a vllm_serve,\n  the vllm serve log on its head; for a ray_cluster, its containers' logs\n  (docker logs) on every node. -f follows them until Ctrl-C.")
	a := &Logs{Run: o}
	q := &a.Query
	p.fs.StringVar(&q.Node, "node", "", "only the logs of node `NAME`")
	p.fs.BoolVar(&q.Follow, "f", false, "follow the logs as they grow, until interrupted")
	p.fs.IntVar(&q.Tail, "tail", 100, "print the last `N` lines of each log first (-1: all)")
	p.fs.BoolVar(&q.Previous, "previous", false, "vllm_serve only: the log of the serve's previous process (a failed or replaced start), which the next start keeps")
	p.fs.StringVar(&q.Since, "since", "", "ray_cluster only: logs since `D`, a duration (10m) or a timestamp (2026-12-01T10:00:00Z), as docker logs --since takes")
	pos, err := p.parseInterspersed(args)
	o.ViewType = viewType(*json)
	switch {
	case err != nil:
		return a, err
	case len(pos) != 1:
		return a, p.errorf("logs takes one argument, a resource address (%s)", strings.TrimPrefix(run.LogAddresses(resources.Kinds()), "a "))
	}
	q.Address = pos[0]
	return a, nil
}
