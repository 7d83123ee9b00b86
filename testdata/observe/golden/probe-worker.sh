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
rf_pfmt='{{if or (eq (.Label "rayform.project") "spark") (eq .Names "rayform-ray-worker")}}{"ID":{{json .ID}},"Image":{{json .Image}},"Labels":{{json .Labels}},"Names":{{json .Names}},"Networks":{{json .Networks}},"State":{{json .State}},"Status":{{json .Status}},"Current":false}{{end}}'
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
rf_tcp() {
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
rf_t=15
command -v timeout >/dev/null 2>&1 || rf_t=
printf '%s probe 1\n' "$M"
rf_bsec meta rf_meta
rf_sec 'ip.batch addrs=192.168.200.12' rf_ip 'addr show
route show
route get 8.8.8.8
route get 192.168.200.12
'
rf_sec 'tcp addr=192.168.200.12 port=6379' rf_tcp 192.168.200.12 6379
rf_sec rdma rf_rdma
rf_bsec meminfo rf_mem
rf_sec exec rf_exec
rf_sec gpu rf_gpu
rf_containers 'docker.containers envkeys=GLOO_SOCKET_IFNAME,MASTER_ADDR,MASTER_PORT,NCCL_DEBUG,NCCL_IB_DISABLE,NCCL_IB_GID_INDEX,NCCL_IB_HCA,NCCL_SOCKET_IFNAME,OMPI_MCA_btl_tcp_if_include,RAY_ADDRESS,RAY_memory_monitor_refresh_ms,RAY_memory_usage_threshold,TP_SOCKET_IFNAME,UCX_NET_DEVICES,VLLM_CONFIG_ROOT,VLLM_HOST_IP,VLLM_PORT' rayform-ray-worker
if [ "$rf_dok" != 1 ]; then
	rf_skip 'docker.image ref=hellohal2064/vllm-qwen3.5-gb10:latest' 'docker unavailable'
elif [ "$rf_need" = 1 ]; then
	rf_image hellohal2064/vllm-qwen3.5-gb10:latest
else
	rf_skip 'docker.image ref=hellohal2064/vllm-qwen3.5-gb10:latest' 'containers current'
fi
printf '%s done\n' "$M"
