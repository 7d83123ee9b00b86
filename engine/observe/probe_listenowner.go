package observe

import (
	"strconv"
	"strings"
)

// The listen.owner section: which of the listed containers (docker ps,
// rf_ps) each listening process belongs to, by the container ID its
// cgroup names (/proc/PID/cgroup, read with the shell), so that a port
// held by a container the plan removes is told apart from one held by
// anything else: the containers use the host's network, so their
// listeners are the host's.

const secListenOwner = "listen.owner"

// listenOwnerHelpers prints "PID NAME" for every process of ss's
// listeners (rf_ss) that a listed container (rf_ps) holds.
const listenOwnerHelpers = `# rf_lown: "PID CONTAINER" for each listening process inside a listed container.
rf_lown() {
	[ "$rf_sok" = 1 ] || return 0
	rf_i=$IFS
	IFS='
'
	for rf_l in $rf_ss; do
		rf_u=${rf_l#*users:}
		[ "$rf_u" = "$rf_l" ] && continue
		while :; do
			case $rf_u in *pid=*) ;; *) break ;; esac
			rf_u=${rf_u#*pid=}
			rf_p=${rf_u%%[!0-9]*}
			[ -n "$rf_p" ] && [ -r "/proc/$rf_p/cgroup" ] || continue
			rf_cg=
			while IFS= read -r rf_c; do rf_cg="$rf_cg $rf_c"; done <"/proc/$rf_p/cgroup"
			for rf_q in $rf_ps; do
				case $rf_q in *'"ID":"'*'"Names":"'* | *'"Names":"'*'"ID":"'*) ;; *) continue ;; esac
				rf_id=${rf_q#*\"ID\":\"}
				rf_id=${rf_id%%\"*}
				rf_nm=${rf_q#*\"Names\":\"}
				rf_nm=${rf_nm%%\"*}
				case $rf_cg in *"$rf_id"*) printf '%s %s\n' "$rf_p" "$rf_nm" ;; esac
			done
		done
	done
	IFS=$rf_i
}
`

// parseListenOwners reads the section's "PID NAME" lines.
func parseListenOwners(s *section) map[int]string {
	out := map[int]string{}
	for line := range strings.SplitSeq(string(s.stdout), "\n") {
		pid, name, ok := strings.Cut(strings.TrimSpace(line), " ")
		if n, err := strconv.Atoi(pid); ok && err == nil && name != "" {
			out[n] = name
		}
	}
	return out
}

// setListenOwners names each listener's container (Listener.Container).
func setListenOwners(f *HostFacts, owners map[int]string) {
	for i, l := range f.Listening.List {
		if name, ok := owners[l.PID]; ok && l.PID > 0 {
			f.Listening.List[i].Container = name
		}
	}
}
