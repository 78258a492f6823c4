#!/usr/bin/env bash
# scripts/bench.sh - ContainerFS side by side with native ext4 and libfuse's passthrough_ll.
#
# usage: scripts/bench.sh [--smoke] [-r ROUNDS] [-d RESULTS_DIR] [-b BACKING_DIR] [--rev REV | --no-build] [--keep]
#                         [--stores] [--watcher]
#
# Builds ContainerFS in release mode (.build-release) and passthrough_ll from the example
# source Debian's libfuse3-dev ships, then runs the same workloads, interleaved over ROUNDS
# rounds (the order rotates every round), on
#     native             the backing ext4 directory itself
#     passthrough_ll     libfuse's passthrough_ll, default options
#     passthrough_ll_wb  passthrough_ll -o writeback,cache=always
#     passthrough_ll_xattr  passthrough_ll -o xattr: the default anchor with extended
#                        attributes, which ContainerFS must serve (docs/SEMANTICS.md §1) and the plain
#                        anchor turns off (its first GETXATTR answers ENOSYS, and the kernel
#                        then never asks for security.capability before a write or chown:
#                        docs/PERFORMANCE.md, "The price of extended attributes"); no target
#                        is set against it
#     containerfs        containerfs mount -f STORE MNT (workload dir: a container's Documents)
# and prints medians, ContainerFS's ratio to each anchor, CPU seconds per phase, the spread,
# and the daemons' peak RSS (report.py). Results stay in RESULTS_DIR (summary.md there).
#
# The harness is the project's own, in scripts/bench/: fsbench.sh (one mount, fio sequential
# and random I/O, metabench.c's metadata phases, untar/read/rm of a source tree), run here
# over ROUNDS rounds in a rotating order; sqlbench.sh + sqlbench.py (the SQLite workload,
# same rotation, after the fsbench rounds); rss-exec.sh (the daemon memory sampler) and
# report.py (the ContainerFS-centred report).
#
# --smoke   tiny sizes, 1 round, no timing assertions: exits 0 if every workload ran on
#           every file system, non-zero otherwise (CI; a few minutes at most).
# --rev REV   benchmark a committed revision instead of the working tree: `git archive REV`
#             into .build-release/rev-SHA/ and a release build there (before/after comparisons
#             while the checkout is being edited).
# --no-build  use the existing .build-release/release/containerfs (or $BENCH_CONTAINERFS).
# --keep    keep the backing directory (default: removed at the end).
# --stores  then the store operations with the same binary, each against its baseline:
#           scripts/bench/trash.sh (trash vs mv, trash-list, rm -rf), publish.sh (snapshot
#           publish of 10,000 and 100,000 files vs cp -a, the first write to a shared 1 GiB
#           file) and snapshot.sh (export/import vs GNU tar); into RESULTS_DIR/stores.txt.
# --watcher then the store watchers side by side with the same binary: scripts/bench/watcher.sh
#           (wake-ups per own change, a large store's start-up, memory and coherence; with
#           --smoke at its smoke sizes); into RESULTS_DIR/watcher.txt. Its failure (a row
#           not measured, a change never seen through the mount) fails the run.
#
# Environment:
#   BENCH_ROUNDS (default 3; smoke 1)
#   BENCH_BACKING (default /var/tmp/containerfs-bench: must be on a disk file system, not tmpfs)
#   BENCH_RESULTS (default $REPO/.build-release/bench-results/DATE)
#   BENCH_ANCHORS (default $REPO/.build-release/fsbench-anchors: passthrough_ll, metabench, tarball)
#   BENCH_CFS_OPTS     extra -o options for the containerfs label, e.g. attr_timeout=60,threads=4
#   BENCH_CFS_VARIANTS more ContainerFS labels, "NAME:OPTS NAME2:OPTS2" -> containerfs_NAME
#                      (default "pt:passthrough ur:uring": the FUSE passthrough mount, DESIGN.md
#                      29, and FUSE over io_uring, DESIGN.md 31 — the latter only where the
#                      kernel has it and we are root: bench.sh turns the kernel's
#                      fuse.enable_uring on for the run and back after; set it empty to run
#                      the default mount alone)
#   BENCH_FS           labels to run (default: native passthrough_ll passthrough_ll_wb
#                      passthrough_ll_xattr containerfs
#                      + variants); the report needs the three anchors for its ratios
#   FSBENCH_* (sizes, see fsbench.sh --help) and SQLBENCH_SCALE pass through.
# Needs: swift, gcc, pkg-config + libfuse3-dev, fuse3 (fusermount3), fio, jq, python3 (with
# its sqlite3 module), tar; root for drop_caches (without it the cold phases run warm).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE=$REPO/scripts/bench
SMOKE=0 BUILD=1 KEEP=0 REV=""
ROUNDS=${BENCH_ROUNDS:-}
RESULTS=${BENCH_RESULTS:-}
BACKING=${BENCH_BACKING:-/var/tmp/containerfs-bench}

while [[ $# -gt 0 ]]; do
	case $1 in
		--smoke) SMOKE=1 ;;
		--no-build) BUILD=0 ;;
		--keep) KEEP=1 ;;
		--stores) STORES=1 ;;
		--watcher) WATCHER=1 ;;
		--rev) REV=$2; shift ;;
		-r) ROUNDS=$2; shift ;;
		-d) RESULTS=$2; shift ;;
		-b) BACKING=$2; shift ;;
		-h|--help) sed -n '2,62p' "$0"; exit 0 ;;
		*) echo "bench.sh: unknown argument $1" >&2; sed -n '4,5p' "$0" >&2; exit 2 ;;
	esac
	shift
done

say() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { echo "bench.sh: $*" >&2; exit 1; }
T_START=$EPOCHREALTIME

# ---------------------------------------------------------------- prerequisites
# the harness's tools (scripts/install-deps.sh has most, not jq): installed when missing and
# this runs as root with apt-get (BENCH_NO_INSTALL=1: never)
need_pkgs() {
	local t p pkgs=()
	for t in gcc:gcc pkg-config:pkg-config fio:fio jq:jq python3:python3 fusermount3:fuse3; do
		command -v "${t%%:*}" >/dev/null || pkgs+=("${t#*:}")
	done
	[[ -e /usr/share/doc/libfuse3-dev/examples/passthrough_ll.c || -e /usr/share/doc/libfuse3-dev/examples/passthrough_ll.c.gz ]] ||
		pkgs+=(libfuse3-dev)
	echo "${pkgs[@]}"
}
pkgs=$(need_pkgs)
if [[ -n $pkgs && -z ${BENCH_NO_INSTALL:-} && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
	say "installing $pkgs"
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs; } >/dev/null 2>&1
	pkgs=$(need_pkgs)
fi
[[ -z $pkgs ]] || die "missing packages: $pkgs (apt-get install -y $pkgs)"
command -v swift >/dev/null || die "swift not on PATH"
pkg-config --exists fuse3 || die "libfuse3-dev not installed (pkg-config fuse3)"
python3 -c 'import sqlite3' 2>/dev/null || die "python3 lacks the sqlite3 module"
[[ -e /dev/fuse ]] || die "/dev/fuse missing"

if ((SMOKE)); then
	ROUNDS=${ROUNDS:-1}
	# tiny sizes: every phase runs, nothing is measured seriously
	export FSBENCH_SIZE=${FSBENCH_SIZE:-32M} FSBENCH_RUNTIME=${FSBENCH_RUNTIME:-1}
	export FSBENCH_RANDREAD_IO=${FSBENCH_RANDREAD_IO:-4M} FSBENCH_HOT_SIZE=${FSBENCH_HOT_SIZE:-8M}
	export FSBENCH_HOT_RAMP=${FSBENCH_HOT_RAMP:-0} FSBENCH_HOT_RUNTIME=${FSBENCH_HOT_RUNTIME:-1}
	export FSBENCH_NFILES=${FSBENCH_NFILES:-300} FSBENCH_READDIR_PASSES=${FSBENCH_READDIR_PASSES:-2}
	export FSBENCH_PRIME=${FSBENCH_PRIME:-0} FSBENCH_SETTLE=${FSBENCH_SETTLE:-0.1}
	export SQLBENCH_SCALE=${SQLBENCH_SCALE:-0.02}
	smoke_src=/usr/include/linux
	[[ -d $smoke_src ]] || smoke_src=/usr/include
	export FSBENCH_TARSRC=${FSBENCH_TARSRC:-$smoke_src}
else
	ROUNDS=${ROUNDS:-3}
	export SQLBENCH_SCALE=${SQLBENCH_SCALE:-1}
fi
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "rounds must be a positive integer"

export FSBENCH_ANCHORS=${BENCH_ANCHORS:-$REPO/.build-release/fsbench-anchors}
if [[ -n ${FSBENCH_TARSRC:-} && -z ${FSBENCH_TARBALL:-} ]]; then
	export FSBENCH_TARBALL=$FSBENCH_ANCHORS/tree-$(printf '%s' "$FSBENCH_TARSRC" | tr -c 'A-Za-z0-9' '_').tar
fi
[[ -z $RESULTS ]] && RESULTS=$REPO/.build-release/bench-results/$(date +%Y%m%d-%H%M%S)$( ((SMOKE)) && echo -smoke)
mkdir -p "$RESULTS" || die "cannot create $RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)

# ---------------------------------------------------------------- build
BIN=${BENCH_CONTAINERFS:-$REPO/.build-release/release/containerfs}
BUILT_FROM="working tree"
if [[ -n $REV ]]; then
	sha=$(git -C "$REPO" rev-parse --short=12 "$REV^{commit}") || die "unknown revision $REV"
	src=$REPO/.build-release/rev-$sha
	if [[ ! -e $src/Package.swift ]]; then
		rm -rf "$src" && mkdir -p "$src" && git -C "$REPO" archive "$sha" | tar -x -C "$src" || die "git archive $sha failed"
		[[ -e $REPO/Package.resolved && ! -e $src/Package.resolved ]] && cp "$REPO/Package.resolved" "$src/"
	fi
	say "building ContainerFS $sha (release, in $src)"
	(cd "$src" && swift build -c release --scratch-path .build) >"$RESULTS/build.log" 2>&1 ||
		{ tail -30 "$RESULTS/build.log" >&2; die "release build of $sha failed (log: $RESULTS/build.log)"; }
	BIN=$src/.build/release/containerfs
	BUILT_FROM="commit $sha"
elif ((BUILD)) && [[ -z ${BENCH_CONTAINERFS:-} ]]; then
	say "building ContainerFS (release, --scratch-path .build-release)"
	(cd "$REPO" && swift build -c release --scratch-path .build-release) >"$RESULTS/build.log" 2>&1 ||
		{ tail -30 "$RESULTS/build.log" >&2; die "release build failed (log: $RESULTS/build.log)"; }
else
	BUILT_FROM="prebuilt $BIN"
fi
[[ -x $BIN ]] || die "$BIN missing (build first or drop --no-build)"
say "building passthrough_ll and metabench from Debian's libfuse3-dev examples into $FSBENCH_ANCHORS"
"$HERE/fsbench.sh" --build-anchors >"$RESULTS/anchors.log" 2>&1 ||
	{ cat "$RESULTS/anchors.log" >&2; die "cannot build the passthrough_ll anchor"; }

# ---------------------------------------------------------------- backing dir
case $BACKING in *' '*|*:*) die "backing dir must not contain spaces or ':'" ;; esac
mkdir -p "$BACKING" || die "cannot create $BACKING"
BACKING=$(cd "$BACKING" && pwd -P)
bfs=$(findmnt -rn -o FSTYPE -T "$BACKING")
[[ $bfs == tmpfs || $bfs == overlay ]] && say "WARNING: $BACKING is on $bfs, not a disk file system: figures are not comparable"
if findmnt -rn -o TARGET | grep -q "^$BACKING/"; then die "something is still mounted below $BACKING"; fi
# never wipe a directory this script did not make (the marker says it did)
if [[ -n $(ls -A "$BACKING") && ! -e $BACKING/.containerfs-bench ]]; then
	die "$BACKING is not empty and not a bench.sh backing dir; pick another (-b / BENCH_BACKING)"
fi
touch "$BACKING/.containerfs-bench"
rm -rf -- "${BACKING:?}"/* "${BACKING:?}"/.fsbench-prime.* 2>/dev/null
# Each file system's work directory in a block group of its own (docs/PERFORMANCE.md, "Creates
# next to a removed tree"): ext4 without a journal (these machines' disks) does not reuse an
# inode freed in the last minute (six while its inode table block is dirty) and has each
# create walk past every such inode of its block group first (`recently_deleted`,
# fs/ext4/ialloc.c). The work directories are siblings, so each run's creates met the inodes
# of the tree the run before had just removed: 10,000 native creates ran at 4-6k/s instead of
# 39-46k/s, and which file system paid depended on the order. The top-directory flag makes
# ext4 spread the directories made in it over block groups (Orlov) as it does at a file
# system's root: set on the backing directory (native, passthrough_ll) and on the container's
# Documents in the store (ContainerFS; POSTMOUNT below).
TOPDIR=0
if chattr +T "$BACKING" 2>/dev/null; then TOPDIR=1; else say "note: chattr +T refused on $BACKING ($bfs): work directories share block groups"; fi
STORE_NAME=containerfs-store
mkdir -p "$BACKING/$STORE_NAME"
RSSDIR=$RESULTS/rss
mkdir -p "$RSSDIR"

# ---------------------------------------------------------------- file systems
CFS_CONTAINER=containers/com.example.bench
CFS_SUB=$CFS_CONTAINER/Documents
# run after each mount (fsbench.sh / sqlbench.sh): the workload dir must be inside a
# container, and mkdir in containers/ creates one; other file systems are left alone. The
# container's Documents gets the top-directory flag in the store, as the backing dir has
# (above): through the mount no ioctl sets it.
CFS_DOCS={src}/$STORE_NAME/$CFS_SUB
FSBENCH_POSTMOUNT="case \$(findmnt -rno FSTYPE --mountpoint {mnt}) in fuse.containerfs) mkdir -p {mnt}/$CFS_CONTAINER"
((TOPDIR)) && FSBENCH_POSTMOUNT+=" && chattr +T $CFS_DOCS"
export FSBENCH_POSTMOUNT+=' ;; esac'
WRAP="$HERE/rss-exec.sh"
cfs_cmd() { # LABEL OPTS
	local c="$WRAP $1 $RSSDIR $BIN mount -f {src}/$STORE_NAME {mnt}"
	[[ -n $2 ]] && c+=" -o $2"
	printf '%s' "$c"
}
declare -A SPEC=(
	[native]=native
	[passthrough_ll]="$WRAP passthrough_ll $RSSDIR {anchors}/passthrough_ll -f -o source={src} {mnt}"
	[passthrough_ll_wb]="$WRAP passthrough_ll_wb $RSSDIR {anchors}/passthrough_ll -f -o source={src},writeback,cache=always {mnt}"
	[passthrough_ll_xattr]="$WRAP passthrough_ll_xattr $RSSDIR {anchors}/passthrough_ll -f -o source={src},xattr {mnt}"
	[containerfs]=$(cfs_cmd containerfs "${BENCH_CFS_OPTS:-}")
)
CFS_LABELS=(containerfs)
URING_SWITCH=/sys/module/fuse/parameters/enable_uring
DEFAULT_VARIANTS="pt:passthrough"
[[ -w $URING_SWITCH ]] && DEFAULT_VARIANTS+=" ur:uring"
for v in ${BENCH_CFS_VARIANTS-$DEFAULT_VARIANTS}; do
	name=${v%%:*} opts=${v#*:}
	[[ $name =~ ^[A-Za-z0-9_]+$ && -n $opts && $opts != "$v" ]] || die "bad BENCH_CFS_VARIANTS entry '$v' (NAME:OPTS)"
	SPEC[containerfs_$name]=$(cfs_cmd "containerfs_$name" "$opts")
	CFS_LABELS+=("containerfs_$name")
done
read -r -a LABELS <<<"${BENCH_FS:-native passthrough_ll passthrough_ll_wb passthrough_ll_xattr ${CFS_LABELS[*]}}"
ARGS=()
for l in "${LABELS[@]}"; do
	[[ -n ${SPEC[$l]:-} ]] || die "unknown file system label $l"
	ARGS+=("$l=${SPEC[$l]}")
	[[ $l == containerfs* ]] && export "FSBENCH_SUBDIR_$l=$CFS_SUB"
done

# FUSE over io_uring is off in the kernel unless root turns it on: for the run only.
URING_WAS=""
for l in "${LABELS[@]}"; do
	[[ ${SPEC[$l]} == *uring* ]] || continue
	[[ $(cat "$URING_SWITCH" 2>/dev/null) == Y ]] && break
	[[ -w $URING_SWITCH ]] || die "$l needs FUSE over io_uring: $URING_SWITCH must be Y (as root), or is missing (kernel before 6.14)"
	URING_WAS=N
	echo Y >"$URING_SWITCH"
	say "turned on $URING_SWITCH for this run"
	break
done

cleanup() {
	[[ -n $URING_WAS ]] && echo "$URING_WAS" >"$URING_SWITCH"
	((KEEP)) && return
	# a daemon still serving the store (an interrupted run) keeps it
	if findmnt -rn -o SOURCE | grep -q "^$BACKING/"; then
		say "WARNING: a mount still uses $BACKING; not removing it"
		return
	fi
	rm -rf -- "${BACKING:?}"/* "$BACKING/.containerfs-bench" 2>/dev/null
	rmdir "$BACKING" 2>/dev/null
}
trap cleanup EXIT
trap 'echo "bench.sh: interrupted" >&2; exit 130' INT TERM

{
	echo "# bench.sh $( ((SMOKE)) && echo --smoke) rounds=$ROUNDS date=$(date -Is) host=$(hostname)"
	echo "# nproc=$(nproc) kernel=$(uname -r) libfuse=$(pkg-config --modversion fuse3) fio=$(fio --version) sqlite=$(python3 -c 'import sqlite3; print(sqlite3.sqlite_version)')"
	echo "# backing=$BACKING fs=$(findmnt -rn -o FSTYPE,SOURCE,OPTIONS -T "$BACKING" | tr ' ' ':')"
	echo "# containerfs=$BIN built_from=$BUILT_FROM head=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)$(git -C "$REPO" diff --quiet -- Sources Package.swift 2>/dev/null || echo +dirty-tree)"
	for l in "${LABELS[@]}"; do echo "# $l = ${SPEC[$l]}"; done
} >"$RESULTS/run-info.txt"
say "results in $RESULTS; $ROUNDS round(s) of: ${LABELS[*]}"

# ---------------------------------------------------------------- fsbench rounds
# The tree workload runs as a pass of its own, in fresh work directories (docs/PERFORMANCE.md,
# "Creates next to a removed tree"): within one fsbench.sh run it extracts its tree next to
# the directory where metabench has just removed 10,000 files, in the same block group, and
# every create walks past those inodes first (native untar 1.2-3.4 s there, 0.27 s in a fresh
# directory). Its results are LABEL.tree.rN.txt.
WORKLOADS=${FSBENCH_WORKLOADS:-seqwrite,seqread,randread,randwrite,meta,tree}
MAIN_WORKLOADS=$(tr , '\n' <<<"$WORKLOADS" | grep -vx tree | paste -sd, -)
TREE=0
[[ ,$WORKLOADS, == *,tree,* ]] && TREE=1
matrix() { # WORKLOADS RESULTS_DIR LOG_NAME [ENV=VALUE...]: ROUNDS rounds of fsbench.sh
	# Round r starts r-1 places further along the list of file systems, so that none of
	# them always runs first (on a cold machine) or right after a given other one.
	local wl=$1 dir=$2 log=$3 n=${#LABELS[@]} r k l sub rc
	shift 3
	mkdir -p "$dir"
	for ((r = 1; r <= ROUNDS; r++)); do
		for ((k = 0; k < n; k++)); do
			l=${LABELS[$(((k + r - 1) % n))]}
			sub=.
			[[ $l == containerfs* ]] && sub=$CFS_SUB
			printf '    [%s] round %d/%d: %s\n' "$(date +%T)" "$r" "$ROUNDS" "$l" | tee -a "$RESULTS/$log.log" >&2
			env FSBENCH_WORKLOADS="$wl" "$@" "$HERE/fsbench.sh" -s "$sub" "$l" "$BACKING" "${SPEC[$l]}" \
				>"$dir/$l.r$r.txt" 2>"$dir/$l.r$r.err"
			rc=$?
			((rc == 130)) && exit 130
			((rc != 0)) && echo "      -> rc=$rc (see $dir/$l.r$r.err)" | tee -a "$RESULTS/$log.log" >&2
		done
	done
	return 0
}
if [[ -n $MAIN_WORKLOADS ]]; then
	say "fsbench.sh workloads $MAIN_WORKLOADS ($ROUNDS round(s))"
	matrix "$MAIN_WORKLOADS" "$RESULTS" run-matrix
fi
if ((TREE)); then
	say "fsbench.sh workload tree, in fresh work directories ($ROUNDS round(s))"
	# no priming: it readies the blocks of the fio file, which this pass does not write
	matrix tree "$RESULTS/tree" run-matrix-tree FSBENCH_PRIME=0
	for f in "$RESULTS"/tree/*.r[0-9]*.txt "$RESULTS"/tree/*.r[0-9]*.err; do
		[[ -e $f ]] || continue
		b=${f##*/}
		mv -- "$f" "$RESULTS/${b%%.r[0-9]*}.tree.${b#*.}"
	done
	rm -rf -- "${RESULTS:?}/tree"
fi

# ---------------------------------------------------------------- sqlite rounds
say "SQLite workload (sqlbench.sh, scale $SQLBENCH_SCALE, $ROUNDS round(s))"
n=${#LABELS[@]}
for ((r = 1; r <= ROUNDS; r++)); do
	for ((k = 0; k < n; k++)); do
		l=${LABELS[$(((k + r - 1) % n))]}
		sub=.
		[[ $l == containerfs* ]] && sub=$CFS_SUB
		printf '    [%s] round %d/%d: %s\n' "$(date +%T)" "$r" "$ROUNDS" "$l" >&2
		"$HERE/sqlbench.sh" -s "$sub" "$l" "$BACKING" "${SPEC[$l]}" >"$RESULTS/$l.sqlite.r$r.txt" 2>"$RESULTS/$l.sqlite.r$r.err"
		src=$?
		((src == 130)) && exit 130
		((src != 0)) && echo "      -> rc=$src (see $RESULTS/$l.sqlite.r$r.err)" >&2
	done
done

# ---------------------------------------------------------------- report
anchors=()
for l in native passthrough_ll passthrough_ll_wb passthrough_ll_xattr; do [[ " ${LABELS[*]} " == *" $l "* ]] && anchors+=("$l"); done
fsl=()
for l in "${LABELS[@]}"; do [[ $l == containerfs* ]] && fsl+=("$l"); done
[[ ${#fsl[@]} -eq 0 ]] && fsl=("${LABELS[@]}")
anchor_list=$(IFS=,; echo "${anchors[*]}")
fs_list=$(IFS=,; echo "${fsl[*]}")
python3 "$HERE/report.py" --rounds "$ROUNDS" --workloads "$WORKLOADS" --anchors "$anchor_list" --fs "$fs_list" "$RESULTS" >"$RESULTS/summary.md"
verdict=$?
{ cat "$RESULTS/run-info.txt"; echo; cat "$RESULTS/summary.md"; } >"$RESULTS/summary.full.md"
cat "$RESULTS/summary.md"
if ((${STORES:-0})); then
	say "store operations (trash.sh, publish.sh, snapshot.sh)"
	{
		CONTAINERFS=$BIN "$HERE/trash.sh" 10000
		CONTAINERFS=$BIN "$HERE/publish.sh"
		"$HERE/snapshot.sh" "$BIN"
	} 2>&1 | tee "$RESULTS/stores.txt"
fi
if ((${WATCHER:-0})); then
	say "store watchers (watcher.sh)"
	"$HERE/watcher.sh" $( ((SMOKE)) && echo --smoke) "$BIN" 2>&1 | tee "$RESULTS/watcher.txt"
	((PIPESTATUS[0] == 0)) || { say "watcher.sh failed (see $RESULTS/watcher.txt)"; verdict=1; }
fi
say "total $(awk -v a="$T_START" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}') s; results and logs: $RESULTS"
exit $verdict
