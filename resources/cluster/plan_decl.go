package cluster

// declChanged reports whether node's container of rc was started by
// rayform for another declaration than specs (its spec-hash label differs:
// the configuration changed, and the plan replaces it for that). What
// Ray's node table shows of the node then follows from the configuration's
// change — gpus = 4 declared where Ray counts the 1 the container was
// started with — and is no change made outside rayform.
func (p *planner) declChanged(rc *RayCluster, specs []ContainerSpec, node string) bool {
	oc := p.clusterContainer(rc, node)
	if !oc.Found || !p.managed(oc.C) || oc.C.SpecHash == "" {
		return false
	}
	for _, s := range specs {
		if s.Node == node {
			current, _ := s.Current(oc.C.SpecHash)
			return !current
		}
	}
	return false
}
