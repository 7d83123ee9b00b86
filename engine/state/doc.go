// Package state keeps rayform's local state: the one thing the hosts cannot
// tell.
//
// Truth lives on the hosts. Every container rayform starts carries labels
// (project, resource address, spec hash), so what runs where, and whether it
// drifted, is read from the hosts on every plan. What the hosts cannot tell
// is where to look for a resource that is no longer in the configuration:
// once a block is deleted (or its nodes are), no config names the hosts it
// ran on. The state file records, for every resource of the project the
// hosts showed when apply or destroy last observed them (after the walk,
// whatever its outcome), the hosts holding it, with enough SSH coordinates
// to reach them without the configuration, so that plan can say "will be
// destroyed" for a removed resource and apply or destroy can find and
// remove it. It never records what did not happen.
//
// # File format
//
// The state is one JSON file, by default [DefaultPath] in the configuration
// directory, written with mode 0600:
//
//	{
//	  "version": 1,
//	  "lineage": "5f0c2a9e-7d1b-4c43-9a6e-2b8f1d0e3c47",
//	  "serial": 3,
//	  "project": "spark",
//	  "resources": {
//	    "ray_cluster.main": {
//	      "type": "ray_cluster",
//	      "hosts": [
//	        {"node": "spark1", "host": "10.1.230.180", "user": "aurora", "port": 22,
//	         "fabric_address": "192.168.200.12", "fabric_interface": "enp1s0f1np1"},
//	        {"node": "spark2", "host": "10.1.230.181", "user": "aurora", "port": 22,
//	         "bastion": "aurora@10.1.230.180:22",
//	         "fabric_address": "192.168.200.13", "fabric_interface": "enp1s0f1np1"}
//	      ],
//	      "container": "rayform-main",
//	      "head": "spark1",
//	      "applied_at": "2025-06-01T12:00:00Z"
//	    }
//	  }
//	}
//
// Fields:
//
//   - version: the format version, 1. A file of another version is refused.
//   - lineage: a random identifier given to a state when it is first
//     created; it never changes afterwards. A saved plan records it, so a
//     plan made against one state cannot be applied against another.
//   - serial: incremented by every save. A saved plan records it, so a plan
//     made before another apply changed the state is refused as stale.
//   - project: the project name from the configuration; containers on the
//     hosts carry it as a label.
//   - resources: keyed by resource address ("ray_cluster.main",
//     "vllm_serve.qwen"). Each records the resource type, the hosts it was
//     applied to, the name of its container (where it has one) and when it
//     was last applied (RFC 3339, UTC). A ray_cluster also records "head",
//     the node its head container was found on: apply and destroy take the
//     cluster's lock there too, so that a configuration with another head
//     (or another name for the cluster) waits for a run of the original.
//     An older state without it has the lock taken on every host recorded.
//   - hosts: "node" is the node block's name, "host" the address or name
//     SSH connected to, "user" and "port" the SSH user and port, "bastion"
//     the jump hosts in OpenSSH ProxyJump syntax ("user@host:port",
//     comma-separated), resolved when the resource was applied.
//     "fabric_address" and "fabric_interface" are the node's address on its
//     cluster's network and the interface holding it, as the hosts showed
//     them after the last apply. They are a cache, not truth: plan assumes
//     them to check the routes between peers in its first round trip and to
//     skip inspecting containers that run as wanted, and verifies them
//     against each host's own facts (a wrong guess costs one more round
//     trip, never a wrong plan).
//   - images (optional): keyed by image ID ("sha256:..."), what an image
//     answered apply's architecture check: the architectures its vLLM has
//     code for ("architectures"), the model types its transformers and
//     vLLM read configs of ("model_types", "vllm_config_types"), their
//     versions ("vllm", "transformers"), or why it could not answer
//     ("unchecked"), with what the query cost ("seconds") and when it ran
//     ("checked_at"). An image's content never changes under its ID, so
//     the answer never goes stale; plan judges from it without asking the
//     image again. It is public knowledge about an image, never
//     configuration.
//
// Unknown fields, trailing data and empty files are errors: the state is
// never silently read as empty. A missing file is an empty state with a
// fresh lineage and serial 0 (nothing has been saved yet).
//
// Nothing secret is stored, by construction: a resource records where it
// ran, never how it was configured (no environment, no variable values, no
// tokens). Configuration and spec hashes live on the hosts, in the labels.
//
// Saves are atomic (see [jsonfile.WriteAtomic]): a temporary file in the same
// directory, synced, renamed over the old file, directory synced. A save
// refuses to overwrite a state file that another run saved after this one
// was loaded (different lineage or serial), instead of losing its records,
// and never writes a state that Load would refuse. [Lock] takes the state
// file's local lock (an flock on state.json.lock) for the length of an apply
// or destroy, so that two runs sharing a state file never interleave.
package state
