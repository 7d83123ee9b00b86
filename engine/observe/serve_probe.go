package observe

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
)

// Serve records. apply writes, beside each vllm serve process, a record
// (serve-NAME.json: resource, spec hash, attributes) and holds, for the
// process's whole life, an exclusive flock(2) on serve-NAME.lock, both in
// ServeDir inside the head container, which is bind-mounted from the host
// directory HostSpec.ServeHostDir. The probe reads the record with cat and
// tests the lock with flock(1) on the host, without entering the container:
//
//	flock -n -s -E 75 9 9<HOSTDIR/serve-NAME.lock
//
// exits 75 while the serve (or any process it forked) runs, 0 once it has
// exited. The lock file is opened read-only by the shell, never created
// (flock(1) given a file name would create a missing one), and the shared,
// non-blocking lock, released at once, changes nothing.
//
// The probe asks the container instead (docker exec: cat of the record,
// kill -0 of the pid) only when it must: liveness alone when
// the host lacks flock(1) or the record has no lock file (an image without
// flock: the serve ran without the lock), the whole record when the host
// directory does not exist (a container created before records were kept
// on the host, or no container at all) or is not known.
//
// The section's stdout is the same either way: the record's JSON line, then
// "alive" or "dead".

// legacyServeDir is where a container without the ServeDir mount (one
// whose spec has no serve_dir) keeps its serve records.
const legacyServeDir = "/tmp/rayform"

// serveHelpers define rf_serve and rf_sexec; they need rf_x and rf_dok.
const serveHelpers = `# rf_serve NAME HOSTDIR CONTAINER: the serve's record, then "alive" or "dead".
rf_serve() {
	if [ -z "$2" ] || [ ! -d "$2" ]; then
		rf_sexec "$3" "d=` + ServeDir + `; [ -f \$d/serve-$1.json ] || d=` + legacyServeDir + `; cat \$d/serve-$1.json && { kill -0 \"\$(cat \$d/serve-$1.pid)\" 2>/dev/null && echo alive || echo dead; }"
		return
	fi
	cat "$2/serve-$1.json" || return
	if [ ! -f "$2/serve-$1.lock" ]; then
		printf 'rayform: %s: no lock file\n' "$2/serve-$1.lock" >&2
	elif command -v flock >/dev/null 2>&1; then
		# -n: flock cannot block, so no timeout(1) around it.
		flock -n -s -E 75 9 9<"$2/serve-$1.lock"
		case $? in
		75) echo alive; return 0 ;;
		0) echo dead; return 0 ;;
		esac
	else
		printf 'rayform: flock: not installed\n' >&2
	fi
	rf_sexec "$3" "kill -0 \"\$(cat ` + ServeDir + `/serve-$1.pid)\" 2>/dev/null && echo alive || echo dead"
}
# rf_sexec CONTAINER SCRIPT: run SCRIPT with sh in the container, only if
# its labels prove it is a ray_cluster container of project $rf_proj.
rf_sexec() {
	if [ -z "$1" ]; then
		printf 'rayform: no head container to ask\n' >&2
		return 1
	fi
	if [ "$rf_dok" != 1 ]; then
		printf 'rayform: docker unavailable\n' >&2
		return 1
	fi
	rf_own=$(rf_x docker inspect --type container --format '{{index .Config.Labels "rayform.managed"}} {{index .Config.Labels "rayform.project"}} {{index .Config.Labels "rayform.resource"}}' "$1") || return 1
	case $rf_own in
	"true $rf_proj ray_cluster."*) ;;
	*)
		printf 'rayform: container %s does not carry the labels of a ray_cluster of project %s: not looking inside it\n' "$1" "$rf_proj" >&2
		return 1
		;;
	esac
	rf_x docker exec "$1" sh -c "$2"
}
`

// writeServes adds a serve.record section for each valid name of
// spec.Serves (see serveHelpers).
func writeServes(b *strings.Builder, spec HostSpec) {
	names := validOnly(spec.Serves, validServeName)
	if len(names) == 0 {
		return
	}
	dir := spec.ServeHostDir
	if !validServeHostDir(dir) {
		dir = ""
	}
	hc := spec.HeadContainer
	if !validContainer(hc) {
		hc = ""
	}
	project := spec.Project
	if !validLabelValue(project) {
		project = ""
	}
	b.WriteString("rf_proj=" + shell.Quote(project) + "\n")
	b.WriteString(serveHelpers)
	for _, name := range names {
		b.WriteString("rf_sec " + shell.Quote(secServe+" name="+name) + " rf_serve " + name + " " +
			shell.Quote(dir) + " " + shell.Quote(hc) + "\n")
	}
}

// validServeHostDir accepts an absolute path of letters, digits and
// "._/-" without a ".." component.
func validServeHostDir(s string) bool {
	if len(s) < 2 || len(s) > 1024 || s[0] != '/' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && strings.IndexByte("._/-", s[i]) < 0 {
			return false
		}
	}
	for c := range strings.SplitSeq(s, "/") {
		if c == ".." {
			return false
		}
	}
	return true
}

// parseServe reads a serve record: its JSON line, then "alive" or "dead".
// A missing record file is not an error: the serve was never started here.
// A record whose liveness could not be learned is Found, not Alive, with
// an Err saying why.
func parseServe(s *section) ServeRecord {
	var r ServeRecord
	if s.skipped != "" {
		r.Err = s.failure()
		return r
	}
	lines := strings.Split(strings.TrimSpace(string(s.stdout)), "\n")
	if s.rc != 0 && (len(lines) == 0 || lines[0] == "") {
		if bytes.Contains(s.stderr, []byte("No such file")) {
			return r
		}
		r.Err = s.failure()
		return r
	}
	var rec Record
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		r.Err = "serve record: " + err.Error()
		return r
	}
	r.Found, r.Resource, r.SpecHash, r.Sensitive = true, rec.Resource, rec.SpecHash, rec.Sensitive
	for k, v := range rec.Attrs {
		if r.Attrs == nil {
			r.Attrs = map[string]string{}
		}
		r.Attrs[k] = string(v)
	}
	switch last := lines[len(lines)-1]; {
	case len(lines) > 1 && last == "alive":
		r.Alive = true
	case len(lines) > 1 && last == "dead":
	default:
		msg := s.failure()
		if msg == "" {
			msg = "no answer"
		}
		r.Err = "whether the serve runs is unknown: " + msg
	}
	return r
}
