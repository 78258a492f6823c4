#!/usr/bin/env bash
# scripts/bench/snapshot.sh - `snapshot export` and `snapshot import` against GNU tar on the
# same tree in one run (issue 40: at least 0.8x GNU tar's throughput).
#
# usage: scripts/bench/snapshot.sh [BINARY]
#
# Makes a store (no mount: the CLI works on it under its lock) with one container of
# BENCH_FILES files (default 10,000: 100 directories of 100 files, 1-16 KiB each), publishes
# it as a snapshot, then over BENCH_ROUNDS rounds (default 5), alternating which goes first:
#   export   containerfs snapshot export NAME -o FILE   vs  tar --format=pax -cf FILE NAME
#   import   containerfs snapshot import FILE --name N  vs  tar -xf FILE (into an empty dir)
# Both read and write the same disk file system with a warm page cache; neither syncs.
# Prints the median seconds of each and the throughput ratio (ours / tar's: tar's time over
# ours), one line per operation. BINARY defaults to .build-release/release/containerfs.
#
# Environment: BENCH_FILES, BENCH_ROUNDS, BENCH_BACKING (default /var/tmp/containerfs-snapbench,
# a disk file system, not tmpfs).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${1:-$REPO/.build-release/release/containerfs}
FILES=${BENCH_FILES:-10000}
ROUNDS=${BENCH_ROUNDS:-5}
BASE=${BENCH_BACKING:-/var/tmp/containerfs-snapbench}
[[ -x $BIN ]] || { echo "snapshot.sh: $BIN: not built (swift build -c release --build-path .build-release)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "snapshot.sh: python3 is needed" >&2; exit 2; }

rm -rf "$BASE"
mkdir -p "$BASE"
trap 'rm -rf "$BASE"' EXIT
S=$BASE/store
"$BIN" container create org.example.bench --store "$S" >/dev/null
python3 - "$S/containers/org.example.bench/Documents" "$FILES" <<'PY'
import os, random, sys
top, files = sys.argv[1], int(sys.argv[2])
random.seed(40)
per = 100
for i in range(files):
    d = os.path.join(top, f"d{i // per:03}")
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i % per:03}"), "wb") as f:
        f.write(random.randbytes(random.randint(1024, 16384)))
PY
"$BIN" snapshot publish "$S/containers/org.example.bench" --name bench >/dev/null
BYTES=$(du -sb --apparent-size "$S/snapshots/bench" | cut -f1)

now() { date +%s.%N; }
# run VAR CMD...: CMD's wall time in seconds appended to the array VAR.
run() {
    local var=$1 t0 t1
    shift
    t0=$(now)
    "$@" >/dev/null
    t1=$(now)
    eval "$var+=($(echo "$t1 - $t0" | bc))"
}
ours_export=() tar_export=() ours_import=() tar_import=()
for ((r = 0; r < ROUNDS; r++)); do
    rm -rf "$BASE/x" "$BASE/ours.tar" "$BASE/tar.tar"
    "$BIN" snapshot remove imported --store "$S" 2>/dev/null || true
    mkdir "$BASE/x"
    if ((r % 2 == 0)); then
        run ours_export "$BIN" snapshot export bench -o "$BASE/ours.tar" --store "$S"
        run tar_export tar --format=pax -C "$S/snapshots" -cf "$BASE/tar.tar" bench
        run ours_import "$BIN" snapshot import "$BASE/ours.tar" --name imported --store "$S"
        run tar_import tar -C "$BASE/x" -xf "$BASE/tar.tar"
    else
        run tar_export tar --format=pax -C "$S/snapshots" -cf "$BASE/tar.tar" bench
        run ours_export "$BIN" snapshot export bench -o "$BASE/ours.tar" --store "$S"
        run tar_import tar -C "$BASE/x" -xf "$BASE/tar.tar"
        run ours_import "$BIN" snapshot import "$BASE/ours.tar" --name imported --store "$S"
    fi
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
report() {
    local what=$1 ours tar
    ours=$(median "${@:2:$ROUNDS}")
    tar=$(median "${@:$((ROUNDS + 2))}")
    awk -v w="$what" -v o="$ours" -v t="$tar" -v b="$BYTES" -v n="$FILES" 'BEGIN {
        printf "%-7s %d files, %.1f MiB: containerfs %.3f s (%.0f MiB/s), GNU tar %.3f s (%.0f MiB/s), ratio %.2f\n",
            w, n, b / 1048576, o, b / 1048576 / o, t, b / 1048576 / t, t / o }'
}
echo "snapshot.sh: $ROUNDS rounds, medians; ratio = throughput of containerfs / GNU tar ($(tar --version | head -1))"
report export "${ours_export[@]}" "${tar_export[@]}"
report import "${ours_import[@]}" "${tar_import[@]}"
