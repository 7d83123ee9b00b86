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
	{ rf_o=$(rf_x nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version,compute_cap,mig.mode.current --format=csv,noheader,nounits 2>&4 4>&-); rf_rc=$?; } 4>&2
	if [ "$rf_rc" = 2 ]; then
		rf_x nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free,driver_version --format=csv,noheader,nounits
		rf_rc=$?
	elif [ "$rf_rc" = 0 ]; then
		printf '%s\n' "$rf_o"
	else
		printf '%s\n' "$rf_o" >&2
	fi
	unset rf_o
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
rf_pfmt='{{if or (eq (.Label "rayform.project") "spark") (eq .Names "rayform-ray-head")}}{"ID":{{json .ID}},"Image":{{json .Image}},"Labels":{{json .Labels}},"Names":{{json .Names}},"Networks":{{json .Networks}},"State":{{json .State}},"Status":{{json .Status}},"Current":false}{{end}}'
rf_ifmt='{"Id":{{json .Id}},"RepoTags":{{json .RepoTags}},"Architecture":{{json .Architecture}},"Config":{"Entrypoint":{{json .Config.Entrypoint}},"Cmd":{{json .Config.Cmd}},"Labels":{{json .Config.Labels}},"Env":[{{range $i, $e := .Config.Env}}{{if $i}},{{end}}{{$k := index (split $e "=") 0}}{{if or (eq $k "NVIDIA_REQUIRE_CUDA") (eq $k "CUDA_VERSION") (eq $k "TORCH_CUDA_ARCH_LIST") (eq $k "LD_LIBRARY_PATH")}}{{json $e}}{{else}}{{json $k}}{{end}}{{end}}]}}'
rf_cfmt='{"Id":{{json .Id}},"Name":{{json .Name}},"Image":{{json .Image}},"RestartCount":{{json .RestartCount}},"State":{{json .State}},"Config":{"Image":{{json .Config.Image}},"Labels":{{json .Config.Labels}},"Entrypoint":{{json .Config.Entrypoint}},"Cmd":[{{$s := false}}{{range $i, $a := .Config.Cmd}}{{if $i}},{{end}}{{$f := index (split $a "=") 0}}{{if $s}}"(sensitive value)"{{else if and (ne $f $a) (eq $f "--api-key" "--hf-token" "--token")}}{{json (printf "%s=(sensitive value)" $f)}}{{else}}{{json $a}}{{end}}{{$s = eq $a "--api-key" "--hf-token" "--token"}}{{end}}],"Env":[{{range $i, $e := .Config.Env}}{{if $i}},{{end}}{{$k := index (split $e "=") 0}}{{if eq $k "GLOO_SOCKET_IFNAME" "MASTER_ADDR" "MASTER_PORT" "NCCL_DEBUG" "NCCL_IB_DISABLE" "NCCL_IB_GID_INDEX" "NCCL_IB_HCA" "NCCL_SOCKET_IFNAME" "OMPI_MCA_btl_tcp_if_include" "RAY_ADDRESS" "RAY_memory_monitor_refresh_ms" "RAY_memory_usage_threshold" "TP_SOCKET_IFNAME" "UCX_NET_DEVICES" "VLLM_CONFIG_ROOT" "VLLM_HOST_IP" "VLLM_PORT"}}{{json $e}}{{else}}{{json $k}}{{end}}{{end}}]},"HostConfig":{"NetworkMode":{{json .HostConfig.NetworkMode}},"IpcMode":{{json .HostConfig.IpcMode}},"Privileged":{{json .HostConfig.Privileged}},"ShmSize":{{json .HostConfig.ShmSize}},"DeviceRequests":{{json .HostConfig.DeviceRequests}}}}'
# rf_image REF: the image's config (env names only) and build history.
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
	rf_ps=
	if [ "$rf_rc" = 0 ]; then
		rf_dok=1
		rf_ps=$rf_o
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
rf_via=none
if command -v curl >/dev/null 2>&1; then rf_via=curl; elif command -v wget >/dev/null 2>&1; then rf_via=wget; fi
# rf_cap MAX CMD...: CMD's stdout, its first MAX bytes; CMD's exit code.
rf_cap() {
	rf_cm=$1
	shift
	if ! command -v head >/dev/null 2>&1; then
		"$@"
		return
	fi
	{ rf_cc=$( { { "$@" 4>&- 5>&-; printf '%d' "$?" >&5; } | head -c "$rf_cm" >&4; } 5>&1); } 4>&1
	return "${rf_cc:-1}"
}
rf_http() {
	case $rf_via in
	curl) rf_cap $((rf_hmax + 1)) rf_x curl -q -sS -m 2 --max-filesize "$rf_hmax" -w '\n%{http_code}' "$1" ;;
	wget) rf_cap $((rf_hmax + 1)) rf_x wget -S -T 2 -O - "$1" ;;
	*)
		printf 'rayform: neither curl nor wget is installed\n' >&2
		return 127
		;;
	esac
}
# rf_owner PORT CONTAINER: whether a process of CONTAINER holds the listening
# socket of PORT: its cgroup (/proc/PID/cgroup, read with the shell) names
# the container's ID, which docker ps gave (rf_ps). Otherwise rf_why names
# the holder. Nothing listening, or listeners whose process ss cannot show
# (another user's, without root), or no ss at all: yes (a GET to a closed
# port is refused; an unknown owner cannot be told apart). rf_la is the
# address the owner's socket is bound to when it is one address of the
# host (a server bound to the fabric only), "" for every address or
# loopback: the GET goes there (curl --connect-to) instead of 127.0.0.1.
rf_owner() {
	rf_why=
	rf_la=
	[ "$rf_sok" = 1 ] || return 0
	rf_id=
	rf_ifs=$IFS
	IFS='
'
	for rf_l in $rf_ps; do
		case $rf_l in *"\"Names\":\"$2\""*)
			rf_id=${rf_l#*\"ID\":\"}
			rf_id=${rf_id%%\"*}
			;;
		esac
	done
	for rf_l in $rf_ss; do
		case $rf_l in *:"$1 "*) ;; *) continue ;; esac
		rf_u=${rf_l#*users:}
		while :; do
			case $rf_u in *'("'*pid=*) ;; *) break ;; esac
			rf_u=${rf_u#*'("'}
			rf_n=${rf_u%%'"'*}
			rf_u=${rf_u#*pid=}
			rf_p=${rf_u%%[!0-9]*}
			if [ -n "$rf_id" ] && [ -n "$rf_p" ] && rf_incg "$rf_p" "$rf_id"; then
				IFS=$rf_ifs
				rf_why=
				rf_la=$(rf_bound "$rf_l")
				return 0
			fi
			rf_why="$rf_n (pid $rf_p)"
		done
	done
	IFS=$rf_ifs
	[ -z "$rf_why" ]
}
# rf_bound LINE: the local address of an ss -ltn line when it is one
# address other than loopback ("" for 0.0.0.0, *, [::] and 127.0.0.1).
rf_bound() {
	set -- $1
	case ${4%:*} in 0.0.0.0 | '*' | '[::]' | 127.0.0.1 | '') ;; *) printf '%s' "${4%:*}" ;; esac
}
# rf_incg PID ID: whether PID's cgroup names ID.
rf_incg() {
	[ -r "/proc/$1/cgroup" ] || return 1
	while IFS= read -r rf_c; do
		case $rf_c in *"$2"*) return 0 ;; esac
	done <"/proc/$1/cgroup"
	return 1
}
rf_t=15
command -v timeout >/dev/null 2>&1 || rf_t=
printf '%s probe 1\n' "$M"
rf_bsec meta rf_meta
rf_sec 'ip.batch addrs=192.168.200.13' rf_ip 'addr show
route show
route get 8.8.8.8
route get 192.168.200.13
'
rf_sec rdma rf_rdma
rf_bsec meminfo rf_mem
rf_sec exec rf_exec
rf_sec gpu rf_gpu
rf_listen 'listen ports=8265,8000'
rf_containers 'docker.containers envkeys=GLOO_SOCKET_IFNAME,MASTER_ADDR,MASTER_PORT,NCCL_DEBUG,NCCL_IB_DISABLE,NCCL_IB_GID_INDEX,NCCL_IB_HCA,NCCL_SOCKET_IFNAME,OMPI_MCA_btl_tcp_if_include,RAY_ADDRESS,RAY_memory_monitor_refresh_ms,RAY_memory_usage_threshold,TP_SOCKET_IFNAME,UCX_NET_DEVICES,VLLM_CONFIG_ROOT,VLLM_HOST_IP,VLLM_PORT' rayform-ray-head
# rf_lown: "PID CONTAINER" for each listening process inside a listed container.
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
rf_sec listen.owner rf_lown
if [ "$rf_dok" != 1 ]; then
	rf_skip 'docker.image ref=hellohal2064/vllm-qwen3.5-gb10:latest' 'docker unavailable'
elif [ "$rf_need" = 1 ]; then
	rf_image hellohal2064/vllm-qwen3.5-gb10:latest
else
	rf_skip 'docker.image ref=hellohal2064/vllm-qwen3.5-gb10:latest' 'containers current'
fi
rf_hmax=4194304
rf_a0=
rf_h0=/dev/null
if rf_owner 8265 rayform-ray-head; then rf_g0=1; rf_a0=$rf_la; else rf_g0=0; rf_skip 'http via=guard url=http://127.0.0.1:8265/api/v0/nodes?limit=1000' "held by $rf_why"; fi
rf_a1=
rf_h1=/dev/null
if rf_owner 8000 rayform-ray-head; then rf_g1=1; rf_a1=$rf_la; else rf_g1=0; rf_skip 'http via=guard url=http://127.0.0.1:8000/health' "held by $rf_why"; fi
rf_a2=
rf_h2=/dev/null
if rf_owner 8000 rayform-ray-head; then rf_g2=1; rf_a2=$rf_la; else rf_g2=0; rf_skip 'http via=guard url=http://127.0.0.1:8000/v1/models' "held by $rf_why"; fi
if [ "$rf_via" = curl ]; then
	set --
	rf_nx=
	if [ "$rf_g2" = 1 ]; then
		set -- -sS -m 2 --max-filesize "$rf_hmax" -H "@$rf_h2" --connect-to 127.0.0.1:8000:"${rf_a2:-127.0.0.1}":8000 -w '\n%{http_code}\n@@rayform@@ stderr\n%{errormsg}\n@@rayform@@ end %{exitcode}\n'"${rf_nx:+$M begin $rf_nx\\n}" http://127.0.0.1:8000/v1/models ${rf_nx:+--next} "$@"
		rf_nx='http via=curl url=http://127.0.0.1:8000/v1/models'
	fi
	if [ "$rf_g1" = 1 ]; then
		set -- -sS -m 2 --max-filesize "$rf_hmax" -H "@$rf_h1" --connect-to 127.0.0.1:8000:"${rf_a1:-127.0.0.1}":8000 -w '\n%{http_code}\n@@rayform@@ stderr\n%{errormsg}\n@@rayform@@ end %{exitcode}\n'"${rf_nx:+$M begin $rf_nx\\n}" http://127.0.0.1:8000/health ${rf_nx:+--next} "$@"
		rf_nx='http via=curl url=http://127.0.0.1:8000/health'
	fi
	if [ "$rf_g0" = 1 ]; then
		set -- -sS -m 2 --max-filesize "$rf_hmax" -H "@$rf_h0" --connect-to 127.0.0.1:8265:"${rf_a0:-127.0.0.1}":8265 -w '\n%{http_code}\n@@rayform@@ stderr\n%{errormsg}\n@@rayform@@ end %{exitcode}\n'"${rf_nx:+$M begin $rf_nx\\n}" 'http://127.0.0.1:8265/api/v0/nodes?limit=1000' ${rf_nx:+--next} "$@"
		rf_nx='http via=curl url=http://127.0.0.1:8265/api/v0/nodes?limit=1000'
	fi
	if [ -n "$rf_nx" ]; then
		printf '%s begin %s\n' "$M" "$rf_nx"
		rf_cap 12595200 curl -q "$@" </dev/null 2>/dev/null
		printf '\n'
	fi
else
	if [ "$rf_g0" != 1 ]; then
		:
	elif [ "$rf_via" = none ] && [ "$rf_dok" = 1 ]; then
		rf_sec 'http via=exec url=http://127.0.0.1:8265/api/v0/nodes?limit=1000' rf_cap $((rf_hmax + 1)) rf_x docker exec rayform-ray-head ray list nodes --format json --limit 1000
	else
		rf_sec "http via=$rf_via url=http://127.0.0.1:8265/api/v0/nodes?limit=1000" rf_http 'http://127.0.0.1:8265/api/v0/nodes?limit=1000'
	fi
	if [ "$rf_g1" != 1 ]; then
		:
	else
		rf_sec "http via=$rf_via url=http://127.0.0.1:8000/health" rf_http http://127.0.0.1:8000/health
	fi
	if [ "$rf_g2" != 1 ]; then
		:
	else
		rf_sec "http via=$rf_via url=http://127.0.0.1:8000/v1/models" rf_http http://127.0.0.1:8000/v1/models
	fi
fi
printf '%s done\n' "$M"
