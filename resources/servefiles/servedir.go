// Package servefiles is where the files of the serve processes live: the
// directory inside a Ray cluster's containers (Dir) and the host
// directory each container bind-mounts it from (Host). The ray_cluster
// kind mounts it and empties it when it removes a container; the
// vllm_serve kind keeps its records, pids, locks and logs there; the
// probe reads them on the host. A plain value the two kinds share.
package servefiles

import "github.com/rayform/rayform/engine/names"

// Dir holds, inside the head container, each vllm_serve's record,
// pid, lock and log: serve-NAME.{json,pid,lock,log} (and serve-NAME.env,
// the secret env file of rayform versions before issue 12, which apply and
// destroy remove).
// Every container rayform creates bind-mounts it from Host, so the
// probe reads the records and tests the locks on the host, without a
// docker exec (see observe.RecordProbe).
const Dir = "/tmp/rayform/serve"

// LegacyDir is where a container without the Dir mount (one
// whose spec has no serve_dir) keeps its serve records.
const LegacyDir = "/tmp/rayform"

// Host is the host directory bind-mounted as Dir into the
// container named container on node, for project:
// /var/tmp/rayform/PROJECT/NODE/CONTAINER. The node is part of the path
// because several nodes may share one filesystem (the lab's network
// namespaces do). The container's entrypoint empties it of serve files at
// every start: a record lives as long as its container. Each name becomes
// one path segment (names.Segment): a node of a for_each block, named
// like gpu["h1"], is a valid node but not a file name.
func Host(project, node, container string) string {
	return HostProject(project) + "/" + names.Segment(node) + "/" + names.Segment(container)
}

// HostProject is the parent of every Host directory of project.
func HostProject(project string) string {
	return hostRoot + "/" + names.Segment(project)
}

// hostRoot is where Host's directories live on the hosts.
const hostRoot = "/var/tmp/rayform"
