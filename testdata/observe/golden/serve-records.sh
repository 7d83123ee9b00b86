rf_proj=spark
# rf_rec NAME HOSTDIR CONTAINER DIR LEGACYDIR: the record, then "alive" or "dead".
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
rf_sec 'record name=serve-qwen' rf_rec serve-qwen /var/tmp/rayform/spark/spark1/rayform-spark rayform-spark /tmp/rayform/serve /tmp/rayform
rf_sec 'record name=serve-llama-2' rf_rec serve-llama-2 /var/tmp/rayform/spark/spark1/rayform-spark rayform-spark /tmp/rayform/serve /tmp/rayform
