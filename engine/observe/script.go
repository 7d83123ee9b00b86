package observe

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/transport/shell"
)

// The probe's output format. Every section the probe prints is framed by
// marker lines, so the Go parser never has to guess where one tool's output
// ends:
//
//	@@rayform@@ probe 1
//	@@rayform@@ begin <name> [key=value ...]
//	<the command's stdout, verbatim>
//	@@rayform@@ stderr
//	<the command's stderr>
//	@@rayform@@ end <exit code>
//	@@rayform@@ begin <name> ...
//	@@rayform@@ skip <reason>          (a section deliberately not run)
//	@@rayform@@ done
//
// A section's stdout may itself be split by "@@rayform@@ part <name>" lines.
// A line of tool output that starts with the marker would be misread; the
// tools probed print JSON, CSV or fixed text, none of which can.
const (
	marker       = "@@rayform@@"
	probeVersion = 1
)

// Section names.
const (
	secMeta       = "meta"
	secAddr       = "ip.addr"
	secRoute      = "ip.route"
	secDefault    = "ip.default"
	secRouteGet   = "route.get"
	secRouteBatch = "route.batch"
	secIPBatch    = "ip.batch"
	secTCP        = "tcp"
	secRDMA       = "rdma"
	secMem        = "meminfo"
	secGPU        = "gpu"
	secDocker     = "docker.version"
	secImage      = "docker.image"
	secHistory    = "docker.history"
	secContainers = "docker.containers"
	secRayNodes   = "ray.nodes"
	secHealth     = "vllm.health"
	secModels     = "vllm.models"
	secServe      = "serve.record"
	secListen     = "listen"
)

// skipCurrent is the reason an image is not inspected: every container of
// the host runs as wanted, so apply has nothing to start from it.
const skipCurrent = "containers current"

// internetProbeAddr is the address whose route `ip route get` looks up to
// find the default source address. It is the address Ray's node IP
// auto-detection "connects" a UDP socket to (8.8.8.8:53, which sends no
// packet); `ip route get` is a lookup in the kernel's table and sends nothing
// either. Asking the same question is what makes the answer the address Ray
// would register when --node-ip-address is not given.
const internetProbeAddr = "8.8.8.8"

// gpuQuery is the nvidia-smi query: one CSV line per GPU, no header, no units.
const gpuQuery = "index,name,uuid,memory.total,memory.used,memory.free,driver_version"

// prelude defines the helpers every probe uses. It is plain POSIX sh (dash,
// busybox ash, bash) and changes nothing on the host: no files are written
// (not even temporary ones: stderr is captured with a command substitution,
// never a here-document), every tool reads /dev/null as stdin so a script
// fed on stdin cannot be consumed by it, and every tool is optional.
const prelude = `set -f
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
LC_ALL=C
export LC_ALL
exec 3>&1
M=@@rayform@@
# rf_x TOOL ARG...: run TOOL if installed, bounded by timeout(1) if present.
rf_x() {
	if ! command -v "$1" >/dev/null 2>&1; then
		printf 'rayform: %s: not installed\n' "$1" >&2
		return 127
	fi
	if [ -n "$rf_t" ]; then timeout "$rf_t" "$@"; else "$@"; fi
}
# rf_sec NAME CMD...: one section; stdout verbatim, stderr and exit code after.
rf_sec() {
	printf '%s begin %s\n' "$M" "$1"
	shift
	rf_e=$("$@" 2>&1 1>&3 3>&- </dev/null)
	rf_rc=$?
	printf '\n%s stderr\n%s\n%s end %d\n' "$M" "$rf_e" "$M" "$rf_rc"
}
# rf_skip NAME REASON: a section deliberately not run.
rf_skip() {
	printf '%s begin %s\n%s skip %s\n' "$M" "$1" "$M" "$2"
}
`

// hostHelpers are the helpers of the first-round probe.
const hostHelpers = `# rf_bsec NAME FUNC: a section of shell builtins only (no tool to capture the
# stderr of, so no subshell); a failed redirection is reported on stdout.
rf_bsec() {
	printf '%s begin %s\n' "$M" "$1"
	shift
	"$@" 2>/dev/null
	rf_rc=$?
	printf '\n%s stderr\n\n%s end %d\n' "$M" "$M" "$rf_rc"
}
rf_meta() {
	rf_h=
	if [ -r /proc/sys/kernel/hostname ]; then read -r rf_h </proc/sys/kernel/hostname; fi
	printf 'hostname=%s\n' "$rf_h"
	# /proc/sys/kernel/arch (Linux 6.1) spares a process.
	if [ -r /proc/sys/kernel/arch ]; then
		read -r rf_a </proc/sys/kernel/arch
	else
		rf_a=$(uname -m 2>/dev/null)
	fi
	printf 'arch=%s\n' "$rf_a"
}
rf_mem() {
	if [ ! -r /proc/meminfo ]; then
		printf '/proc/meminfo: not readable\n'
		return 1
	fi
	while IFS= read -r rf_l; do
		case $rf_l in MemTotal:* | MemAvailable:*) printf '%s\n' "$rf_l" ;; esac
	done </proc/meminfo
}
# rf_ip CMDS: ip's answers to the batch of commands CMDS, one JSON line each.
rf_ip() {
	if ! command -v ip >/dev/null 2>&1; then
		printf 'rayform: ip: not installed\n' >&2
		return 127
	fi
	printf '%s' "$1" | ip -j -force -batch -
}
# rf_rdma: RDMA ports and their netdevs, in ibdev2netdev's format.
rf_rdma() {
	if command -v ibdev2netdev >/dev/null 2>&1; then
		# It reads sysfs and cannot hang: no timeout(1).
		ibdev2netdev
		return
	fi
	set +f
	for rf_p in /sys/class/infiniband/*/ports/*; do
		[ -d "$rf_p" ] || continue
		rf_d=${rf_p%/ports/*}
		rf_n=-
		rf_s=
		if [ -r "$rf_p/gid_attrs/ndevs/0" ]; then read -r rf_n <"$rf_p/gid_attrs/ndevs/0"; fi
		if [ -r "$rf_p/state" ]; then read -r rf_s <"$rf_p/state"; fi
		case $rf_s in *ACTIVE*) rf_s=Up ;; *) rf_s=Down ;; esac
		printf '%s port %s ==> %s (%s)\n' "${rf_d##*/}" "${rf_p##*/}" "${rf_n:--}" "$rf_s"
	done
}
`

// dockerHelpers inspect images and containers through Go templates that
// keep secrets on the host (see imageFormat and containerFormat).
//
// rf_containers lists, with one `docker ps`, rayform's containers of the
// project and any container bearing one of the wanted names; it also tells
// whether the daemon answers (rf_dok), so the probe needs no `docker
// version`. A listed container whose ps line says "Current":true (it carries
// the wanted spec hash and runs) is known from that line alone; the others
// are inspected, in one `docker inspect`. rf_need is 1 when some container
// is missing or not current: only then are the images inspected, since only
// then may apply have to start a container from one.
//
// rf_containers frames its own section instead of running under rf_sec:
// rf_sec captures stderr in a subshell, which would lose rf_dok and rf_need.
// Both tools' stdout lines are JSON objects (the templates start with "{"),
// so the other lines of their combined output are their stderr.
const dockerHelpers = `# rf_image REF: the image's config (env names only) and build history.
rf_image() {
	rf_sec "docker.image ref=$1" rf_x docker image inspect --format "$rf_ifmt" "$1"
	if [ "$rf_rc" = 0 ]; then
		rf_sec "docker.history ref=$1" rf_x docker image history --no-trunc --format '{{json .CreatedBy}}' "$1"
	fi
}
# rf_split OUTPUT: print its JSON lines, keep the others in rf_err.
rf_split() {
	rf_ifs=$IFS
	IFS='
'
	for rf_l in $1; do
		case $rf_l in
		'{'*) printf '%s\n' "$rf_l" ;;
		*) rf_err="$rf_err$rf_l
" ;;
		esac
	done
	IFS=$rf_ifs
}
# rf_containers SECTION NAME...: the section of docker ps, then (after a
# "part inspect" line, printed only when ps succeeded) docker inspect of
# the containers that are not current.
rf_containers() {
	printf '%s begin %s\n' "$M" "$1"
	shift
	rf_err=
	rf_need=0
	rf_ids=
	rf_o=$(rf_x docker ps -a --no-trunc --format "$rf_pfmt" 2>&1 </dev/null)
	rf_rc=$?
	rf_dok=0
	if [ "$rf_rc" = 0 ]; then
		rf_dok=1
		rf_split "$rf_o"
		rf_ifs=$IFS
		IFS='
'
		for rf_l in $rf_o; do
			case $rf_l in
			'{'*'"Current":true'*) ;;
			'{'*)
				rf_need=1
				rf_l=${rf_l#*\"ID\":\"}
				rf_ids="$rf_ids ${rf_l%%\"*}"
				;;
			esac
		done
		IFS=$rf_ifs
		for rf_n in "$@"; do
			case $rf_o in *"\"Names\":\"$rf_n\""*) ;; *) rf_need=1 ;; esac
		done
		printf '%s part inspect\n' "$M"
		if [ -n "$rf_ids" ]; then
			rf_o=$(rf_x docker inspect --type container --format "$rf_cfmt" $rf_ids 2>&1 </dev/null)
			rf_rc=$?
			rf_split "$rf_o"
		fi
	else
		rf_err=$rf_o
	fi
	printf '\n%s stderr\n%s\n%s end %d\n' "$M" "$rf_err" "$M" "$rf_rc"
}
`

// httpHelpers fetch a loopback URL with curl or wget. curl appends the
// status code as a last line; wget prints the response headers on stderr.
const httpHelpers = `rf_via=none
if command -v curl >/dev/null 2>&1; then rf_via=curl; elif command -v wget >/dev/null 2>&1; then rf_via=wget; fi
rf_http() {
	case $rf_via in
	curl) rf_x curl -q -sS -m 2 -w '\n%{http_code}' "$1" ;;
	wget) rf_x wget -S -T 2 -O - "$1" ;;
	*)
		printf 'rayform: neither curl nor wget is installed\n' >&2
		return 127
		;;
	esac
}
`

// tcpHelpers test a TCP connect: bash's /dev/tcp under timeout(1), else
// nc -z. Opening and closing a connection changes nothing on the peer.
const tcpHelpers = `rf_tcp() {
	if [ -n "$rf_t" ] && command -v bash >/dev/null 2>&1; then
		rf_t=3
		rf_x bash -c 'exec 3<>"/dev/tcp/$1/$2"' rf_tcp "$1" "$2"
	elif command -v nc >/dev/null 2>&1; then
		rf_x nc -z -w 3 "$1" "$2"
	else
		printf 'rayform: no way to test TCP (need bash and timeout, or nc)\n' >&2
		return 127
	fi
}
`

// psFields renders one `docker ps` line with the keys of `--format '{{json
// .}}'` minus Command, which may hold a secret flag's value, plus Current
// (see psTemplate).
const psFields = `{"ID":{{json .ID}},"Image":{{json .Image}},"Labels":{{json .Labels}},"Names":{{json .Names}},` +
	`"Networks":{{json .Networks}},"State":{{json .State}},"Status":{{json .Status}},"Current":%s}`

// psTemplate is the `docker ps -a --format` template of the probe: a line
// for each container labelled with project or named one of names (an
// empty line for every other container), whose "Current" is true when the
// container runs and carries the spec hash wanted for its name.
func psTemplate(project string, names []string, hashes map[string]string) string {
	var match []string
	if project != "" {
		match = append(match, fmt.Sprintf(`(eq (.Label "rayform.project") %s)`, strconv.Quote(project)))
	}
	for _, n := range names {
		match = append(match, fmt.Sprintf(`(eq .Names %s)`, strconv.Quote(strings.TrimPrefix(n, "/"))))
	}
	var current []string
	for _, n := range slices.Sorted(maps.Keys(hashes)) {
		if validContainer(n) && validLabelValue(hashes[n]) {
			current = append(current, fmt.Sprintf(`(and (eq .Names %s) (eq (.Label "rayform.spec-hash") %s))`,
				strconv.Quote(strings.TrimPrefix(n, "/")), strconv.Quote(hashes[n])))
		}
	}
	cur := "false"
	if len(current) > 0 {
		cur = `{{if or ` + strings.Join(current, " ") + `}}{{eq .State "running"}}{{else}}false{{end}}`
	}
	return `{{if or ` + strings.Join(match, " ") + `}}` + fmt.Sprintf(psFields, cur) + `{{end}}`
}

// imageFormat renders `docker image inspect` as one JSON object with the
// keys of the real output, but only the names of the image's environment
// variables: an image may carry a token in its ENV, and its value has no
// business leaving the host.
const imageFormat = `{"Id":{{json .Id}},"RepoTags":{{json .RepoTags}},"Architecture":{{json .Architecture}},` +
	`"Config":{"Entrypoint":{{json .Config.Entrypoint}},"Cmd":{{json .Config.Cmd}},"Labels":{{json .Config.Labels}},` +
	`"Env":[{{range $i, $e := .Config.Env}}{{if $i}},{{end}}{{json (index (split $e "=") 0)}}{{end}}]}}`

// containerFormat renders `docker inspect` of a container as one JSON line
// with the keys of the real output. Environment variables not on the
// allow-list keep their name only, and the value following a secret flag
// of the command (--api-key and friends, see secretFlags) is replaced, so
// secrets never cross the wire. %s is the allow-list as template string
// arguments, %[2]s the secret flags.
const containerFormat = `{"Id":{{json .Id}},"Name":{{json .Name}},"Image":{{json .Image}},"RestartCount":{{json .RestartCount}},` +
	`"State":{{json .State}},` +
	`"Config":{"Image":{{json .Config.Image}},"Labels":{{json .Config.Labels}},"Entrypoint":{{json .Config.Entrypoint}},` +
	`"Cmd":[{{$s := false}}{{range $i, $a := .Config.Cmd}}{{if $i}},{{end}}{{$f := index (split $a "=") 0}}` +
	`{{if $s}}"(sensitive value)"{{else if and (ne $f $a) (eq $f %[2]s)}}{{json (printf "%%s=(sensitive value)" $f)}}{{else}}{{json $a}}{{end}}` +
	`{{$s = eq $a %[2]s}}{{end}}],` +
	`"Env":[{{range $i, $e := .Config.Env}}{{if $i}},{{end}}{{$k := index (split $e "=") 0}}` +
	`{{if eq $k %[1]s}}{{json $e}}{{else}}{{json $k}}{{end}}{{end}}]},` +
	`"HostConfig":{"NetworkMode":{{json .HostConfig.NetworkMode}},"IpcMode":{{json .HostConfig.IpcMode}},` +
	`"Privileged":{{json .HostConfig.Privileged}},"ShmSize":{{json .HostConfig.ShmSize}},"DeviceRequests":{{json .HostConfig.DeviceRequests}}}}`

// secretFlags are command-line flags whose value is a secret (vLLM's
// --api-key, Hugging Face tokens).
func secretFlags() []string {
	return []string{"--api-key", "--hf-token", "--token"}
}

// templateArgs renders words as Go template string arguments: "A" "B".
func templateArgs(words []string) string {
	if len(words) == 0 {
		return `""`
	}
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = strconv.Quote(w)
	}
	return strings.Join(parts, " ")
}

// containerTemplate is containerFormat for the allow-list keys.
func containerTemplate(keys []string) string {
	return fmt.Sprintf(containerFormat, templateArgs(keys), templateArgs(secretFlags()))
}

// ProbeScript returns the first-round probe for one host: a POSIX sh script
// that, in one exec, prints every fact observe needs as framed sections
// (see Parse). It is deterministic for a given spec, changes nothing on the
// host, and never fails because a tool is missing: that tool's section
// reports it instead. Items of the spec that Validate rejects are left out.
//
// Links come from `ip -j addr show`, which carries every field of `ip -j
// link show` that the plan reads (name, flags, MTU, operstate, MAC), so the
// probe runs ip once for both. Whether an image contains Ray is read from
// the image's config and build history only: running the image would
// create a container, which is not read-only, so the definitive `ray
// --version` check is apply's (see RayPresence).
func ProbeScript(spec HostSpec) string {
	var b strings.Builder
	b.Grow(8 << 10)
	b.WriteString("# rayform observe probe (read-only; generated, do not edit)\n")
	b.WriteString(prelude)
	b.WriteString(hostHelpers)
	images := validOnly(spec.Images, validImageRef)
	names := validOnly(spec.Containers, validContainer)
	project := spec.Project
	if !validLabelValue(project) {
		project = ""
	}
	listing := project != "" || len(names) > 0
	docker := len(images) > 0 || listing || spec.Head
	if docker {
		fmt.Fprintf(&b, "rf_pfmt=%s\n", shell.Quote(psTemplate(project, names, spec.SpecHashes)))
		fmt.Fprintf(&b, "rf_ifmt=%s\n", shell.Quote(imageFormat))
		fmt.Fprintf(&b, "rf_cfmt=%s\n", shell.Quote(containerTemplate(spec.envKeys())))
		b.WriteString(dockerHelpers)
	}
	head := spec.Head && (spec.DashboardPort > 0 || spec.ServePort > 0)
	if head {
		b.WriteString(httpHelpers)
	}
	checks := staticChecks(spec.Peers)
	if hasTCP(checks) {
		b.WriteString(tcpHelpers)
	}
	writeTimeout(&b, spec.CommandTimeout)

	b.WriteString("printf '%s probe " + strconv.Itoa(probeVersion) + "\\n' \"$M\"\n")
	b.WriteString("rf_bsec meta rf_meta\n")
	writeIPBatch(&b, checks)
	writeTCPChecks(&b, checks)
	b.WriteString("rf_sec rdma rf_rdma\n")
	b.WriteString("rf_bsec meminfo rf_mem\n")
	b.WriteString("rf_sec gpu rf_x nvidia-smi --query-gpu=" + gpuQuery + " --format=csv,noheader,nounits\n")
	if len(spec.Ports) > 0 {
		ports := make([]string, len(spec.Ports))
		for i, p := range spec.Ports {
			ports[i] = strconv.Itoa(p)
		}
		b.WriteString("rf_sec " + shell.Quote(secListen+" ports="+strings.Join(ports, ",")) + " rf_x ss -Hltnp\n")
	}
	if listing {
		// docker ps is the daemon check too (see dockerHelpers).
		name := secContainers + " envkeys=" + strings.Join(spec.envKeys(), ",")
		b.WriteString("rf_containers " + shell.Quote(name))
		for _, n := range names {
			b.WriteString(" " + shell.Quote(strings.TrimPrefix(n, "/")))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("rf_sec docker.version rf_x docker version --format '{{json .}}'\n")
		b.WriteString("rf_dok=0\n")
		b.WriteString("if [ \"$rf_rc\" = 0 ]; then rf_dok=1; fi\n")
		b.WriteString("rf_need=1\n")
	}
	for _, ref := range images {
		q := shell.Quote(ref)
		b.WriteString("if [ \"$rf_dok\" != 1 ]; then\n")
		b.WriteString("\trf_skip " + shell.Quote(secImage+" ref="+ref) + " 'docker unavailable'\n")
		b.WriteString("elif [ \"$rf_need\" = 1 ]; then\n")
		b.WriteString("\trf_image " + q + "\n")
		b.WriteString("else\n")
		b.WriteString("\trf_skip " + shell.Quote(secImage+" ref="+ref) + " " + shell.Quote(skipCurrent) + "\n")
		b.WriteString("fi\n")
	}
	if head {
		writeHead(&b, spec)
	}
	b.WriteString("printf '%s done\\n' \"$M\"\n")
	return b.String()
}

// writeHead adds Ray's node table and vLLM's endpoints.
func writeHead(b *strings.Builder, spec HostSpec) {
	var gets []httpGet
	if spec.DashboardPort > 0 {
		gets = append(gets, httpGet{secRayNodes + " source=dashboard via=curl",
			fmt.Sprintf("http://127.0.0.1:%d/api/v0/nodes?limit=1000", spec.DashboardPort)})
	}
	if spec.ServePort > 0 {
		base := fmt.Sprintf("http://127.0.0.1:%d", spec.ServePort)
		gets = append(gets, httpGet{secHealth + " via=curl", base + "/health"},
			httpGet{secModels + " via=curl", base + "/v1/models"})
	}
	b.WriteString("if [ \"$rf_via\" = curl ]; then\n")
	writeCurlAll(b, gets)
	if spec.DashboardPort > 0 {
		url := fmt.Sprintf("http://127.0.0.1:%d/api/v0/nodes?limit=1000", spec.DashboardPort)
		b.WriteString("elif [ \"$rf_via\" = wget ]; then\n")
		b.WriteString("\trf_sec 'ray.nodes source=dashboard via=wget' rf_http " + shell.Quote(url) + "\n")
		// `ray list nodes` is a client of the same dashboard API, so it
		// only helps when the host lacks an HTTP client; it starts a
		// Python process inside the head container and changes nothing.
		if hc := spec.HeadContainer; hc != "" && validContainer(hc) {
			b.WriteString("elif [ \"$rf_dok\" = 1 ]; then\n")
			b.WriteString("\trf_sec 'ray.nodes source=cli' rf_x docker exec " + shell.Quote(hc) +
				" ray list nodes --format json --limit 1000\n")
		}
		b.WriteString("else\n")
		b.WriteString("\trf_skip 'ray.nodes source=dashboard' 'neither curl nor wget is installed'\n")
	}
	b.WriteString("fi\n")
	writeServes(b, spec)
	if spec.ServePort > 0 {
		base := fmt.Sprintf("http://127.0.0.1:%d", spec.ServePort)
		b.WriteString("if [ \"$rf_via\" != curl ]; then\n")
		b.WriteString("\trf_sec \"vllm.health via=$rf_via\" rf_http " + shell.Quote(base+"/health") + "\n")
		b.WriteString("\trf_sec \"vllm.models via=$rf_via\" rf_http " + shell.Quote(base+"/v1/models") + "\n")
		b.WriteString("fi\n")
	}
}

// httpGet is one loopback URL the head's probe fetches, and the section its
// answer goes to.
type httpGet struct{ section, url string }

// curlWriteOut frames one transfer of writeCurlAll as a section: the body
// (already printed by curl), the status code as the last stdout line (as
// rf_http prints it), curl's error message as stderr and its exit code for
// this transfer as the section's exit code; then the next section's begin
// line, if any. %{errormsg} and %{exitcode} need curl 7.75 (2021).
func curlWriteOut(next string) string {
	w := "\\n%{http_code}\\n" + marker + " stderr\\n%{errormsg}\\n" + marker + " end %{exitcode}\\n"
	if next != "" {
		w += marker + " begin " + next + "\\n"
	}
	return w
}

// writeCurlAll fetches every URL with one curl process (one transfer per
// URL, separated by --next, each bounded by -m 2), each answer framed as
// its own section by curl's --write-out, so the parser reads them exactly
// as it reads rf_http's. -q keeps a ~/.curlrc from changing the output.
func writeCurlAll(b *strings.Builder, gets []httpGet) {
	if len(gets) == 0 {
		b.WriteString("\t:\n")
		return
	}
	b.WriteString("\tprintf '%s begin %s\\n' \"$M\" " + shell.Quote(gets[0].section) + "\n")
	b.WriteString("\tcurl -q")
	for i, g := range gets {
		if i > 0 {
			b.WriteString(" --next")
		}
		next := ""
		if i+1 < len(gets) {
			next = gets[i+1].section
		}
		b.WriteString(" -sS -m 2 -w " + shell.Quote(curlWriteOut(next)) + " " + shell.Quote(g.url))
	}
	b.WriteString(" </dev/null 2>/dev/null\n")
}

// PeerScript returns the second-round probe for one host: the route to,
// and optionally a TCP connect to, each target, in one exec.
func PeerScript(spec HostSpec, targets []netip.AddrPort) string {
	var b strings.Builder
	b.WriteString("# rayform observe peer probe (read-only; generated, do not edit)\n")
	b.WriteString(prelude)
	checks := make([]check, 0, len(targets))
	for _, t := range targets {
		if t.Addr().IsValid() {
			checks = append(checks, check{addr: t.Addr(), port: int(t.Port())})
		}
	}
	if hasTCP(checks) {
		b.WriteString(tcpHelpers)
	}
	writeTimeout(&b, spec.CommandTimeout)
	b.WriteString("printf '%s probe " + strconv.Itoa(probeVersion) + "\\n' \"$M\"\n")
	writeChecks(&b, checks)
	b.WriteString("printf '%s done\\n' \"$M\"\n")
	return b.String()
}

// check is one peer address to route to (and port to connect to, if > 0).
type check struct {
	addr netip.Addr
	port int
}

// staticChecks returns the checks of peers whose address the spec declares.
func staticChecks(peers []Peer) []check {
	var out []check
	for _, p := range peers {
		if p.Addr.IsValid() {
			out = append(out, check{addr: p.Addr, port: p.Port})
		}
	}
	return out
}

func hasTCP(checks []check) bool {
	for _, c := range checks {
		if c.port > 0 && c.port <= 65535 {
			return true
		}
	}
	return false
}

// writeIPBatch adds the first round's network section: one `ip -j -force
// -batch -` process answers `addr show`, `route show`, the route to
// internetProbeAddr and the route to every distinct peer address, one JSON
// array per line (see parseIPBatch). ip cannot hang (it asks the kernel over
// netlink), so it runs without timeout(1).
func writeIPBatch(b *strings.Builder, checks []check) {
	addrs := distinctAddrs(checks)
	var cmds strings.Builder
	cmds.WriteString("addr show\nroute show\nroute get " + internetProbeAddr + "\n")
	for _, a := range addrs {
		cmds.WriteString("route get " + a + "\n")
	}
	name := secIPBatch
	if len(addrs) > 0 {
		name += " addrs=" + strings.Join(addrs, ",")
	}
	b.WriteString("rf_sec " + shell.Quote(name) + " rf_ip " + shell.Quote(cmds.String()) + "\n")
}

// writeChecks adds the route lookups of every distinct address, batched in
// one `ip -j -force -batch -` (one process however many peers: N peers
// would otherwise cost N processes per host, N² across the cluster), and
// one TCP connect per distinct address and port.
func writeChecks(b *strings.Builder, checks []check) {
	addrs := distinctAddrs(checks)
	if len(addrs) > 0 {
		var cmds strings.Builder
		for _, a := range addrs {
			cmds.WriteString("route get " + a + "\n")
		}
		b.WriteString("rf_routes() { printf '%s' \"$1\" | ip -j -force -batch -; }\n")
		b.WriteString("rf_sec " + shell.Quote(secRouteBatch+" addrs="+strings.Join(addrs, ",")) + " rf_routes " + shell.Quote(cmds.String()) + "\n")
	}
	writeTCPChecks(b, checks)
}

// distinctAddrs returns the checks' addresses, each once, in order.
func distinctAddrs(checks []check) []string {
	seen := map[string]bool{}
	var addrs []string
	for _, c := range checks {
		a := c.addr.String()
		if !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// writeTCPChecks adds one TCP connect per distinct address and port.
func writeTCPChecks(b *strings.Builder, checks []check) {
	seen := map[string]bool{}
	for _, c := range checks {
		if c.port <= 0 || c.port > 65535 {
			continue
		}
		a, p := c.addr.String(), strconv.Itoa(c.port)
		if !seen[a+" "+p] {
			seen[a+" "+p] = true
			b.WriteString("rf_sec " + shell.Quote(secTCP+" addr="+a+" port="+p) + " rf_tcp " + a + " " + p + "\n")
		}
	}
}

// writeTimeout sets rf_t, the per-tool bound, when timeout(1) exists.
func writeTimeout(b *strings.Builder, d time.Duration) {
	if d <= 0 {
		d = DefaultCommandTimeout
	}
	secs := int((d + time.Second - 1) / time.Second)
	fmt.Fprintf(b, "rf_t=%d\n", secs)
	b.WriteString("command -v timeout >/dev/null 2>&1 || rf_t=\n")
}

func validOnly(items []string, valid func(string) bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, it := range items {
		if valid(it) && !seen[it] {
			seen[it] = true
			out = append(out, it)
		}
	}
	return out
}
