// Package observe learns the truth about a cluster's hosts, read-only and in
// about the time of one SSH round trip.
//
// Per host, one exec of a generated POSIX sh probe (ProbeScript) prints every
// fact the plan needs as framed sections: addresses, links and routes, the
// default route's source address (the one Ray would auto-detect), RDMA ports,
// memory, GPUs (unified memory on GB10), listening ports, rayform's
// containers (one `docker ps`, which also proves the daemon answers; a
// container running with the spec hash it should have is known from its ps
// line, the others are inspected with secret environment values redacted on
// the host), the images asked for (only when some container is missing or
// not current), and the generic probes the caller's resource kinds ask for
// (HostSpec.HTTP, Records, Files, Trees, Reads): loopback GETs (all in one
// curl, each sent only to a listener of its owner container), process
// records with their liveness (read on the host, from the directory the
// container bind-mounts, with a flock(1) test of the lock the process
// holds: see probe_record.go), files' mtimes, directory trees (each file's
// size, links followed, and the free space where the directory is or would
// be), and small files' content (bounded with head -c, optionally through a
// ref file naming one path component, as a Hugging Face cache's refs/main
// names its snapshot). Their answers are keyed by the request (the URL, the
// record's name, the path), so two requests of one kind never share an
// answer. observe knows no resource kind: the kinds build the requests and
// read and parse the answers (Ray's node table in resources/cluster's
// observe.go, a server's models in resources/serve).
// Parse turns that output into HostFacts; a section that failed on the host
// carries an Err and never spoils the others. Observe probes all hosts in
// parallel and, only where a peer's fabric address must first be learned from
// that peer (it was neither declared nor rightly assumed from the state),
// makes a second round trip (PeerScript) to check routes and TCP
// reachability to it.
//
// Every command observe issues is marked non-mutating and changes nothing on
// the host: every tool is optional (a missing one is reported in its
// section), nothing is written, not even a temporary file (the serve locks
// are opened read-only by the shell, never created), and no container is
// created or started.
//
// Files: spec.go holds what to probe (Spec, HostSpec) and facts.go what was
// found (Facts, HostFacts); observe.go runs the probes over the connections;
// script.go writes the probe (its prelude, the section framework's shell
// side and the order of the fragments), sections.go splits its output into
// sections, parse.go dispatches each section to its parser; each topic's
// shell fragment and its parser sit side by side: probe_net.go (ip, TCP and
// listeners), probe_listenowner.go (which container holds a listener),
// probe_docker.go (docker version, images, containers), probe_gpu.go
// (nvidia-smi, RDMA, memory), probe_exec.go (the host's execve limits),
// probe_http.go (loopback GETs and their owner guard), probe_record.go
// (process records), probe_file.go (files' mtimes), probe_tree.go (trees and
// free space), probe_read.go (files' content), probe_secretkey.go (the
// deployment's secret-digest key).
package observe
