# rayform observe peer probe (read-only; generated, do not edit)
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
rf_routes() { printf '%s' "$1" | ip -j -force -batch -; }
rf_sec 'route.batch addrs=192.168.200.12,192.168.200.14' rf_routes 'route get 192.168.200.12
route get 192.168.200.14
'
rf_sec 'tcp addr=192.168.200.12 port=6379' rf_tcp 192.168.200.12 6379
printf '%s done\n' "$M"
