package observe

import (
	"fmt"
	"net/netip"
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
	secHTTP       = "http"
	secRecord     = "record"
	secFile       = "file"
	secClock      = "clock"
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
rf_exec() {
	printf 'stack=%s\n' "$(ulimit -s 2>/dev/null)"
	printf 'pagesize=%s\n' "$(rf_x getconf PAGESIZE 2>/dev/null)"
	rf_v=$(rf_x env 2>/dev/null) || return 1
	printf 'env_bytes=%s\n' "${#rf_v}"
	rf_n=0
	rf_i=$IFS
	IFS='
'
	for rf_l in $rf_v; do rf_n=$((rf_n + 1)); done
	IFS=$rf_i
	printf 'env_count=%s\n' "$rf_n"
	unset rf_v rf_l
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
# rf_listen NAME: the section of ss -Hltnp, kept in rf_ss (rf_sok=1 when it
# answered) for rf_owner.
rf_listen() {
	printf '%s begin %s\n' "$M" "$1"
	rf_sok=0
	rf_ss=
	rf_o=$(rf_x ss -Hltnp 2>&1 </dev/null)
	rf_rc=$?
	rf_err=
	if [ "$rf_rc" = 0 ]; then
		rf_sok=1
		rf_ss=$rf_o
		printf '%s\n' "$rf_o"
	else
		rf_err=$rf_o
	fi
	printf '\n%s stderr\n%s\n%s end %d\n' "$M" "$rf_err" "$M" "$rf_rc"
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

// ProbeScript returns the first-round probe for one host: a POSIX sh script
// that, in one exec, prints every fact observe needs as framed sections
// (see Parse). It is deterministic for a given spec, changes nothing on the
// host, and never fails because a tool is missing: that tool's section
// reports it instead. Items of the spec that Validate rejects are left out.
//
// Links come from `ip -j addr show`, which carries every field of `ip -j
// link show` that the plan reads (name, flags, MTU, operstate, MAC), so the
// probe runs ip once for both. An image is read from its config and build
// history only (Image.Command, Image.History): running the image would
// create a container, which is not read-only.
func ProbeScript(spec HostSpec) string {
	var b strings.Builder
	b.Grow(8 << 10)
	b.WriteString("# rayform observe probe (read-only; generated, do not edit)\n")
	b.WriteString(prelude)
	b.WriteString(hostHelpers)
	b.WriteString(gpuHelpers)
	images := validOnly(spec.Images, validImageRef)
	names := validOnly(spec.Containers, validContainer)
	project := spec.Project
	if !validLabelValue(project) {
		project = ""
	}
	listing := project != "" || len(names) > 0
	docker := len(images) > 0 || listing || len(spec.HTTP) > 0 || len(spec.Records) > 0
	if docker {
		fmt.Fprintf(&b, "rf_pfmt=%s\n", shell.Quote(psTemplate(project, names, spec.SpecHashes)))
		fmt.Fprintf(&b, "rf_ifmt=%s\n", shell.Quote(imageFormat))
		fmt.Fprintf(&b, "rf_cfmt=%s\n", shell.Quote(containerTemplate(spec.envKeys())))
		b.WriteString(dockerHelpers)
	}
	if len(spec.HTTP) > 0 {
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
	b.WriteString("rf_sec " + secExec + " rf_exec\n")
	b.WriteString("rf_sec gpu rf_gpu\n")
	if spec.AllListeners {
		b.WriteString("rf_listen " + shell.Quote(secListen+" ports=all") + "\n")
	} else if ports := listenPorts(spec); len(ports) > 0 {
		b.WriteString("rf_listen " + shell.Quote(secListen+" ports="+strings.Join(ports, ",")) + "\n")
	}
	if listing {
		// docker ps is the daemon check too (see dockerHelpers).
		name := secContainers + " envkeys=" + strings.Join(spec.envKeys(), ",")
		b.WriteString("rf_containers " + shell.Quote(name))
		for _, n := range names {
			b.WriteString(" " + shell.Quote(strings.TrimPrefix(n, "/")))
		}
		b.WriteString("\n")
		if len(listenPorts(spec)) > 0 || spec.AllListeners {
			b.WriteString(listenOwnerHelpers)
			b.WriteString("rf_sec " + secListenOwner + " rf_lown\n")
		}
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
	writeHTTP(&b, spec.HTTP)
	writeRecords(&b, spec.Project, spec.Records)
	writeFiles(&b, spec.Files)
	writeTrees(&b, spec.Trees)
	writeReads(&b, spec.Reads)
	writeSecretKeys(&b, spec.SecretKeys)
	b.WriteString("printf '%s done\\n' \"$M\"\n")
	return b.String()
}

// listenPorts are the ports whose listeners the probe lists: the spec's
// Ports and those of its HTTP probes with an Owner (whose guard reads the
// listing).
func listenPorts(spec HostSpec) []string {
	var out []string
	seen := map[int]bool{}
	add := func(p int) {
		if p >= 1 && p <= 65535 && !seen[p] {
			seen[p] = true
			out = append(out, strconv.Itoa(p))
		}
	}
	for _, p := range spec.Ports {
		add(p)
	}
	for _, p := range spec.HTTP {
		if p.Owner != "" && p.validate() == nil {
			add(p.Port())
		}
	}
	return out
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
