#!/usr/bin/env bash
# fsbench.sh - one run of the file workloads of scripts/bench.sh on one file system.
#
# usage: fsbench.sh [-s SUBDIR] [-w WORKLOADS] LABEL BACKING_DIR MOUNT_CMD|native
#        fsbench.sh --build-anchors
#
# Mounts the file system (MOUNT_CMD, with {src} = BACKING_DIR, {mnt} = a fresh mount point,
# {anchors} = $FSBENCH_ANCHORS substituted; it must stay in the foreground so the daemon's
# CPU time can be read and the daemon reaped), runs the workloads in a fresh directory
# MNT/SUBDIR/fsbench.LABEL.PID, unmounts, and prints one line per figure,
#
#     LABEL METRIC VALUE UNIT
#
# and '#' notes (report.py reads the "# size=" one for its table's descriptions). "native"
# runs the workloads in BACKING_DIR itself. Progress goes to stderr; report.py reads its
# messages ("seqwrite", "meta:", "tree:", "done; unmounting") for phase start times.
#
# workloads (-w, comma separated; default all):
#   seqwrite   fio sequential write of FSBENCH_SIZE, bs=1M, fsync at the end       MiB/s
#   seqread    the same file read after dropping every cache                      MiB/s
#   randread   randread_cold: FSBENCH_RANDREAD_IO of 4k random reads, none repeated
#              (each one a request to a daemon that does not keep the page cache)
#              randread_hot: 4k reads within the first FSBENCH_HOT_SIZE, measured for
#              FSBENCH_HOT_RUNTIME s after an unmeasured FSBENCH_HOT_RAMP s       IOPS
#   randwrite  4k random writes for FSBENCH_RUNTIME s, then a timed sync
#              (randwrite.sync, s)                                               IOPS
#   meta       metabench.c on FSBENCH_NFILES empty files, FSBENCH_READDIR_PASSES
#              listings: meta_create ... meta_unlink                              ops/s
#   tree       untar FSBENCH_TARBALL (made from FSBENCH_TARSRC), read every file,
#              rm -rf: tree_untar, tree_readall, tree_rm, tree_total               s
# Every phase P also reports P.cpu_client (the workload's processes), P.cpu_fs (the
# daemon; NA natively), P.cpu_machine (the whole machine), in s; plus mount (s until the
# mount appeared) and bg_busy (cores busy before the run began: other tenants).
#
# --build-anchors  compiles passthrough_ll from the source Debian's libfuse3-dev ships, and
#                  metabench.c, into FSBENCH_ANCHORS (nothing is fetched).
# Exit status: 0 when every workload ran, 1 otherwise, 2 for a usage error.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ANCHORS=${FSBENCH_ANCHORS:-/tmp/containerfs-bench-anchors}
EXAMPLES=${FSBENCH_EXAMPLES:-/usr/share/doc/libfuse3-dev/examples}
SIZE=${FSBENCH_SIZE:-1G}
RUNTIME=${FSBENCH_RUNTIME:-10}
RANDREAD_IO=${FSBENCH_RANDREAD_IO:-256M}
HOT_SIZE=${FSBENCH_HOT_SIZE:-64M}
HOT_RAMP=${FSBENCH_HOT_RAMP:-2}
HOT_RUNTIME=${FSBENCH_HOT_RUNTIME:-5}
NFILES=${FSBENCH_NFILES:-10000}
PASSES=${FSBENCH_READDIR_PASSES:-10}
TARSRC=${FSBENCH_TARSRC:-/usr/include}
TARBALL=${FSBENCH_TARBALL:-$ANCHORS/tree.tar}
PRIME=${FSBENCH_PRIME:-1}
SETTLE=${FSBENCH_SETTLE:-0.5}
POSTMOUNT=${FSBENCH_POSTMOUNT:-}
WORKLOADS=${FSBENCH_WORKLOADS:-seqwrite,seqread,randread,randwrite,meta,tree}

build_anchors() {
	mkdir -p "$ANCHORS" || return 1
	if [[ ! -x $ANCHORS/passthrough_ll ]]; then
		local tmp src
		tmp=$(mktemp -d) || return 1
		for src in "$EXAMPLES/passthrough_ll.c" "$EXAMPLES/passthrough_ll.c.gz"; do [[ -e $src ]] && break; done
		[[ -e $src ]] || { echo "fsbench: $EXAMPLES/passthrough_ll.c missing (apt-get install libfuse3-dev)" >&2; return 1; }
		if [[ $src == *.gz ]]; then zcat "$src" >"$tmp/passthrough_ll.c"; else cp "$src" "$tmp/"; fi
		# the example includes its helper header from beside itself
		if [[ -e $EXAMPLES/passthrough_helpers.h.gz ]]; then zcat "$EXAMPLES/passthrough_helpers.h.gz" >"$tmp/passthrough_helpers.h"
		else cp "$EXAMPLES/passthrough_helpers.h" "$tmp/" 2>/dev/null; fi
		# libfuse's own build defines these on Linux; without them the example lacks
		# fallocate, copy_file_range and friends and is not the anchor it should be
		# shellcheck disable=SC2046
		gcc -O2 -Wall -DHAVE_POSIX_FALLOCATE -DHAVE_FALLOCATE -DHAVE_COPY_FILE_RANGE -DHAVE_UTIMENSAT \
			-DHAVE_FSTATAT -DHAVE_OPENAT -DHAVE_SETXATTR -DHAVE_SPLICE -DHAVE_VMSPLICE \
			"$tmp/passthrough_ll.c" $(pkg-config --cflags --libs fuse3) -o "$ANCHORS/passthrough_ll"
		local rc=$?
		rm -rf "$tmp"
		((rc == 0)) || return 1
	fi
	if [[ ! -x $ANCHORS/metabench || $HERE/metabench.c -nt $ANCHORS/metabench ]]; then
		gcc -O2 -Wall -o "$ANCHORS/metabench" "$HERE/metabench.c" || return 1
	fi
}

SUB=.
case ${1:-} in
	--build-anchors) build_anchors; exit $? ;;
	-h|--help) sed -n '2,37p' "$0"; exit 0 ;;
esac
while getopts "s:w:" opt; do
	case $opt in
		s) SUB=$OPTARG ;;
		w) WORKLOADS=$OPTARG ;;
		*) sed -n '3,4p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
(($# == 3)) || { sed -n '3,4p' "$0" >&2; exit 2; }
LABEL=$1 SPEC=$3
[[ $LABEL =~ ^[A-Za-z0-9._+-]+$ ]] || { echo "fsbench: bad label '$LABEL'" >&2; exit 2; }
BACKING=$(cd "$2" 2>/dev/null && pwd -P) || { echo "fsbench: no directory $2" >&2; exit 2; }
for tool in fio jq gcc tar findmnt fusermount3; do
	command -v $tool >/dev/null || { echo "fsbench: $tool missing" >&2; exit 1; }
done
build_anchors || { echo "fsbench: cannot build the anchors into $ANCHORS" >&2; exit 1; }

say() { printf '[fsbench %s %s] %s\n' "$LABEL" "$(date +%T)" "$*" >&2; }
emit() { printf '%s %s %s %s\n' "$LABEL" "$1" "$2" "$3"; }
diff_of() { awk -v a="$1" -v b="$2" -v d="${3:-1}" -v f="${4:-%.2f}" 'BEGIN{printf f, (b-a)/d}'; }
wants() { [[ ,$WORKLOADS, == *,$1,* ]]; }

NATIVE=0 MNT="" DPID="" WORK="" SCRATCH=""
[[ $SPEC == native ]] && NATIVE=1
mounted() { [[ -n $MNT ]] && findmnt -rn --mountpoint "$MNT" >/dev/null 2>&1; }
expand() { local s=$1; s=${s//\{src\}/$BACKING}; s=${s//\{mnt\}/$MNT}; printf '%s' "${s//\{anchors\}/$ANCHORS}"; }

finish() {
	cd / || true
	if ((NATIVE)); then
		[[ -n $WORK ]] && rm -rf -- "$WORK"
	else
		if mounted; then
			[[ -n $WORK ]] && rm -rf -- "$WORK" 2>/dev/null
			for _ in 1 2 3 4 5 6 7 8 9 10; do fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.5; done
			mounted && { say "unmount refused: lazy"; fusermount3 -uz "$MNT" 2>/dev/null; }
		fi
		if [[ -n $DPID ]]; then
			for _ in $(seq 50); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
			kill -0 "$DPID" 2>/dev/null && { say "daemon $DPID outlived its mount: SIGTERM"; kill -TERM "$DPID"; }
			wait "$DPID" 2>/dev/null
		fi
		[[ -n $MNT ]] && ! mounted && rmdir "$MNT" 2>/dev/null
	fi
	[[ -n $SCRATCH ]] && rm -rf -- "$SCRATCH"
}
trap finish EXIT
trap 'exit 130' INT TERM HUP
SCRATCH=$(mktemp -d /tmp/fsbench.XXXXXX) || exit 1

# ---- CPU accounting: busy ticks of the machine, the daemon's utime+stime, and the
# reaped children of this shell (`times` must run here, not in a subshell)
HZ=$(getconf CLK_TCK)
machine_ticks() { local a; read -r -a a </proc/stat; echo $((a[1] + a[2] + a[3] + a[6] + a[7] + a[8])); }
daemon_ticks() {
	[[ -n $DPID ]] || { echo NA; return; }
	local s a
	s=$(cat "/proc/$DPID/stat" 2>/dev/null) || { echo NA; return; }
	read -r -a a <<<"${s##*) }"
	echo $((a[11] + a[12]))
}
children_cpu() { times >"$SCRATCH/times"; awk 'NR==2{split($1,u,"m");split($2,s,"m");sub("s","",u[2]);sub("s","",s[2]);printf "%.3f",u[1]*60+u[2]+s[1]*60+s[2]}' "$SCRATCH/times" >"$SCRATCH/cpu"; }
T0=0 M0=0 D0=0 C0=0 ELAPSED=0
begin_phase() {
	sync
	sleep "$SETTLE"
	children_cpu; C0=$(<"$SCRATCH/cpu")
	M0=$(machine_ticks) D0=$(daemon_ticks) T0=$EPOCHREALTIME
}
end_phase() { # PHASE
	local t=$EPOCHREALTIME m d c
	m=$(machine_ticks) d=$(daemon_ticks)
	children_cpu; c=$(<"$SCRATCH/cpu")
	ELAPSED=$(diff_of "$T0" "$t" 1 %.3f)
	emit "$1.cpu_client" "$(diff_of "$C0" "$c")" s
	if [[ $D0 == NA || $d == NA ]]; then emit "$1.cpu_fs" NA s; else emit "$1.cpu_fs" "$(diff_of "$D0" "$d" "$HZ")" s; fi
	emit "$1.cpu_machine" "$(diff_of "$M0" "$m" "$HZ")" s
}
CAN_DROP=0
(echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null && CAN_DROP=1
drop() { sync; ((CAN_DROP)) && echo "$1" >/proc/sys/vm/drop_caches; return 0; }

FAILED=0
fio_phase() { # NAME UNIT SCALE JSON_FIELD fio-args...
	local name=$1 unit=$2 scale=$3 field=$4 v
	shift 4
	begin_phase
	if fio --name="$name" --filename="$WORK/fio.dat" --ioengine=psync --numjobs=1 --fallocate=none \
		--output-format=json --output="$SCRATCH/$name.json" "$@" >"$SCRATCH/$name.log" 2>&1; then
		v=$(jq -r ".jobs[0].$field" "$SCRATCH/$name.json")
		end_phase "$name"
		emit "$name" "$(awk -v v="$v" -v s="$scale" 'BEGIN{printf "%.1f", v/s}')" "$unit"
	else
		end_phase "$name"
		echo "fsbench: fio $name failed:" >&2
		cat "$SCRATCH/$name.log" >&2
		FAILED=1
	fi
}

# ---- the run
[[ -s $TARBALL ]] || {
	say "making $TARBALL from $TARSRC"
	mkdir -p "$(dirname "$TARBALL")" &&
		tar -C "$(dirname "$TARSRC")" -cf "$TARBALL.part" "$(basename "$TARSRC")" && mv "$TARBALL.part" "$TARBALL"
} || { echo "fsbench: cannot make $TARBALL" >&2; exit 1; }
printf '# fsbench label=%s date=%s kernel=%s nproc=%s backing=%s mount_cmd=%s subdir=%s\n' \
	"$LABEL" "$(date -Is)" "$(uname -r)" "$(nproc)" "$BACKING" "$SPEC" "$SUB"
printf '# size=%s randwrite_runtime=%ss randread_io=%s hot=%s/%ss+%ss nfiles=%s readdir_passes=%s tarball=%s prime=%s drop_caches=%s\n' \
	"$SIZE" "$RUNTIME" "$RANDREAD_IO" "$HOT_SIZE" "$HOT_RAMP" "$HOT_RUNTIME" "$NFILES" "$PASSES" "${TARBALL##*/}" "$PRIME" \
	"$( ((CAN_DROP)) && echo yes || echo no)"
b0=$(machine_ticks); sleep 1; b1=$(machine_ticks)
emit bg_busy "$(diff_of "$b0" "$b1" "$HZ")" cores
((CAN_DROP)) || echo "# drop_caches refused (not root): the cold phases run warm"

if ((PRIME)); then
	# the blocks the measured writes will use, allocated once beforehand: a thin-provisioned
	# virtual disk is several times slower at a block's first write
	say "priming the backing file system with $SIZE"
	fio --name=prime --filename="$BACKING/.fsbench-prime.$$" --rw=write --bs=1M --size="$SIZE" --end_fsync=1 \
		--ioengine=psync --output=/dev/null >/dev/null 2>&1
	rm -f "$BACKING/.fsbench-prime.$$"
fi

if ((NATIVE)); then
	WORK=$BACKING/fsbench.$LABEL.$$
else
	MNT=$(mktemp -d /tmp/fsbench-mnt.XXXXXX) || exit 1
	cmd=$(expand "$SPEC")
	say "mounting: $cmd"
	t0=$EPOCHREALTIME
	bash -c "exec $cmd" >"$SCRATCH/daemon.log" 2>&1 </dev/null &
	DPID=$!
	for _ in $(seq 300); do
		mounted && break
		kill -0 "$DPID" 2>/dev/null || { cat "$SCRATCH/daemon.log" >&2; echo "fsbench: the mount command exited" >&2; DPID=""; exit 1; }
		sleep 0.05
	done
	mounted || { cat "$SCRATCH/daemon.log" >&2; echo "fsbench: no mount after 15 s" >&2; exit 1; }
	emit mount "$(diff_of "$t0" "$EPOCHREALTIME" 1 %.3f)" s
	echo "# daemon pid=$DPID"
	if [[ -n $POSTMOUNT ]]; then bash -c "$(expand "$POSTMOUNT")" || echo "# postmount command failed"; fi
	WORK=$MNT/$(expand "$SUB")/fsbench.$LABEL.$$
	WORK=${WORK//\/.\//\/}
fi
mkdir -p "$WORK" || { echo "fsbench: cannot make $WORK" >&2; exit 1; }

if wants seqwrite || wants seqread || wants randread || wants randwrite; then
	if wants seqwrite || ! wants seqread; then
		say "seqwrite $SIZE"
		fio_phase seqwrite MiB/s 1048576 write.bw_bytes --rw=write --bs=1M --size="$SIZE" --end_fsync=1
	fi
	if wants seqread; then
		say "seqread $SIZE, caches dropped"
		drop 3
		fio_phase seqread MiB/s 1048576 read.bw_bytes --rw=read --bs=1M --size="$SIZE"
	fi
	if wants randread; then
		say "randread_cold: $RANDREAD_IO of 4k reads"
		fio_phase randread_cold IOPS 1 read.iops --rw=randread --bs=4k --size="$SIZE" --invalidate=0 --io_size="$RANDREAD_IO"
		say "randread_hot: 4k reads within $HOT_SIZE"
		fio_phase randread_hot IOPS 1 read.iops --rw=randread --bs=4k --size="$HOT_SIZE" --invalidate=0 \
			--ramp_time="$HOT_RAMP" --runtime="$HOT_RUNTIME" --time_based
	fi
	if wants randwrite; then
		say "randwrite: 4k for ${RUNTIME}s"
		fio_phase randwrite IOPS 1 write.iops --rw=randwrite --bs=4k --size="$SIZE" --invalidate=0 \
			--runtime="$RUNTIME" --time_based
		t0=$EPOCHREALTIME
		sync
		emit randwrite.sync "$(diff_of "$t0" "$EPOCHREALTIME" 1 %.3f)" s
	fi
	rm -f "$WORK/fio.dat"
fi

if wants meta; then
	say "meta: $NFILES files"
	dropcmd=""
	((CAN_DROP)) && dropcmd="sync; echo 2 >/proc/sys/vm/drop_caches"
	begin_phase
	"$ANCHORS/metabench" "$WORK/meta" "$NFILES" "$PASSES" "$dropcmd" >"$SCRATCH/meta.out" 2>"$SCRATCH/meta.err"
	rc=$?
	end_phase meta
	while read -r phase _ _ rate; do
		case $phase in readdir|ls_l*) unit=entries/s ;; *) unit=ops/s ;; esac
		emit "meta_$phase" "$rate" "$unit"
	done <"$SCRATCH/meta.out"
	((rc == 0)) || { cat "$SCRATCH/meta.err" >&2; FAILED=1; rm -rf -- "$WORK/meta"; }
fi

if wants tree; then
	say "tree: untar ${TARBALL##*/}, read every file, rm -rf"
	mkdir -p "$WORK/tree"
	cat "$TARBALL" >/dev/null
	total=0
	begin_phase
	tar -xf "$TARBALL" -C "$WORK/tree" || FAILED=1
	end_phase tree_untar
	emit tree_untar "$ELAPSED" s; total=$(awk -v a="$total" -v b="$ELAPSED" 'BEGIN{printf "%.3f", a+b}')
	begin_phase
	find "$WORK/tree" -type f -print0 | xargs -0 -r cat >/dev/null || FAILED=1
	end_phase tree_readall
	emit tree_readall "$ELAPSED" s; total=$(awk -v a="$total" -v b="$ELAPSED" 'BEGIN{printf "%.3f", a+b}')
	begin_phase
	rm -rf -- "$WORK/tree" || FAILED=1
	end_phase tree_rm
	emit tree_rm "$ELAPSED" s; total=$(awk -v a="$total" -v b="$ELAPSED" 'BEGIN{printf "%.3f", a+b}')
	emit tree_total "$total" s
fi

((FAILED)) && echo "# a workload FAILED (see stderr)"
say "done; unmounting"
finish
trap - EXIT
exit $FAILED
