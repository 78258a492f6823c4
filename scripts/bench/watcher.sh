#!/usr/bin/env bash
# scripts/bench/watcher.sh - the store watchers side by side: what hearing the daemon's own
# changes costs, and what a large store costs at start, in memory and in coherence.
#
# usage: scripts/bench/watcher.sh [--smoke] [-k "KINDS"] [-p meta|large|all] [-m root|own|both] [--rootfs] [BINARY...]
#
# For each BINARY (default .build-release/release/containerfs, else .build/release/containerfs;
# several: old and new builds side by side, rows b1:KIND, b2:KIND) and each watcher KIND (an
# `-o watcher=` value; default: those of `inotify fanotify` the binary accepts, probed with
# a mount that stops at option parsing; `default` = no -o watcher at all, which is also what
# runs when the binary accepts neither), one row per part. The "ran" column is the watcher
# that actually ran, read from the daemon's thread names (`cfs-watch` inotify,
# `cfs-fanotify` fanotify): fanotify falls back to inotify when it cannot watch the store,
# and the row then says "inotify!".
#
#   meta   Daemon wake-ups per own change: through a default mount (long timeouts), in a
#          container's Documents, one Python process per phase runs WATCHBENCH_OPS creates
#          (open O_CREAT|O_EXCL + close), small writes (open, 64 bytes, close), renames and
#          unlinks. Before and after each phase: the watcher thread's context switches
#          (voluntary + nonvoluntary, /proc/PID/task/TID/status) and the whole daemon's
#          (summed over its threads; a thread that exited in between takes its count with
#          it: the figure is marked "~"), each divided by the phase's changes, and the
#          phase's wall time. -m: where the store is: `root` a directory on the file system
#          of WATCHBENCH_CACHE (fanotify's mark there hears every other program too), `own`
#          the root of a fresh 1 GiB ext4 image of its own (rows KIND@ownfs), `both` (default).
#   large  A store of WATCHBENCH_FILES empty files in WATCHBENCH_DIRS directories, under a
#          container's Documents, on an ext4 file system of its own (a loop-mounted image,
#          the store its root), built once and cached in WATCHBENCH_CACHE. Per kind, page
#          cache dropped first: the mount's start-up (`containerfs mount` until it returns,
#          which it does once the mount serves), the daemon's VmRSS/VmHWM after the mount
#          and after a `find MNT | wc -l` walk (its time and count), and coherence with long
#          timeouts: stat WATCHBENCH_COHERENCE random files through the mount (twice: the
#          second answered from the kernel's cache), change each in the store directly (a
#          third get a byte appended, a third a new mtime, a third are renamed), stat them
#          through the mount at once and count how many show the new state (all of them,
#          or the row is marked **), then poll every millisecond for how long until all do
#          (5 s at most, else "never"). The renames are undone after, so the cached store
#          stays as built.
#   --rootfs  the large store also as a plain directory on the file system of
#          WATCHBENCH_CACHE (cached there too), rows labelled KIND@rootfs.
#
# --smoke  1,000 operations, 10,000 files in 1,000 directories, 20 coherence files (a cached
#          image of its own); no figure is asserted.
# Exit status: 0 when every row was measured and every change showed through the mount
# within 5 s (stale at once is reported, not a failure), 1 otherwise, 2 for a usage error.
#
# Environment:
#   WATCHBENCH_OPS        operations per meta phase (default 10000; smoke 1000)
#   WATCHBENCH_FILES, WATCHBENCH_DIRS  the large store (default 1000000, 100000; smoke 10000, 1000)
#   WATCHBENCH_COHERENCE  files in the coherence check (default 100; smoke 20); WATCHBENCH_SEED
#                         picks them (default 42)
#   WATCHBENCH_CACHE      images, stores and mount points (default /var/tmp/containerfs-watchbench;
#                         a disk file system, not the repository). Remove it (nothing mounted
#                         there) to rebuild the large stores.
#   WATCHBENCH_MOUNT_OPTS extra -o options for every mount
#   WATCHBENCH_WALK_TIMEOUT  seconds the find walk may take (default 900; then "find s" is
#                         ">900", the entries those it listed, and the run fails)
#   WATCHBENCH_THREADS    thread names that are a watcher (default "cfs-fanotify cfs-watch")
# Needs root (loop devices, mount, drop_caches, fanotify), python3, mkfs.ext4, losetup, fusermount3.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SMOKE=0 PARTS=all ROOTFS=0 KINDS="" META_FS=both
while [[ $# -gt 0 ]]; do
	case $1 in
		--smoke) SMOKE=1 ;;
		--rootfs) ROOTFS=1 ;;
		-k|--kinds) KINDS=$2; shift ;;
		-p|--part) PARTS=$2; shift ;;
		-m|--meta-fs) META_FS=$2; shift ;;
		-h|--help) sed -n '2,59p' "$0"; exit 0 ;;
		-*) echo "watcher.sh: unknown option $1" >&2; sed -n '5p' "$0" >&2; exit 2 ;;
		*) break ;;
	esac
	shift
done
case $PARTS in meta|large|all) ;; *) echo "watcher.sh: -p takes meta, large or all" >&2; exit 2 ;; esac
case $META_FS in root|own|both) ;; *) echo "watcher.sh: -m takes root, own or both" >&2; exit 2 ;; esac
BINS=("$@")
if ((${#BINS[@]} == 0)); then
	BINS=("$REPO/.build-release/release/containerfs")
	[[ -x ${BINS[0]} ]] || BINS=("$REPO/.build/release/containerfs")
fi
for i in "${!BINS[@]}"; do
	[[ -x ${BINS[$i]} ]] || { echo "watcher.sh: ${BINS[$i]}: not built (swift build -c release)" >&2; exit 2; }
	BINS[$i]=$(realpath "${BINS[$i]}")
done
if ((SMOKE)); then
	OPS=${WATCHBENCH_OPS:-1000} FILES=${WATCHBENCH_FILES:-10000} DIRS=${WATCHBENCH_DIRS:-1000}
	COHERENCE=${WATCHBENCH_COHERENCE:-20}
else
	OPS=${WATCHBENCH_OPS:-10000} FILES=${WATCHBENCH_FILES:-1000000} DIRS=${WATCHBENCH_DIRS:-100000}
	COHERENCE=${WATCHBENCH_COHERENCE:-100}
fi
for v in OPS FILES DIRS COHERENCE; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "watcher.sh: $v must be a positive integer" >&2; exit 2; }
done
((FILES >= DIRS && COHERENCE <= FILES)) || { echo "watcher.sh: need DIRS <= FILES and COHERENCE <= FILES" >&2; exit 2; }
CACHE=${WATCHBENCH_CACHE:-/var/tmp/containerfs-watchbench}
THREADS=${WATCHBENCH_THREADS:-cfs-fanotify cfs-watch}
WALK_TIMEOUT=${WATCHBENCH_WALK_TIMEOUT:-900}
EXTRA_OPTS=${WATCHBENCH_MOUNT_OPTS:-}
[[ $(id -u) -eq 0 ]] || { echo "watcher.sh: needs root (loop devices, drop_caches, fanotify)" >&2; exit 2; }
for tool in python3 mkfs.ext4 losetup fusermount3 findmnt; do
	command -v $tool >/dev/null || { echo "watcher.sh: $tool missing" >&2; exit 2; }
done
case $REPO/ in "$CACHE"/*) echo "watcher.sh: the cache must not be in the repository" >&2; exit 2 ;; esac
mkdir -p "$CACHE" || exit 1
CACHE=$(cd "$CACHE" && pwd -P)
# one run at a time per cache: the mount points and the meta store are shared
exec 9>"$CACHE/.lock"
flock -n 9 || { echo "watcher.sh: another run uses $CACHE (WATCHBENCH_CACHE picks another)" >&2; exit 2; }

say() { printf '[watcher %s] %s\n' "$(date +%T)" "$*" >&2; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
FAILED=0

# ---------------------------------------------------------------- clean-up
# Everything mounted or attached by this run, undone in reverse order at exit.
FUSE_MNT="" IMG_MNT="" LOOPDEV="" DPID="" SCRATCH=""
unmount_fuse() {
	[[ -n $FUSE_MNT ]] || return 0
	if findmnt -rn --mountpoint "$FUSE_MNT" >/dev/null 2>&1; then
		for _ in 1 2 3 4 5 6 7 8 9 10; do fusermount3 -u "$FUSE_MNT" 2>/dev/null && break; sleep 0.5; done
		findmnt -rn --mountpoint "$FUSE_MNT" >/dev/null 2>&1 && { say "unmount refused: lazy"; fusermount3 -uz "$FUSE_MNT"; }
	fi
	# the daemon outlives its mount for a moment: the store's lock and file system wait for it
	if [[ -n $DPID ]]; then
		for _ in $(seq 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$DPID" 2>/dev/null && { say "daemon $DPID outlived its mount: SIGTERM"; kill -TERM "$DPID"; sleep 1; }
	fi
	DPID=""
}
detach_image() {
	if [[ -n $IMG_MNT ]] && findmnt -rn --mountpoint "$IMG_MNT" >/dev/null 2>&1; then
		umount "$IMG_MNT" || { sleep 1; umount "$IMG_MNT"; } || say "WARNING: cannot unmount $IMG_MNT"
	fi
	IMG_MNT=""
	if [[ -n $LOOPDEV ]]; then losetup -d "$LOOPDEV" || say "WARNING: cannot detach $LOOPDEV"; fi
	LOOPDEV=""
}
cleanup() {
	cd / || true
	unmount_fuse
	detach_image
	[[ -n $SCRATCH ]] && rm -rf -- "$SCRATCH"
}
trap cleanup EXIT
trap 'echo "watcher.sh: interrupted" >&2; exit 130' INT TERM HUP
SCRATCH=$(mktemp -d /tmp/watcher-bench.XXXXXX) || exit 1

# ---------------------------------------------------------------- daemon probes
# The -o watcher= values BIN accepts: options are parsed before anything else, and a refused
# one is a usage error (exit status 2); an accepted one goes on to fail on paths below
# /dev/null, where nothing can be made.
accepted_kinds() { # BIN
	local k out=()
	for k in inotify fanotify; do
		"$1" mount -o "watcher=$k" /dev/null/no-store /dev/null/no-mountpoint >/dev/null 2>&1
		(($? != 2)) && out+=("$k")
	done
	((${#out[@]})) || out=(default)
	echo "${out[@]}"
}
# The daemon of the mount of STORE: its pid is in the store's lock file.
daemon_pid() { # STORE
	local p
	p=$(sed -n 's/^pid \([0-9]*\).*/\1/p' "$1/.lock" 2>/dev/null)
	[[ -n $p && -d /proc/$p ]] && echo "$p"
}
# "TID COMM" for the watcher's thread of PID (the first of WATCHBENCH_THREADS found).
watcher_task() { # PID
	local t c name
	for name in $THREADS; do
		for t in /proc/"$1"/task/*; do
			c=$(cat "$t/comm" 2>/dev/null) || continue
			[[ $c == "$name" ]] && { echo "${t##*/} $c"; return 0; }
		done
	done
	return 1
}
kind_of_thread() { case $1 in cfs-fanotify*) echo fanotify ;; cfs-watch*) echo inotify ;; *) echo "$1" ;; esac; }
# Context switches of one task (voluntary + nonvoluntary).
task_cs() { # PID TID
	awk '/^(non)?voluntary_ctxt_switches:/ { n += $2 } END { print n + 0 }' "/proc/$1/task/$2/status" 2>/dev/null
}
# "TID CS" for every thread of PID.
all_cs() { # PID
	local t
	for t in /proc/"$1"/task/*; do
		awk -v t="${t##*/}" '/^(non)?voluntary_ctxt_switches:/ { n += $2 } END { print t, n + 0 }' "$t/status" 2>/dev/null
	done
}
mem_of() { # PID -> "VmRSS VmHWM" in MiB
	awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { printf "%.1f %.1f", r / 1024, h / 1024 }' "/proc/$1/status"
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }

# mount_store BIN KIND STORE MNT: mounts (in the background; `mount` returns once the mount
# serves), sets DPID, MOUNT_S (seconds), RAN (the watcher that runs: KIND, or KIND! when
# another one does) and WTID (its thread).
mount_store() {
	local bin=$1 kind=$2 store=$3 mnt=$4 opts=() t0 task
	[[ $kind != default ]] && opts+=(-o "watcher=$kind")
	[[ -n $EXTRA_OPTS ]] && opts+=(-o "$EXTRA_OPTS")
	mkdir -p "$mnt"
	FUSE_MNT=$mnt
	t0=$EPOCHREALTIME
	if ! "$bin" mount "$store" "$mnt" "${opts[@]}" >"$SCRATCH/mount.err" 2>&1; then
		say "mount of $store with ${opts[*]} failed: $(cat "$SCRATCH/mount.err")"
		return 1
	fi
	MOUNT_S=$(secs "$t0" "$EPOCHREALTIME")
	DPID=$(daemon_pid "$store") || { say "no daemon pid in $store/.lock"; return 1; }
	task=$(watcher_task "$DPID") || { say "no watcher thread ($THREADS) in daemon $DPID"; RAN="none" WTID=""; return 0; }
	WTID=${task%% *}
	RAN=$(kind_of_thread "${task#* }")
	[[ $kind != default && $RAN != "$kind" ]] && RAN="$RAN!"
	return 0
}
# What the daemon logged of its watcher and descriptors (fanotify counts its events by origin
# at its end; inotify says when it gives up long timeouts or rescans), each message once with
# how many times.
watcher_log() { # STORE OFFSET
	tail -c +"$(($2 + 1))" "$1/daemon.log" 2>/dev/null |
		grep -o 'fanotify watcher: .*\|store watcher: .*\|containerfs.watch: .*\|descriptors ran short.*' |
		sed 's/^containerfs.watch: \[[A-Za-z]*\] //; s/(logged once a minute at most)//' |
		awk '{ if (!($0 in n)) order[++k] = $0; n[$0]++ } END { for (i = 1; i <= k; i++) printf "#   %s%s\n", (n[order[i]] > 1) ? n[order[i]] "x " : "", order[i] }'
}
log_size() { stat -c %s "$1/daemon.log" 2>/dev/null || echo 0; }

label_of() { # BIN_INDEX KIND
	if ((${#BINS[@]} > 1)); then echo "b$(($1 + 1)):$2"; else echo "$2"; fi
}

echo "# watcher.sh $( ((SMOKE)) && echo --smoke) date=$(date -Is) host=$(hostname) nproc=$(nproc) kernel=$(uname -r)"
echo "# cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo) mem=$(awk '/^MemTotal/ { printf "%.0fGiB", $2 / 1048576 }' /proc/meminfo) load=$(cut -d' ' -f1-3 /proc/loadavg)"
# each item the kernel holds costs the daemon a descriptor (DESIGN.md 28): it raises its limit
# to fs.nr_open if it may (CAP_SYS_RESOURCE), else to the hard limit it inherits from here
echo "# descriptors: hard limit here $(ulimit -Hn), fs.nr_open $(cat /proc/sys/fs/nr_open)"
for i in "${!BINS[@]}"; do
	KINDS_OF[$i]=${KINDS:-$(accepted_kinds "${BINS[$i]}")}
	echo "# $(label_of "$i" binary) = ${BINS[$i]} ($("${BINS[$i]}" --version 2>/dev/null | head -1)); kinds: ${KINDS_OF[$i]}"
done

# ---------------------------------------------------------------- part 1: own changes
WORKLOAD_PY='
import os, sys, time
d, n, phase = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = b"x" * 64
t = time.perf_counter()
if phase == "create":
    os.mkdir(d)
    t = time.perf_counter()
    for i in range(n):
        os.close(os.open(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
elif phase == "write":
    for i in range(n):
        fd = os.open(f"{d}/f{i}", os.O_WRONLY)
        os.write(fd, data)
        os.close(fd)
elif phase == "rename":
    for i in range(n):
        os.rename(f"{d}/f{i}", f"{d}/g{i}")
elif phase == "unlink":
    for i in range(n):
        os.unlink(f"{d}/g{i}")
print(f"{time.perf_counter() - t:.3f}")
'
# meta_row BIN_INDEX KIND WHERE: WHERE root (a directory on the file system of CACHE) or own
# (a fresh ext4 image of its own, the store its root)
meta_row() {
	local i=$1 kind=$2 where=$3 label store mnt=$CACHE/meta.mnt dir phase wall cs0 cs1 all0 all1 t_w t_d lost off
	local tot_w=0 tot_d=0 tot_wall=0 tot_lost=""
	label=$(label_of "$i" "$kind")
	[[ $where == own ]] && label+="@ownfs"
	rm -rf "$CACHE/meta"
	mkdir -p "$CACHE/meta"
	if [[ $where == own ]]; then
		truncate -s 1G "$CACHE/meta.img" && mkfs.ext4 -q -F -N 200000 -E lazy_itable_init=0,lazy_journal_init=0 "$CACHE/meta.img" &&
			attach_image "$CACHE/meta.img" || { say "$label: cannot make the image"; detach_image; FAILED=1; return; }
		store=$IMG_MNT
	else
		store=$CACHE/meta/store
	fi
	if ! "${BINS[$i]}" container create com.example.watchbench --store "$store" >/dev/null; then
		say "$label: container create failed"
		FAILED=1
		detach_image
		return
	fi
	off=$(log_size "$store")
	if ! mount_store "${BINS[$i]}" "$kind" "$store" "$mnt"; then
		FAILED=1
		unmount_fuse
		detach_image
		echo "| $label | - | failed | | | | |"
		return
	fi
	dir=$mnt/containers/com.example.watchbench/Documents/w
	for phase in create write rename unlink; do
		sync
		sleep 0.5
		cs0=0 cs1=0
		[[ -n $WTID ]] && cs0=$(task_cs "$DPID" "$WTID")
		all0=$(all_cs "$DPID")
		wall=$(python3 -c "$WORKLOAD_PY" "$dir" "$OPS" "$phase") || { say "$label: $phase failed"; FAILED=1; wall=NA; }
		[[ -n $WTID ]] && cs1=$(task_cs "$DPID" "$WTID")
		all1=$(all_cs "$DPID")
		# per thread: after - before; a thread gone since takes its count with it
		read -r t_d lost < <(awk 'NR == FNR { b[$1] = $2; next } { a[$1] = $2 }
			END { for (t in a) d += a[t] - b[t]; for (t in b) if (!(t in a)) l = 1; print d + 0, l + 0 }' \
			<(echo "$all0") <(echo "$all1"))
		t_w=$((cs1 - cs0))
		((lost)) && tot_lost="~"
		[[ $wall == NA ]] || tot_wall=$(awk -v a="$tot_wall" -v b="$wall" 'BEGIN { print a + b }')
		tot_w=$((tot_w + t_w)) tot_d=$((tot_d + t_d))
		awk -v l="$label" -v r="$RAN" -v p="$phase" -v w="$wall" -v n="$OPS" -v a="$t_w" -v d="$t_d" -v m="$( ((lost)) && echo "~")" \
			-v has="$WTID" 'BEGIN { printf "| %s | %s | %s | %s | %s | %s | %.2f%s |\n", l, r, p, w,
				(w == "NA" || w == 0) ? "NA" : sprintf("%.0f", n / w), has == "" ? "NA" : sprintf("%.2f", a / n), d / n, m }'
	done
	awk -v l="$label" -v r="$RAN" -v w="$tot_wall" -v n="$((4 * OPS))" -v a="$tot_w" -v d="$tot_d" -v m="$tot_lost" -v has="$WTID" \
		'BEGIN { printf "| %s | %s | **all** | %.3f | %s | %s | %.2f%s |\n", l, r, w, (w > 0) ? sprintf("%.0f", n / w) : "NA",
			has == "" ? "NA" : sprintf("%.2f", a / n), d / n, m }'
	unmount_fuse
	watcher_log "$store" "$off" >"$SCRATCH/meta.log"
	[[ -s $SCRATCH/meta.log ]] && NOTES+=("$label (meta):" "$(cat "$SCRATCH/meta.log")")
	detach_image
	rm -rf "$CACHE/meta" "$CACHE/meta.img"
	rmdir "$CACHE/meta.store" 2>/dev/null
}
meta_part() {
	local i kind where
	say "meta: $OPS creates, writes, renames and unlinks through the mount, per watcher ($META_FS)"
	printf '\n## Daemon wake-ups per own change (%s operations per phase, 4 phases)\n\n' "$OPS"
	[[ $META_FS == own ]] || echo "# KIND: the store a directory on $(findmnt -rn -o FSTYPE,SOURCE,TARGET -T "$CACHE" | tr ' ' ':') (shared with every other program)"
	[[ $META_FS == root ]] || echo "# KIND@ownfs: the store the root of a fresh 1 GiB ext4 image of its own"
	echo "| watcher | ran | phase | wall s | ops/s | watcher cs/change | daemon cs/change |"
	echo "|---|---|---|---|---|---|---|"
	for where in root own; do
		[[ $META_FS == both || $META_FS == "$where" ]] || continue
		for i in "${!BINS[@]}"; do
			for kind in ${KINDS_OF[$i]}; do meta_row "$i" "$kind" "$where"; done
		done
	done
}

# ---------------------------------------------------------------- part 2: a large store
FILL_PY='
import os, sys
top, files, dirs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per = -(-files // dirs)
for d in range(dirs):
    p = f"{top}/d{d:06}"
    os.mkdir(p)
    for i in range(d * per, min(files, (d + 1) * per)):
        os.close(os.open(f"{p}/f{i:07}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
'
CONTAINER=com.example.large
# build_image: the store on an ext4 image of its own, its root the store; cached.
build_image() { # IMG
	local img=$1 inodes=$((FILES + DIRS + 10000)) size_mb t0
	# 4 KiB per directory, 256 bytes per inode, the journal and slack
	size_mb=$(((DIRS * 4 + inodes / 4) / 1024 + 512))
	say "building the large store: $FILES files in $DIRS directories on a ${size_mb} MiB ext4 image ($img; once, cached)"
	rm -f "$img" "$img.ready"
	truncate -s "${size_mb}M" "$img" || return 1
	# itable zeroed now, not by ext4lazyinit while the benchmark runs
	mkfs.ext4 -q -F -N "$inodes" -E lazy_itable_init=0,lazy_journal_init=0 -L cfs-watchbench "$img" || return 1
	attach_image "$img" || return 1
	t0=$EPOCHREALTIME
	"${BINS[0]}" container create "$CONTAINER" --store "$IMG_MNT" >/dev/null || return 1
	python3 -c "$FILL_PY" "$IMG_MNT/containers/$CONTAINER/Documents" "$FILES" "$DIRS" || return 1
	sync -f "$IMG_MNT"
	say "filled in $(secs "$t0" "$EPOCHREALTIME") s"
	detach_image
	touch "$img.ready"
}
attach_image() { # IMG
	IMG_MNT=${1%.img}.store
	mkdir -p "$IMG_MNT"
	findmnt -rn --mountpoint "$IMG_MNT" >/dev/null && { say "$IMG_MNT is already mounted (another run?)"; IMG_MNT=""; return 1; }
	LOOPDEV=$(losetup -f --show "$1") || { LOOPDEV=""; return 1; }
	mount -t ext4 "$LOOPDEV" "$IMG_MNT" || { IMG_MNT=""; return 1; }
}
build_rootfs_store() { # DIR
	local d=$1 t0
	say "building the large store as a directory on the root file system: $d (once, cached)"
	rm -rf "$d" "$d.ready"
	t0=$EPOCHREALTIME
	"${BINS[0]}" container create "$CONTAINER" --store "$d" >/dev/null || return 1
	python3 -c "$FILL_PY" "$d/containers/$CONTAINER/Documents" "$FILES" "$DIRS" || return 1
	sync
	say "filled in $(secs "$t0" "$EPOCHREALTIME") s"
	touch "$d.ready"
}
COHERENCE_PY='
import os, random, sys, time
mnt, store, files, dirs, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
per = -(-files // dirs)
rel = lambda i: f"containers/com.example.large/Documents/d{i // per:06}/f{i:07}"
picked = random.Random(int(os.environ.get("WATCHBENCH_SEED", "42"))).sample(range(files), n)
before = {i: os.stat(f"{mnt}/{rel(i)}") for i in picked}
for i in picked:  # again: every answer now comes from the kernel cache
    os.stat(f"{mnt}/{rel(i)}")
expect = {}
stamp = time.time_ns() // 1_000_000_000 * 1_000_000_000 + 7_000_000
for k, i in enumerate(picked):
    p = f"{store}/{rel(i)}"
    if k % 3 == 0:
        with open(p, "ab") as f:
            f.write(b"+")
        expect[i] = ("size", before[i].st_size + 1)
    elif k % 3 == 1:
        os.utime(p, ns=(stamp, stamp))
        expect[i] = ("mtime", stamp)
    else:
        os.rename(p, p + ".moved")
        expect[i] = ("moved", None)
def fresh(i):
    what, value = expect[i]
    p = f"{mnt}/{rel(i)}"
    if what == "moved":
        return not os.path.lexists(p) and os.path.exists(p + ".moved")
    st = os.stat(p)
    return st.st_size == value if what == "size" else st.st_mtime_ns == value
now = sum(fresh(i) for i in picked)
# then how long until every one shows it (5 s at most), polled every millisecond
t0 = time.perf_counter()
stale = [i for i in picked if not fresh(i)]
while stale and time.perf_counter() - t0 < 5:
    time.sleep(0.001)
    stale = [i for i in stale if not fresh(i)]
waited = time.perf_counter() - t0
later = "at once" if now == n else f"{waited * 1000:.0f}ms" if not stale else f"never({n - len(stale)}/{n}@5s)"
for k, i in enumerate(picked):
    if k % 3 == 2:
        p = f"{store}/{rel(i)}"
        os.rename(p + ".moved", p)
print(now, later.replace(" ", "_"))
'
# large_row BIN_INDEX KIND STORE WHERE
# large_rows STORE WHERE TEXT: one large_row per binary and watcher kind.
large_rows() {
	local i kind
	for i in "${!BINS[@]}"; do
		for kind in ${KINDS_OF[$i]}; do
			say "large: $(label_of "$i" "$kind") $3"
			large_row "$i" "$kind" "$1" "$2"
		done
	done
}

large_row() {
	local i=$1 kind=$2 store=$3 where=$4 label mnt=$CACHE/large.mnt m0 m1 t0 walk walked count errs coh now later mark off
	label=$(label_of "$i" "$kind")
	[[ $where == rootfs ]] && label+="@rootfs"
	drop_caches
	off=$(log_size "$store")
	if ! mount_store "${BINS[$i]}" "$kind" "$store" "$mnt"; then
		FAILED=1
		unmount_fuse
		echo "| $label | - | failed | | | | | | | |"
		return
	fi
	m0=$(mem_of "$DPID")
	t0=$EPOCHREALTIME
	mapfile -t walked < <(timeout "$WALK_TIMEOUT" find "$mnt" 2>"$SCRATCH/find.err" | wc -l; echo "${PIPESTATUS[0]}")
	count=${walked[0]}
	if [[ ${walked[1]} == 124 ]]; then walk=">$WALK_TIMEOUT"; FAILED=1; else walk=$(secs "$t0" "$EPOCHREALTIME"); fi
	errs=$(wc -l <"$SCRATCH/find.err")
	((errs)) && NOTES+=("$label (large): find met $errs errors, the first: $(head -1 "$SCRATCH/find.err"); the daemon's descriptor limit: $(awk '/^Max open files/ { print $4 }' "/proc/$DPID/limits")")
	m1=$(mem_of "$DPID")
	coh=$(python3 -c "$COHERENCE_PY" "$mnt" "$store" "$FILES" "$DIRS" "$COHERENCE") || { coh="NA never"; FAILED=1; }
	# stale at once: reported (the row says so), not a failure of the run; never fresh is
	now=${coh%% *} later=${coh#* } mark=""
	[[ $now == "$COHERENCE" ]] || { SHORT+=("$label"); mark="**"; }
	[[ $later == never* ]] && FAILED=1
	# shellcheck disable=SC2086 # m0, m1: "RSS HWM"
	printf '| %s | %s | %s | %s / %s | %s | %s | %s | %s / %s | %s%s/%s%s | %s |\n' "$label" "$RAN" "$MOUNT_S" \
		$m0 "$walk" "$count" "$errs" $m1 "$mark" "$now" "$COHERENCE" "$mark" "${later//_/ }"
	unmount_fuse
	watcher_log "$store" "$off" >"$SCRATCH/large.log"
	[[ -s $SCRATCH/large.log ]] && NOTES+=("$label (large):" "$(cat "$SCRATCH/large.log")")
}
large_part() {
	local img=$CACHE/large-$FILES-$DIRS.img i kind
	if [[ ! -e $img.ready ]]; then
		build_image "$img" || { say "cannot build $img"; detach_image; FAILED=1; return; }
	fi
	attach_image "$img" || { say "cannot attach $img"; detach_image; FAILED=1; return; }
	printf '\n## A large store: %s files in %s directories (cold page cache at each mount)\n\n' "$FILES" "$DIRS"
	echo "# own file system: $LOOPDEV ext4 at $IMG_MNT (the store its root), image $img"
	echo "| watcher | ran | mount s | RSS / HWM MiB after mount | find s | entries | find errors | RSS / HWM MiB after find | fresh at once | all fresh after |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	large_rows "$IMG_MNT" own "on its own file system"
	detach_image
	if ((ROOTFS)); then
		local d=$CACHE/rootfs-$FILES-$DIRS
		if [[ ! -e $d.ready ]]; then build_rootfs_store "$d" || { say "cannot build $d"; FAILED=1; return; }; fi
		echo "# root file system: $d ($(findmnt -rn -o FSTYPE,SOURCE -T "$d" | tr ' ' ':'))"
		large_rows "$d" rootfs "on the root file system"
	fi
}

NOTES=() SHORT=()
[[ $PARTS == meta || $PARTS == all ]] && meta_part
[[ $PARTS == large || $PARTS == all ]] && large_part
if ((${#NOTES[@]})); then
	echo
	echo "# the daemons' own account of their watchers (daemon.log):"
	printf '# %s\n' "${NOTES[@]}" | sed 's/^# #/#/'
fi
((${#SHORT[@]})) && say "stale right after the change (fewer than $COHERENCE fresh, marked **): ${SHORT[*]}"
((FAILED)) && say "some rows were not measured, or some changes never showed through the mount"
exit $FAILED
