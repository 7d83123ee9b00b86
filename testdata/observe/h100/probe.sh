# rayform observe probe (read-only; generated, do not edit)
set -f
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
# rf_bsec NAME FUNC: a section of shell builtins only (no tool to capture the
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
rf_gpu() {
	{ rf_e=$(rf_x nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version,compute_cap,mig.mode.current --format=csv,noheader,nounits 2>&1 1>&4 4>&-); rf_rc=$?; } 4>&1
	if [ "$rf_rc" = 2 ]; then
		rf_x nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version --format=csv,noheader,nounits
		rf_rc=$?
	elif [ "$rf_rc" != 0 ]; then
		printf '%s\n' "$rf_e" >&2
	fi
	[ "$rf_rc" = 0 ] || return "$rf_rc"
	printf '%s part version\n' "$M"
	rf_x nvidia-smi --version 2>/dev/null
	printf '%s part nvswitch\n' "$M"
	rf_n=0
	set +f
	for rf_p in /proc/driver/nvidia-nvswitch/devices/*; do
		[ -e "$rf_p" ] || continue
		printf '%s\n' "${rf_p##*/}"
		rf_n=1
	done
	set -f
	if [ "$rf_n" = 1 ]; then
		printf '%s part fabricmanager\n' "$M"
		rf_x systemctl show -p LoadState -p ActiveState nvidia-fabricmanager 2>/dev/null
	fi
	printf '%s part libcuda\n' "$M"
	rf_l=$(rf_x ldconfig -p 2>/dev/null) || rf_l=
	rf_i=$IFS
	IFS='
'
	for rf_p in $rf_l; do
		case $rf_p in *'libcuda.so.1 '*'=> '*)
			rf_p=${rf_p##*=> }
			printf '%s\n' "$(rf_x readlink -f "$rf_p" 2>/dev/null || printf '%s' "$rf_p")"
			break ;;
		esac
	done
	IFS=$rf_i
	unset rf_l
	return 0
}
rf_t=15
command -v timeout >/dev/null 2>&1 || rf_t=
printf '%s probe 1\n' "$M"
rf_bsec meta rf_meta
rf_sec ip.batch rf_ip 'addr show
route show
route get 8.8.8.8
'
rf_sec rdma rf_rdma
rf_bsec meminfo rf_mem
rf_sec exec rf_exec
rf_sec gpu rf_gpu
rf_sec docker.version rf_x docker version --format '{{json .}}'
rf_dok=0
if [ "$rf_rc" = 0 ]; then rf_dok=1; fi
rf_need=1
printf '%s done\n' "$M"
