package cluster

import (
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/resources/hostplan"
)

// ClusterWork is the work of a ray_cluster.
type ClusterWork struct {
	Name string
	// ContainerName is the name of its containers on every node.
	ContainerName string
	// Specs are the desired containers, head first.
	Specs []ContainerSpec
	// Start lists the nodes whose container must be (re)created.
	Start map[string]bool
	// Remove lists the managed containers to stop and remove first.
	Remove []Removal
	// HeadAddr is "ip:port" of the GCS.
	HeadAddr string
}

// Container is the name of the cluster's containers (kind.WorkDetail).
func (w *ClusterWork) Container() string {
	switch {
	case w.ContainerName != "":
		return w.ContainerName
	case len(w.Specs) > 0:
		return w.Specs[0].Name
	}
	return w.Name
}

// Commands are the docker runs of the containers the cluster starts
// (hostplan.Commander).
func (w *ClusterWork) Commands(project string) []hostplan.NamedCmd {
	var out []hostplan.NamedCmd
	for _, s := range w.Specs {
		if !w.Start[s.Node] {
			continue
		}
		out = append(out, hostplan.NamedCmd{Name: "docker run " + s.Name + " on " + s.Node, Node: s.Node,
			Cmd: s.RunCmd(project)})
	}
	return out
}

// WorkOf is w's cluster work, nil when w is not a cluster's.
func WorkOf(w *kind.Work) *ClusterWork {
	if w == nil {
		return nil
	}
	cw, _ := w.Do.(*ClusterWork)
	return cw
}

// Removal is one container rayform created that must go.
type Removal struct {
	Node, Container string
}
