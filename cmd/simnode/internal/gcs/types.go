// Package gcs is the simulated Ray Global Control Service: a real TCP server
// (bound like Ray's on 0.0.0.0:<port>) holding the node table, placement
// groups and actors, and routing messages between drivers (vLLM's engine),
// raylets and CLI clients over the wire protocol.
//
// Fast mode only: this is part of simnode's model of Ray, which the lab
// runs with `lab up -ray simnode` (lab up's default, `make demo
// RAY=simnode`, and the end-to-end tests whose subject is not Ray). No
// end-to-end test of Ray's behaviour uses it: those run the real Ray 2.53.0
// (`-ray real`).
package gcs

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
)

// RayVersion is the Ray version the simulator reports.
const RayVersion = "2.53.0"

// Node states as Ray's state API prints them.
const (
	Alive = "ALIVE"
	Dead  = "DEAD"
)

// NodeInfo is one row of the node table (Ray's NodeState plus what ray
// status needs).
type NodeInfo struct {
	NodeID       string             `json:"node_id"`
	NodeIP       string             `json:"node_ip"`
	NodeName     string             `json:"node_name"`
	IsHead       bool               `json:"is_head_node"`
	State        string             `json:"state"`
	StateMessage string             `json:"state_message,omitempty"`
	Resources    map[string]float64 `json:"resources_total"`
	Available    map[string]float64 `json:"resources_available,omitempty"`
	Labels       map[string]string  `json:"labels"`
	StartTimeMs  int64              `json:"start_time_ms"`
	EndTimeMs    int64              `json:"end_time_ms"`
	Hostname     string             `json:"hostname,omitempty"`
	// MemUsed and MemTotal are the node's physical memory in bytes, from
	// the last heartbeat.
	MemUsed  int64 `json:"mem_used,omitempty"`
	MemTotal int64 `json:"mem_total,omitempty"`
	// RayletPID is the pid of the simulated raylet.
	RayletPID int `json:"raylet_pid,omitempty"`
}

// Hello is the first message on every connection.
type Hello struct {
	// Role is "raylet", "driver" or "client".
	Role string `json:"role"`
	// Node is set by raylets.
	Node *NodeInfo `json:"node,omitempty"`
	// NodeIP is the driver's node IP (for drivers).
	NodeIP string `json:"node_ip,omitempty"`
	// RayVersion is the connecting side's version.
	RayVersion string `json:"ray_version,omitempty"`
}

// Welcome answers Hello.
type Welcome struct {
	NodeID      string `json:"node_id,omitempty"`
	SessionName string `json:"session_name"`
	RayVersion  string `json:"ray_version"`
	JobID       string `json:"job_id,omitempty"`
	ClusterID   string `json:"cluster_id"`
}

// PGRequest creates a placement group.
type PGRequest struct {
	Bundles  []map[string]float64 `json:"bundles"`
	Strategy string               `json:"strategy"`
}

// PGWait waits for a placement group to be scheduled.
type PGWait struct {
	ID        string `json:"id"`
	TimeoutMs int64  `json:"timeout_ms"`
}

// PGState reports a placement group.
type PGState struct {
	ID          string   `json:"id"`
	Ready       bool     `json:"ready"`
	BundleNodes []string `json:"bundle_nodes,omitempty"`
}

// ActorRequest creates an actor in a placement group bundle.
type ActorRequest struct {
	PG          string `json:"pg"`
	BundleIndex int    `json:"bundle_index"`
	ClassName   string `json:"class_name"`
	// Env is merged over the raylet's environment for the worker process
	// (the runtime_env env_vars).
	Env  map[string]string `json:"env,omitempty"`
	Args []string          `json:"args,omitempty"`
	// Spec is opaque to Ray: passed to the worker on stdin.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// ActorInfo answers ActorRequest.
type ActorInfo struct {
	ActorID  string `json:"actor_id"`
	WorkerID string `json:"worker_id"`
	NodeID   string `json:"node_id"`
	NodeIP   string `json:"node_ip"`
	PID      int    `json:"pid"`
}

// SpawnRequest is what the GCS asks a raylet to start.
type SpawnRequest struct {
	ActorID   string            `json:"actor_id"`
	ClassName string            `json:"class_name"`
	JobID     string            `json:"job_id"`
	Env       map[string]string `json:"env,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Spec      json.RawMessage   `json:"spec,omitempty"`
}

// SpawnReply answers SpawnRequest.
type SpawnReply struct {
	PID      int    `json:"pid"`
	WorkerID string `json:"worker_id"`
}

// ActorMsg carries data to an actor's process (driver -> worker).
type ActorMsg struct {
	ActorID string          `json:"actor_id"`
	Data    json.RawMessage `json:"data"`
}

// Event kinds an actor reports.
const (
	EventMsg  = "msg"  // a message from the worker process (Data)
	EventLog  = "log"  // one line of stdout/stderr (Stream, Line)
	EventDied = "died" // the worker process ended (ExitType, ExitDetail)
)

// ActorEvent flows from a worker (via its raylet and the GCS) to the owner.
type ActorEvent struct {
	ActorID    string          `json:"actor_id"`
	Kind       string          `json:"kind"`
	Data       json.RawMessage `json:"data,omitempty"`
	Stream     string          `json:"stream,omitempty"`
	Line       string          `json:"line,omitempty"`
	PID        int             `json:"pid,omitempty"`
	NodeIP     string          `json:"node_ip,omitempty"`
	ExitType   string          `json:"exit_type,omitempty"`
	ExitDetail string          `json:"exit_detail,omitempty"`
}

// LogLine is a line a raylet broadcasts to every driver, printed with a
// "(raylet)" prefix as Ray's log monitor does.
type LogLine struct {
	Line   string `json:"line"`
	NodeIP string `json:"node_ip"`
}

// Heartbeat is sent periodically by raylets.
type Heartbeat struct {
	NodeID   string `json:"node_id"`
	MemUsed  int64  `json:"mem_used"`
	MemTotal int64  `json:"mem_total"`
}

// Status answers a cluster status query.
type Status struct {
	Nodes       []NodeInfo  `json:"nodes"`
	PendingPGs  []PGPending `json:"pending_pgs,omitempty"`
	SessionName string      `json:"session_name"`
	RayVersion  string      `json:"ray_version"`
}

// PGPending is a placement group waiting for resources.
type PGPending struct {
	ID       string               `json:"id"`
	Bundles  []map[string]float64 `json:"bundles"`
	Strategy string               `json:"strategy"`
}

// NewID returns n random bytes as hex (Ray ids: 28 bytes for nodes and
// workers, 16 for actors, 18 for placement groups).
func NewID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
