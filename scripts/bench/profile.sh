#!/usr/bin/env bash
# profile.sh - where a FUSE daemon spends its time, per workload (evidence for docs/PERFORMANCE.md).
#
# usage: profile.sh [-w WORKLOADS] [-o OUTDIR] [-g fp|dwarf] BACKING_DIR LABEL=SPEC [LABEL=SPEC ...]
#   SPEC: native is not accepted; a foreground mount command with {src} {mnt} {anchors}, as
#   for fsbench.sh.  FSBENCH_SUBDIR_<LABEL> and FSBENCH_POSTMOUNT are honoured like there.
#   WORKLOADS (comma list, default meta,randwrite,randread,untar,sqlite; also seqwrite,seqread):
#     meta       metabench 10k files (create, stat warm/cold, readdir x3, ls -l, rename, unlink)
#     randwrite  fio 4 KiB random writes, 20000 I/Os, psync, into a 256 MiB file
#     randread   fio 4 KiB random reads, 20000 I/Os, psync, of a 256 MiB file after
#                drop_caches (cold: every read is a FUSE READ unless cached)
#     untar      tar -xf of the fsbench tarball, then rm -rf
#     sqlite     sqlbench.py at scale 0.3
#     seqwrite   fio 1 GiB sequential write, bs=1M, end_fsync=1
#     seqread    fio 1 GiB sequential read, bs=1M, after drop_caches
# For every FS and workload, three passes over a fresh work directory:
#   1. requests: perf record of the fuse:fuse_request_send/_end tracepoints (this mount's
#      connection only) -> requests per opcode, and mean round trip (send -> reply) per opcode
#   2. syscalls: strace -c -f of the daemon -> system calls per kind (slows the run; counts only)
#   3. cpu: perf record -g of the daemon -> top symbols (self) and daemon CPU seconds
# Output: OUTDIR/LABEL.WORKLOAD.{requests,syscalls,cpu}.txt and a combined OUTDIR/profile.md.
# Needs root (tracepoints), perf (apt linux-perf), strace, fio, python3.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ANCHORS=${FSBENCH_ANCHORS:-/tmp/anchors}
WORKLOADS=meta,randwrite,randread,untar,sqlite
OUT=/tmp/profile.$$
CG=fp
while getopts "w:o:g:" opt; do
	case $opt in
		w) WORKLOADS=$OPTARG ;;
		o) OUT=$OPTARG ;;
		g) CG=$OPTARG ;;
		*) sed -n '2,24p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ $# -ge 2 ]] || { sed -n '2,24p' "$0" >&2; exit 2; }
BACKING=$(cd "$1" && pwd -P) || exit 2
shift
for t in perf strace fio python3; do command -v $t >/dev/null || { echo "profile.sh: missing $t" >&2; exit 1; }; done
[[ -d /sys/kernel/tracing/events/fuse ]] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
[[ -d /sys/kernel/tracing/events/fuse ]] || { echo "profile.sh: no fuse tracepoints (need root and tracefs)" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TARBALL=${FSBENCH_TARBALL:-$ANCHORS/usr-include.tar}
[[ -s $TARBALL ]] || { echo "profile.sh: $TARBALL missing (run fsbench.sh once)" >&2; exit 1; }
[[ -x $ANCHORS/metabench ]] || { echo "profile.sh: $ANCHORS/metabench missing (fsbench.sh --build-anchors)" >&2; exit 1; }
case $CG in fp) CGOPT=(-g) ;; dwarf) CGOPT=(--call-graph dwarf,32768) ;; *) echo "-g fp|dwarf" >&2; exit 2 ;; esac

# Swift symbols readable when the toolchain is there
demangle() { if command -v swift-demangle >/dev/null; then swift-demangle --simplified --compact; elif command -v swift >/dev/null; then swift demangle --simplified --compact; else cat; fi; }

MNT="" DPID=""
is_mounted() { [[ -n $MNT ]] && findmnt -rn --mountpoint "$MNT" >/dev/null 2>&1; }
unmount() {
	[[ -z $MNT ]] && return
	cd /
	for _ in 1 2 3 4 5 6 7 8 9 10; do is_mounted || break; fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.5; done
	is_mounted && fusermount3 -uz "$MNT"
	if [[ -n $DPID ]]; then
		for _ in $(seq 1 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$DPID" 2>/dev/null && kill -TERM "$DPID"
		wait "$DPID" 2>/dev/null
	fi
	rmdir "$MNT" 2>/dev/null
	MNT="" DPID=""
}
trap unmount EXIT
trap 'exit 130' INT TERM

# workload command for $1 in directory $2 (created by the command, removed by cleanup)
workload() {
	local w=$1 d=$2
	case $w in
		meta) echo "'$ANCHORS/metabench' '$d/meta' 10000 3 'sync; echo 2 > /proc/sys/vm/drop_caches' >/dev/null" ;;
		randwrite) echo "fio --name=rw --filename='$d/f' --rw=randwrite --bs=4k --size=256M --number_ios=20000 --ioengine=psync --invalidate=0 --fallocate=none --output=/dev/null" ;;
		randread) echo "fio --name=rr --filename='$d/f' --rw=randread --bs=4k --size=256M --number_ios=20000 --ioengine=psync --invalidate=0 --output=/dev/null" ;;
		untar) echo "tar -xf '$TARBALL' -C '$d' && rm -rf '$d'/*" ;;
		sqlite) echo "python3 '$HERE/sqlbench.py' '$d/sq' 0.3 >/dev/null" ;;
		seqwrite) echo "fio --name=sw --filename='$d/f' --rw=write --bs=1M --size=1G --end_fsync=1 --ioengine=psync --fallocate=none --output=/dev/null" ;;
		seqread) echo "fio --name=sr --filename='$d/f' --rw=read --bs=1M --size=1G --ioengine=psync --output=/dev/null" ;;
	esac
}
# preparation outside the measured command
prepare() {
	local w=$1 d=$2
	rm -rf "$d"; mkdir -p "$d"
	case $w in
		randwrite|randread)
			fio --name=prep --filename="$d/f" --rw=write --bs=1M --size=256M --end_fsync=1 --ioengine=psync --fallocate=none --output=/dev/null >/dev/null 2>&1
			[[ $w == randread ]] && { sync; echo 3 >/proc/sys/vm/drop_caches; } ;;
		seqread)
			fio --name=prep --filename="$d/f" --rw=write --bs=1M --size=1G --end_fsync=1 --ioengine=psync --fallocate=none --output=/dev/null >/dev/null 2>&1
			sync; echo 3 >/proc/sys/vm/drop_caches ;;
	esac
	sync
}

for spec in "$@"; do
	label=${spec%%=*} cmd=${spec#*=}
	[[ $cmd == native ]] && { echo "profile.sh: $label: native has no daemon to profile" >&2; continue; }
	subvar=FSBENCH_SUBDIR_${label//[^A-Za-z0-9_]/_}
	sub=${!subvar:-.}
	for w in ${WORKLOADS//,/ }; do
		MNT=$(mktemp -d /tmp/profile-mnt.XXXXXX)
		c=${cmd//\{src\}/$BACKING}; c=${c//\{mnt\}/$MNT}; c=${c//\{anchors\}/$ANCHORS}
		bash -c "exec $c" >"$OUT/$label.daemon.log" 2>&1 </dev/null &
		DPID=$!
		for _ in $(seq 1 300); do is_mounted && break; sleep 0.05; done
		is_mounted || { echo "profile.sh: $label did not mount" >&2; cat "$OUT/$label.daemon.log" >&2; exit 1; }
		if [[ -n ${FSBENCH_POSTMOUNT:-} ]]; then
			pm=${FSBENCH_POSTMOUNT//\{mnt\}/$MNT}; pm=${pm//\{src\}/$BACKING}
			bash -c "$pm"
		fi
		conn=$(mountpoint -d "$MNT" | cut -d: -f2)
		d=$MNT/$sub/profile.$$
		d=${d//\/.\//\/}
		wcmd=$(workload "$w" "$d")
		echo "[profile $(date +%T)] $label $w" >&2

		# 1. requests
		prepare "$w" "$d"
		perf record -q -e fuse:fuse_request_send -e fuse:fuse_request_end -a -o "$OUT/$label.$w.req.data" -- bash -c "$wcmd" 2>/dev/null
		perf script -i "$OUT/$label.$w.req.data" -F time,event,trace 2>/dev/null |
			python3 "$HERE/profile_requests.py" "$conn" >"$OUT/$label.$w.requests.txt"
		rm -f "$OUT/$label.$w.req.data"

		# 2. syscalls of the daemon
		prepare "$w" "$d"
		strace -c -f -q -p "$DPID" -o "$OUT/$label.$w.syscalls.txt" &
		spid=$!
		sleep 0.5
		bash -c "$wcmd"
		sleep 0.3
		kill -INT "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null

		# 3. cpu profile of the daemon
		prepare "$w" "$d"
		t0=$(awk '{print $14+$15}' "/proc/$DPID/stat")
		s0=$EPOCHREALTIME
		perf record -q -F 999 "${CGOPT[@]}" -p "$DPID" -o "$OUT/$label.$w.cpu.data" -- bash -c "$wcmd" 2>/dev/null
		s1=$EPOCHREALTIME
		t1=$(awk '{print $14+$15}' "/proc/$DPID/stat")
		{
			echo "# $label $w: wall $(awk -v a="$s0" -v b="$s1" 'BEGIN{printf "%.2f", b-a}') s, daemon CPU $(awk -v a="$t0" -v b="$t1" -v h="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", (b-a)/h}') s (under perf)"
			echo "# by object:"
			perf report -i "$OUT/$label.$w.cpu.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -8
			echo "# top symbols (self):"
			perf report -i "$OUT/$label.$w.cpu.data" --no-children --sort dso,sym --percent-limit 0.5 --stdio -g none 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -45 | demangle
		} >"$OUT/$label.$w.cpu.txt"
		rm -rf "$d"
		unmount
	done
done
python3 - "$OUT" <<'EOF' >"$OUT/profile.md"
import glob, os, sys
out = sys.argv[1]
for f in sorted(glob.glob(os.path.join(out, "*.requests.txt"))):
    base = os.path.basename(f)[:-len(".requests.txt")]
    print(f"## {base}\n")
    for kind in ("requests", "syscalls", "cpu"):
        p = os.path.join(out, f"{base}.{kind}.txt")
        if os.path.exists(p):
            print(f"### {kind}\n\n```")
            print(open(p).read().rstrip())
            print("```\n")
EOF
echo "profile: $OUT/profile.md" >&2
