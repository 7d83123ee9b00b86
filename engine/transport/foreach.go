package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ForEach calls fn once for every host, at most parallelism at a time
// (parallelism <= 0 means all at once), and waits for all of them.
//
// One host failing never stops the others: every error is kept, wrapped with
// its host ("gpu-1: ..."), and the result is errors.Join of them in the order
// of hosts, so errors.Is and errors.As see every cause. If ctx ends, hosts
// that have not started yet are not started and report ctx.Err(); hosts
// already running see the cancellation through their ctx.
func ForEach(ctx context.Context, hosts []string, parallelism int, fn func(ctx context.Context, host string) error) error {
	if parallelism <= 0 || parallelism > len(hosts) {
		parallelism = len(hosts)
	}
	errs := make([]error, len(hosts))
	sem := make(chan struct{}, parallelism)
	var wg sync.WaitGroup
	for i, host := range hosts {
		if ctx.Err() != nil {
			errs[i] = fmt.Errorf("%s: not started: %w", host, ctx.Err())
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = fmt.Errorf("%s: not started: %w", host, ctx.Err())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, host); err != nil {
				errs[i] = fmt.Errorf("%s: %w", host, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
