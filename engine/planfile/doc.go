// Package planfile writes and checks saved plans: `rayform plan -out FILE`
// and `rayform apply FILE`.
//
// A saved plan is a commitment, not a serialized diff. It records what the
// plan was computed from — the configuration files, the variable values,
// the state's lineage and serial, and a fingerprint of the facts observed
// on the hosts — together with the changes it showed. Because planning is a
// pure function of those inputs, apply re-observes the hosts, recomputes
// the inputs and refuses the plan ([File.Check]) if any of them differs,
// then recomputes the plan and refuses it if the changes differ from the
// ones the user approved ([File.CheckChanges]). What gets applied is then
// exactly what was shown.
//
// # File format
//
// A saved plan is one JSON file, written atomically with mode 0600:
//
//	{
//	  "format_version": "1",
//	  "rayform_version": "0.1.0",
//	  "created_at": "2025-06-01T12:00:00Z",
//	  "config_hash": "hmac-sha256:…",
//	  "config_files": {"main.hcl": "hmac-sha256:…", "vars.hcl": "hmac-sha256:…"},
//	  "variables": {"model": "Qwen/Qwen3-8B", "tp": 2},
//	  "sensitive_salt": "…",
//	  "sensitive_variables": {"hf_token": "hmac-sha256:…"},
//	  "targets": ["vllm_serve.qwen"],
//	  "observed_fingerprint": "sha256:…",
//	  "observed": {"spark1": "sha256:…", "spark2": "sha256:…"},
//	  "state_lineage": "5f0c2a9e-7d1b-4c43-9a6e-2b8f1d0e3c47",
//	  "state_serial": 3,
//	  "summary": {"add": 1, "change": 0, "destroy": 0},
//	  "changes": [{"addr": "vllm_serve.qwen", "action": "create"}],
//	  "destroy": false,
//	  "replace": ["vllm_serve.qwen"],
//	  "rendered": "rayform will perform the following actions: …",
//	  "rendered_json": [{"type": "version", …}, {"type": "planned_change", …}]
//	}
//
// Fields:
//
//   - format_version: "MAJOR" or "MAJOR.MINOR"; a file of another major
//     version is refused. Unknown fields are refused too: a check this
//     version does not know about must not be skipped silently.
//   - rayform_version: the version that wrote the plan; apply refuses a plan
//     written by another version.
//   - config_hash: [ConfigHash] of every configuration and variable file,
//     and config_files the HMAC-SHA256 of each, by its path relative to the
//     configuration directory, so a mismatch can name the file. Both are
//     keyed by sensitive_salt (drawn for every plan), because a file may
//     hold a secret: a plain hash of a -var-file that holds one API key
//     would check a guess of the key with one hash.
//   - variables: the value of every non-sensitive variable, as JSON.
//   - sensitive_variables: for every sensitive variable, an HMAC-SHA256 of
//     its name and JSON value keyed by sensitive_salt, a random value drawn
//     for each plan. The values themselves are never written. The salt keeps
//     equal secrets from hashing alike across plans and defeats precomputed
//     tables; it cannot protect a guessable secret from a guess checked
//     against the file, so keep plan files as private as the secrets.
//   - targets: the -target addresses the plan was restricted to.
//   - observed_fingerprint: an opaque hash, chosen by the caller, of the
//     facts observed on the hosts that the plan depends on; observed
//     optionally holds one such hash per part (per host), so a stale plan
//     can say which host changed ([Fingerprint] combines them).
//   - state_lineage, state_serial: the local state the plan was made
//     against (serial 0: no state had been saved yet).
//   - summary, changes: what the plan showed, for display and for
//     [File.CheckChanges].
//   - destroy, replace: the plan's -destroy and -replace options (absent
//     when unset); apply of the file applies them.
//   - rendered, rendered_json: the plan as `rayform plan` printed it, as
//     text without colour and as its -json events (one object per event),
//     for `rayform show FILE`. Neither holds a sensitive value, as the
//     plan's own output does not.
package planfile
