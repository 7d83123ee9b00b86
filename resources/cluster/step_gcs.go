package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/stepenv"
)

// gcsStep checks that each worker opens a TCP connection to the head's GCS
// on its fabric address before the worker starts.
type gcsStep struct {
	r       *clusterRun
	workers []string
	// addr is the GCS's "ip:port".
	addr string
}

func newGCSStep(r *clusterRun, workers []string) *gcsStep {
	addr := r.c.HeadAddr
	if addr == "" {
		addr = r.head.HeadAddr
	}
	return &gcsStep{r: r, workers: workers, addr: addr}
}

// Name names the GCS's address and the workers.
func (s *gcsStep) Name() string {
	return fmt.Sprintf("reach the GCS at %s from %s", s.addr, stepenv.DescribeNodes(s.workers))
}

// Check always runs the check.
func (s *gcsStep) Check(context.Context) (bool, error) { return false, nil }

// Run opens a connection to the GCS from every worker, in parallel.
func (s *gcsStep) Run(ctx context.Context, _ func(string)) error {
	host, port, ok := splitHostPort(s.addr)
	if !ok {
		return fmt.Errorf("the head's GCS address %q is not ip:port", s.addr)
	}
	return s.r.e.ForEach(ctx, s.workers, func(ctx context.Context, node string) error {
		res, err := s.r.e.Run(ctx, node, transport.Cmd{Script: tcpScript(host, port)})
		if err != nil {
			msg := strings.TrimSpace(string(res.Stderr))
			if msg == "" {
				msg = err.Error()
			}
			return fmt.Errorf("%s cannot open a TCP connection to the ray head's GCS at %s (%s): %s\n"+
				"Fix: check that %s reaches %s over the fabric (ip route get %s on %s) and that no firewall on %s blocks port %s",
				node, s.addr, s.r.head.Node, msg, node, host, host, node, s.r.head.Node, port)
		}
		return nil
	})
}

// Verify has nothing to read back.
func (s *gcsStep) Verify(context.Context) error { return nil }

// tcpScript opens and closes a TCP connection to host:port within 3
// seconds: bash's /dev/tcp under timeout(1), else nc -z.
func tcpScript(host, port string) string {
	h, p := shell.Quote(host), shell.Quote(port)
	return "if command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then " +
		"timeout 3 bash -c 'exec 3<>\"/dev/tcp/$1/$2\"' rayform " + h + " " + p + "; " +
		"elif command -v nc >/dev/null 2>&1; then nc -z -w 3 " + h + " " + p + "; " +
		"else echo 'rayform: no way to test TCP (need bash and timeout, or nc)' >&2; exit 127; fi"
}

func splitHostPort(addr string) (string, string, bool) {
	i := strings.LastIndex(addr, ":")
	if i <= 0 || i == len(addr)-1 {
		return "", "", false
	}
	return strings.Trim(addr[:i], "[]"), addr[i+1:], true
}
