#!/usr/bin/env bash
# sqlbench.sh - the SQLite workload of scripts/bench.sh, run the way fsbench.sh
# runs its workloads: mount, run sqlbench.py in a fresh work directory, unmount, print
#
#     LABEL sqlite_PHASE VALUE UNIT          (+ sqlite.cpu_client / sqlite.cpu_fs in s)
#
# usage: sqlbench.sh [-s SUBDIR] [-S SCALE] LABEL BACKING_DIR MOUNT_CMD|native
#   MOUNT_CMD: as for fsbench.sh ({src}, {mnt}, {anchors} substituted; must stay in the
#   foreground so its CPU time can be read and it can be reaped).  SUBDIR: workload dir
#   relative to the mount point.  FSBENCH_POSTMOUNT is honoured as in fsbench.sh.
# Exit status: 0 when every phase ran.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ANCHORS=${FSBENCH_ANCHORS:-/tmp/anchors}
POSTMOUNT=${FSBENCH_POSTMOUNT:-}
SUB=. SCALE=${SQLBENCH_SCALE:-1}
while getopts "s:S:" opt; do
	case $opt in
		s) SUB=$OPTARG ;;
		S) SCALE=$OPTARG ;;
		*) sed -n '2,12p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ $# -eq 3 ]] || { sed -n '2,12p' "$0" >&2; exit 2; }
LABEL=$1 BACKING=$(cd "$2" && pwd -P) SPEC=$3
[[ -n $BACKING ]] || exit 2

log() { printf '[sqlbench %s %s] %s\n' "$LABEL" "$(date +%T)" "$*" >&2; }
emit() { printf '%s %s %s %s\n' "$LABEL" "$1" "$2" "$3"; }
MNT="" DPID="" NATIVE=0 WORK=""
[[ $SPEC == native ]] && NATIVE=1
is_mounted() { [[ -n $MNT ]] && findmnt -rn --mountpoint "$MNT" >/dev/null 2>&1; }
subst() { local s=$1; s=${s//\{src\}/$BACKING}; s=${s//\{mnt\}/$MNT}; s=${s//\{anchors\}/$ANCHORS}; printf '%s' "$s"; }
CLK_TCK=$(getconf CLK_TCK)
fs_ticks() { local s a; s=$(cat /proc/"$DPID"/stat 2>/dev/null) || { echo NA; return; }; s=${s##*) }; read -r -a a <<<"$s"; echo $((a[11] + a[12])); }

cleanup() {
	cd / || true
	if ((!NATIVE)); then
		if is_mounted; then
			[[ -n $WORK && -d $WORK ]] && rm -rf -- "$WORK"
			for _ in 1 2 3 4 5 6 7 8 9 10; do fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.5; done
			is_mounted && fusermount3 -uz "$MNT" 2>/dev/null
		fi
		if [[ -n $DPID ]]; then
			for _ in $(seq 1 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
			kill -0 "$DPID" 2>/dev/null && kill -TERM "$DPID" 2>/dev/null
			wait "$DPID" 2>/dev/null
		fi
		[[ -n $MNT ]] && ! is_mounted && rmdir "$MNT" 2>/dev/null
	else
		[[ -n $WORK ]] && rm -rf -- "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

printf '# sqlbench label=%s date=%s scale=%s mount_cmd=%s subdir=%s\n' "$LABEL" "$(date -Is)" "$SCALE" "$SPEC" "$SUB"
if ((NATIVE)); then
	WORK=$BACKING/sqlbench.$LABEL.$$
else
	MNT=$(mktemp -d /tmp/sqlbench-mnt.XXXXXX) || exit 1
	CMD=$(subst "$SPEC")
	log "mounting: $CMD"
	bash -c "exec $CMD" >"$MNT.log" 2>&1 </dev/null &
	DPID=$!
	for _ in $(seq 1 300); do
		is_mounted && break
		kill -0 "$DPID" 2>/dev/null || { cat "$MNT.log" >&2; rm -f "$MNT.log"; echo "sqlbench: mount command exited" >&2; exit 1; }
		sleep 0.05
	done
	rm -f "$MNT.log"
	is_mounted || { echo "sqlbench: mount did not appear" >&2; exit 1; }
	[[ -n $POSTMOUNT ]] && { bash -c "$(subst "$POSTMOUNT")" || echo "# postmount command failed"; }
	WORK=$MNT/$(subst "$SUB")/sqlbench.$LABEL.$$
	WORK=${WORK//\/.\//\/}
fi

rc=0
sync
times >/tmp/sqlbench.times.$$; c0=$(awk 'NR==2{t=0;for(i=1;i<=2;i++){split($i,a,"m");sub("s","",a[2]);t+=a[1]*60+a[2]}printf "%.3f",t}' /tmp/sqlbench.times.$$)
f0=NA; ((NATIVE)) || f0=$(fs_ticks)
log "sqlbench.py (scale $SCALE) in $WORK"
if python3 "$HERE/sqlbench.py" "$WORK" "$SCALE" >/tmp/sqlbench.out.$$ 2>/tmp/sqlbench.err.$$; then
	while read -r ph ops secs rate; do
		unit=ops/s
		case $ph in txn_*) unit=txn/s ;; bulk_insert|scan) unit=rows/s ;; point_select) unit=queries/s ;; esac
		emit "sqlite_$ph" "$rate" "$unit"
	done </tmp/sqlbench.out.$$
else
	cat /tmp/sqlbench.out.$$ /tmp/sqlbench.err.$$ >&2
	echo "# sqlite workload FAILED"
	rc=1
fi
times >/tmp/sqlbench.times.$$; c1=$(awk 'NR==2{t=0;for(i=1;i<=2;i++){split($i,a,"m");sub("s","",a[2]);t+=a[1]*60+a[2]}printf "%.3f",t}' /tmp/sqlbench.times.$$)
emit sqlite.cpu_client "$(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.2f", b-a}')" s
if ((NATIVE)); then emit sqlite.cpu_fs NA s
else
	f1=$(fs_ticks)
	if [[ $f0 == NA || $f1 == NA ]]; then emit sqlite.cpu_fs NA s
	else emit sqlite.cpu_fs "$(awk -v a="$f0" -v b="$f1" -v h="$CLK_TCK" 'BEGIN{printf "%.2f", (b-a)/h}')" s; fi
	[[ -n $DPID ]] && printf '# daemon pid=%s\n' "$DPID"
fi
rm -f /tmp/sqlbench.out.$$ /tmp/sqlbench.err.$$ /tmp/sqlbench.times.$$
cleanup
trap - EXIT
exit $rc
