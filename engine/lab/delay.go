//go:build linux

package lab

import (
	"context"
	"errors"
	"net/http"
)

// delayQueues runs the userspace packet-delay queues of a supervisor.
type delayQueues struct{}

func newDelayQueues() *delayQueues { return &delayQueues{} }

func (q *delayQueues) closeAll() {}

func (s *supervisor) handleDelay(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "delay is not implemented yet", http.StatusNotImplemented)
}

func (l *Lab) applyImpairments(ctx context.Context, sup *supClient, t tools) error {
	return errors.New("delay and loss are not implemented yet")
}
