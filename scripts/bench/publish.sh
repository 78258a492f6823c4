#!/usr/bin/env bash
# Snapshot publish and copy-up (issue figures; no timing is asserted anywhere):
#   snapshot publish of a container of N files, 1 GiB in all, through the daemon
#       vs  cp -a of the same tree in the store (what copying the data costs)
#   the first write to a shared 1 GiB file (it pays the copy) vs the second write
# Usage: scripts/bench/publish.sh [N...]   (default 10000 100000; needs root, FUSE)
set -euo pipefail
cd "$(dirname "$0")/../.."
COUNTS=("${@:-10000}")
(($#)) || COUNTS=(10000 100000)
CFS=${CONTAINERFS:-$PWD/.build/release/containerfs}
[[ -x $CFS ]] || CFS=$PWD/.build/debug/containerfs
W=$(mktemp -d /var/tmp/cfs-publish-bench.XXXXXX)
S=$W/store M=$W/mnt
mkdir -p "$M"
trap 'fusermount3 -u "$M" 2>/dev/null || true; rm -rf "$W"' EXIT
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# N files of 1 GiB / N bytes each, in directories of 1,000, written in the store.
fill() { # DIR N
    python3 - "$1" "$2" <<'PY'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
size = (1 << 30) // n
data = os.urandom(size)
for i in range(n):
    d = os.path.join(top, "d%d" % (i // 1000))
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%d" % i), "wb") as f:
        f.write(data)
PY
}

echo "machine: $(nproc) CPUs, $(uname -r), store on $(df --output=fstype "$(dirname "$W")" | tail -1)"
for N in "${COUNTS[@]}"; do
    id=com.example.publish$N
    "$CFS" container create "$id" --store "$S" >/dev/null
    fill "$S/containers/$id/Documents" "$N"
    sync
    "$CFS" mount "$S" "$M"
    t0=$(now); "$CFS" snapshot publish "$M/containers/$id" --name "p$N" >/dev/null; t1=$(now)
    fusermount3 -u "$M"
    sync
    t2=$(now); cp -a "$S/containers/$id" "$W/copy$N"; sync -f "$W/copy$N"; t3=$(now)
    echo "publish of $N files, 1 GiB: $(secs "$t0" "$t1") s (cp -a of the same tree: $(secs "$t2" "$t3") s)"
    rm -rf "$W/copy$N"
done

# One 1 GiB file: its first change pays the copy, the next costs what a write costs.
id=com.example.big
"$CFS" container create "$id" --store "$S" >/dev/null
head -c $((1 << 30)) /dev/urandom >"$S/containers/$id/Documents/big"
sync
"$CFS" mount "$S" "$M"
F=$M/containers/$id/Documents/big
"$CFS" snapshot publish "$F" --name big >/dev/null
t0=$(now); dd if=/dev/zero of="$F" bs=4096 count=1 conv=notrunc status=none; t1=$(now)
dd if=/dev/zero of="$F" bs=4096 count=1 seek=1 conv=notrunc status=none; t2=$(now)
echo "first write to a shared 1 GiB file: $(secs "$t0" "$t1") s (the next write: $(secs "$t1" "$t2") s)"
fusermount3 -u "$M"
