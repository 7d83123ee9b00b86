//go:build linux

package e2e

import (
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/model"
	"github.com/rayform/rayform/resources/serve"
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
