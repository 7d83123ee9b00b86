package main

import (
	"os"
	"testing"

	"github.com/rayform/rayform/cmd/rayform/internal/command"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/model"
	"github.com/rayform/rayform/resources/serve"
)

// This file is what the end-to-end and lab tests, still in package main,
// use of the unit tests that moved to internal/command and
// internal/views. It goes with them when they move to their own package.

// Exit codes the end-to-end tests expect.
const (
	exitChanges   = command.ExitChanges
	exitUnhealthy = command.ExitUnhealthy
)

// statusJSON is status -json as the end-to-end tests read it.
type statusJSON struct {
	Project  string                  `json:"project"`
	Healthy  bool                    `json:"healthy"`
	Problems []string                `json:"problems"`
	Nodes    []run.StatusNode        `json:"nodes"`
	Clusters []cluster.ClusterStatus `json:"clusters"`
	Serves   []serve.ServeStatus     `json:"serves"`
	Models   []model.NodesStatus     `json:"models"`
}

// readFile returns the file at path, failing the test when it cannot.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
