#!/usr/bin/env bash
# ab.sh - two ContainerFS builds side by side, for a change too small for the machine's
# run-to-run drift (evidence for docs/DESIGN.md and docs/PERFORMANCE.md, not a benchmark of
# record: scripts/bench.sh is that).
#
# usage: ab.sh OLD_BINARY NEW_BINARY [ROUNDS]      (root; default 6 rounds)
#   Both builds are mounted at once, each over its own store on /dev/shm (no disk, so ext4's
#   inode allocation does not drown the FUSE path), and every round runs the same bursts on
#   one, then the other (old first in odd rounds, new first in even ones: the second of a
#   pair ran a few per cent faster): AB_FILES (2,000) create+close, as many open+close of
#   those files, and an untar of the kernel's `linux/` headers. Prints one line per build and
#   round, then the medians. AB_OPTS: extra -o options for both mounts. AB_TARBALL: another
#   tarball.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,12p' "$0" >&2; exit 2; }
OLD=$(realpath "$1") NEW=$(realpath "$2") ROUNDS=${3:-6}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARBALL=${AB_TARBALL:-$REPO/.build-release/fsbench-anchors/tree-_usr_include_linux.tar}
if [[ ! -s $TARBALL ]]; then mkdir -p "$(dirname "$TARBALL")"; tar -C /usr/include -cf "$TARBALL" linux; fi
WORK=$(mktemp -d /dev/shm/cfs-ab.XXXXXX)
cleanup() {
	cd /
	for x in old new; do fusermount3 -u "$WORK/$x.mnt" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
for x in old new; do
	bin=$OLD; [[ $x == new ]] && bin=$NEW
	mkdir -p "$WORK/$x.store" "$WORK/$x.mnt"
	"$bin" mount "$WORK/$x.store" "$WORK/$x.mnt" ${AB_OPTS:+-o "$AB_OPTS"}
	"$bin" container create com.example.ab --store "$WORK/$x.store" >/dev/null
done
FILES=${AB_FILES:-2000}
for r in $(seq 1 "$ROUNDS"); do
	order="old new"; ((r % 2 == 0)) && order="new old"
	for x in $order; do
		d=$WORK/$x.mnt/containers/com.example.ab/Documents/r$r
		python3 - "$d" "$FILES" <<-'EOF'
		import os, sys, time
		d, n = sys.argv[1], int(sys.argv[2]); os.mkdir(d)
		t = time.perf_counter()
		for i in range(n):
		    os.close(os.open(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
		c = n / (time.perf_counter() - t)
		t = time.perf_counter()
		for i in range(n):
		    os.close(os.open(f"{d}/f{i}", os.O_RDONLY))
		o = n / (time.perf_counter() - t)
		print(f"create/s {c:.0f} open/s {o:.0f}", end=" ")
		EOF
		s=$EPOCHREALTIME
		tar -xf "$TARBALL" -C "$d"
		echo "untar_s $(awk -v a="$s" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }') $x"
		rm -rf "$d"
	done
done | tee "$WORK/lines"
python3 - "$WORK/lines" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[-1], []).append(dict(zip(f[0:-1:2], map(float, f[1:-1:2]))))
for build in ("old", "new"):
    keys = rows[build][0].keys()
    print("median", build, " ".join(f"{k} {statistics.median(r[k] for r in rows[build]):g}" for k in keys))
EOF
