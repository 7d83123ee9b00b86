package observe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
)

// Process records. A caller (apply) writes, beside a process it starts in
// a container, a record (NAME.json: resource, spec hash, attributes) and
// has the process hold, for its whole life, an exclusive flock(2) on
// NAME.lock, both in a directory of the container (RecordProbe.Dir)
// bind-mounted from the host directory RecordProbe.HostDir. The probe
// reads the record with cat and tests the lock with flock(1) on the host,
// without entering the container:
//
//	flock -n -s -E 75 9 9<HOSTDIR/NAME.lock
//
// exits 75 while the process (or any process it forked) runs, 0 once it
// has exited. The lock file is opened read-only by the shell, never created
// (flock(1) given a file name would create a missing one), and the shared,
// non-blocking lock, released at once, changes nothing.
//
// The probe asks the container instead (docker exec: cat of the record,
// kill -0 of the pid in NAME.pid) only when it must: liveness alone when
// the host lacks flock(1) or the record has no lock file (an image without
// flock: the process ran without the lock), the whole record when the host
// directory does not exist (a container created before records were kept
// on the host, or no container at all) or is not known; then in Dir, or in
// LegacyDir where Dir has no record.
//
// The section's stdout is the same either way: the record's JSON line, then
// "alive" or "dead".

// RecordProbe asks for one process record (see above); the answer is
// HostFacts.Records[Name].
type RecordProbe struct {
	// Name is the records' file name without extension: letters, digits,
	// '_' and '-'.
	Name string
	// HostDir is the host directory bind-mounted as Dir into Container:
	// absolute, of letters, digits and "._/-", without a ".." component;
	// "" reads the record with docker exec in Container.
	HostDir string
	// Container is the container the process runs in.
	Container string
	// Dir and LegacyDir are the directories inside Container where the
	// record is (LegacyDir: where an older container keeps it, or "").
	Dir, LegacyDir string
}

func (r RecordProbe) validate() error {
	switch {
	case !validRecordName(r.Name):
		return fmt.Errorf("record %q: want letters, digits, '_', '-'", r.Name)
	case r.HostDir != "" && !validDir(r.HostDir):
		return fmt.Errorf("record %s: host dir %q: want an absolute path of letters, digits, '.', '_', '/', '-' without \"..\"", r.Name, r.HostDir)
	case !validContainer(r.Container):
		return fmt.Errorf("record %s: container %q: not a container name", r.Name, r.Container)
	case !validDir(r.Dir) || r.LegacyDir != "" && !validDir(r.LegacyDir):
		return fmt.Errorf("record %s: dirs %q, %q: want absolute paths of letters, digits, '.', '_', '/', '-' without \"..\"", r.Name, r.Dir, r.LegacyDir)
	}
	return nil
}

func validRecordName(s string) bool { return len(s) <= 80 && wordOf(s, "_-") }

// recordHelpers define rf_rec and rf_sexec; they need rf_x and rf_dok.
const recordHelpers = `# rf_rec NAME HOSTDIR CONTAINER DIR LEGACYDIR: the record, then "alive" or "dead".
rf_rec() {
	if [ -z "$2" ] || [ ! -d "$2" ]; then
		rf_sexec "$3" "d=$4; [ -f \$d/$1.json ] || [ -z '$5' ] || d=$5; cat \$d/$1.json && { kill -0 \"\$(cat \$d/$1.pid)\" 2>/dev/null && echo alive || echo dead; }"
		return
	fi
	cat "$2/$1.json" || return
	if [ ! -f "$2/$1.lock" ]; then
		printf 'rayform: %s: no lock file\n' "$2/$1.lock" >&2
	elif command -v flock >/dev/null 2>&1; then
		# -n: flock cannot block, so no timeout(1) around it.
		flock -n -s -E 75 9 9<"$2/$1.lock"
		case $? in
		75) echo alive; return 0 ;;
		0) echo dead; return 0 ;;
		esac
	else
		printf 'rayform: flock: not installed\n' >&2
	fi
	rf_sexec "$3" "kill -0 \"\$(cat $4/$1.pid)\" 2>/dev/null && echo alive || echo dead"
}
# rf_sexec CONTAINER SCRIPT: run SCRIPT with sh in the container, only if
# its labels prove it is rayform's container of a resource of project
# $rf_proj (a forged state can name any container).
rf_sexec() {
	if [ -z "$1" ]; then
		printf 'rayform: no container to ask\n' >&2
		return 1
	fi
	if [ "$rf_dok" != 1 ]; then
		printf 'rayform: docker unavailable\n' >&2
		return 1
	fi
	rf_own=$(rf_x docker inspect --type container --format '{{index .Config.Labels "rayform.managed"}} {{index .Config.Labels "rayform.project"}} {{index .Config.Labels "rayform.resource"}}' "$1") || return 1
	case $rf_own in
	"true $rf_proj "?*) ;;
	*)
		printf 'rayform: container %s does not carry the labels of a resource of project %s: not looking inside it\n' "$1" "$rf_proj" >&2
		return 1
		;;
	esac
	rf_x docker exec "$1" sh -c "$2"
}
`

// writeRecords adds a record section for each valid RecordProbe (see
// recordHelpers); project is the rayform.project label a container must
// carry for the probe to look inside it.
func writeRecords(b *strings.Builder, project string, recs []RecordProbe) {
	var ok []RecordProbe
	seen := map[string]bool{}
	for _, r := range recs {
		if r.validate() == nil && !seen[r.Name] {
			seen[r.Name] = true
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return
	}
	if !validLabelValue(project) {
		project = ""
	}
	b.WriteString("rf_proj=" + shell.Quote(project) + "\n")
	b.WriteString(recordHelpers)
	for _, r := range ok {
		b.WriteString("rf_sec " + shell.Quote(secRecord+" name="+r.Name) + " rf_rec " + r.Name + " " +
			shell.Quote(r.HostDir) + " " + shell.Quote(r.Container) + " " + shell.Quote(r.Dir) + " " + shell.Quote(r.LegacyDir) + "\n")
	}
}

// validDir accepts an absolute path of letters, digits and "._/-"
// without a ".." component.
func validDir(s string) bool {
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

// parseRecord reads a process record: its JSON line, then "alive" or "dead".
// A missing record file is not an error: the process was never started here.
// A record whose liveness could not be learned is Found, not Alive, with
// an Err saying why.
func parseRecord(s *section) ProcessRecord {
	var r ProcessRecord
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
		r.Err = "record: " + err.Error()
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
		r.Err = "whether the process runs is unknown: " + msg
	}
	return r
}
