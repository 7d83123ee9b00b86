package raycli

import (
	"context"
	"fmt"
	"strings"

	"github.com/rayform/rayform/cmd/simnode/internal/click"
	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
	"github.com/rayform/rayform/cmd/simnode/internal/hw"
	"github.com/rayform/rayform/cmd/simnode/internal/pylog"
	"github.com/rayform/rayform/cmd/simnode/internal/raystate"
	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

const noCluster = "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by setting `--address` flag or `RAY_ADDRESS` environment variable."

// clientConnect finds and connects to the GCS the way Ray's CLI does
// (canonicalize_bootstrap_address_or_die, then GcsClient).
func clientConnect(ctx context.Context, p *sim.Proc, explicit string) (*gcs.Client, int) {
	addr := FindAddress(p.Env, explicit)
	if addr == "" {
		fmt.Fprintln(p.Stderr, noCluster)
		return nil, 1
	}
	tm := hw.DefaultTiming(p.Env)
	tm.GCSRetries = 1
	c, err := ConnectGCS(ctx, p, addr, tm, gcs.Hello{Role: "client"}, nil)
	if err != nil {
		return nil, 1
	}
	return c, 0
}

func status(ctx context.Context, p *sim.Proc, v *click.Values) int {
	c, code := clientConnect(ctx, p, v.Str("address"))
	if c == nil {
		return code
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		fmt.Fprintf(p.Stderr, "RuntimeError: %v\n", err)
		return 1
	}
	fmt.Fprint(p.Stdout, raystate.StatusText(p.Now(), st))
	return 0
}

func healthCheck(ctx context.Context, p *sim.Proc, v *click.Values) int {
	addr := FindAddress(p.Env, v.Str("address"))
	if addr == "" {
		fmt.Fprintln(p.Stderr, noCluster)
		return 1
	}
	c, err := gcs.Dial(ctx, addr, hw.DefaultTiming(p.Env).Get("gcs_connect_timeout"), gcs.Hello{Role: "client"}, nil)
	if err != nil {
		return 1
	}
	c.Close()
	return 0
}

type filter struct{ key, op, val string }

func parseFilter(s string) (filter, bool) {
	for _, op := range []string{"!=", "="} {
		if k, val, ok := strings.Cut(s, op); ok {
			return filter{strings.TrimSpace(k), op, strings.TrimSpace(val)}, true
		}
	}
	return filter{}, false
}

func list(ctx context.Context, p *sim.Proc, v *click.Values) int {
	var filters []filter
	if s := v.Str("filter"); s != "" {
		f, ok := parseFilter(s)
		if !ok {
			fmt.Fprintf(p.Stderr, "ValueError: Invalid filter `%s`. Filters should be in the format of `key=value` or `key!=value`.\n", s)
			return 1
		}
		filters = append(filters, f)
	}
	limit := 100
	if v.IsSet("limit") {
		limit = v.IntValue("limit")
	}
	var rows []pylog.KV
	if v.Args[0] == "nodes" {
		c, code := clientConnect(ctx, p, v.Str("address"))
		if c == nil {
			return code
		}
		defer c.Close()
		st, err := c.Status(ctx)
		if err != nil {
			fmt.Fprintf(p.Stderr, "RuntimeError: %v\n", err)
			return 1
		}
		gcs.SortNodes(st.Nodes)
		for _, n := range st.Nodes {
			row := raystate.NodeRow(n, v.Flag("detail"))
			if keep(row, filters) {
				rows = append(rows, row)
			}
		}
	}
	if len(rows) > limit {
		rows = rows[:limit]
	}
	switch v.Str("format") {
	case "json":
		if rows == nil {
			rows = []pylog.KV{}
		}
		fmt.Fprintln(p.Stdout, raystate.JSON(rows))
	case "yaml":
		fmt.Fprint(p.Stdout, raystate.YAML(rows))
	default:
		fmt.Fprint(p.Stdout, raystate.Table(p.Now(), rows))
	}
	return 0
}

func keep(row pylog.KV, fs []filter) bool {
	for _, f := range fs {
		got := ""
		for _, p := range row {
			if p.Key == f.key {
				switch x := p.Value.(type) {
				case bool:
					got = fmt.Sprint(x)
				default:
					got = fmt.Sprint(x)
				}
			}
		}
		eq := strings.EqualFold(got, f.val)
		if (f.op == "=" && !eq) || (f.op == "!=" && eq) {
			return false
		}
	}
	return true
}
