// Package vllm plays `vllm serve`.
package vllm

import (
	"context"

	"github.com/rayform/rayform/cmd/simnode/internal/sim"
)

// Main runs vllm.
func Main(ctx context.Context, p *sim.Proc) int { return 1 }

// WorkerMain runs a Ray worker process.
func WorkerMain(ctx context.Context, p *sim.Proc) int { return 1 }
