rf_proj=''
# rf_serve NAME HOSTDIR CONTAINER: the serve's record, then "alive" or "dead".
rf_serve() {
	if [ -z "$2" ] || [ ! -d "$2" ]; then
		rf_sexec "$3" "d=/tmp/rayform/serve; [ -f \$d/serve-$1.json ] || d=/tmp/rayform; cat \$d/serve-$1.json && { kill -0 \"\$(cat \$d/serve-$1.pid)\" 2>/dev/null && echo alive || echo dead; }"
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
	rf_sexec "$3" "kill -0 \"\$(cat /tmp/rayform/serve/serve-$1.pid)\" 2>/dev/null && echo alive || echo dead"
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
rf_sec 'serve.record name=qwen' rf_serve qwen /var/tmp/rayform/spark/spark1/rayform-spark rayform-spark
rf_sec 'serve.record name=llama-2' rf_serve llama-2 /var/tmp/rayform/spark/spark1/rayform-spark rayform-spark
