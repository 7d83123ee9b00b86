// Package lab brings up a local test lab that looks, from rayform's point of
// view, like a set of DGX Spark class GPU hosts reached over SSH.
//
// Every node is a Linux network namespace running the real OpenSSH sshd and,
// unless disabled, its own Debian dockerd. A client namespace (where rayform
// and the tests run) is the nodes' default gateway on the management network
// 10.1.230.0/24, whose bridge ports are isolated so nodes reach the client but
// not each other; a separate switch namespace carries the fabric network
// 192.168.200.0/24 on interfaces named like enp1s0f1np1. A real registry
// (Debian's docker-registry) in the client namespace serves images built here
// from busybox and simnode. Nothing in the lab has a route out of the lab.
//
// All lab processes are children of one supervisor process per lab (see
// Supervise), which reaps them, restarts nothing on its own, and runs the
// userspace packet-delay handler. The lab's topology is written to lab.json
// in the lab directory; Load reads it back.
//
// The package is Linux-only (its files build only on Linux); on other systems
// it is empty.
package lab
