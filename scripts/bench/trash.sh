#!/usr/bin/env bash
# Trash workloads (issue figures; no timing is asserted anywhere):
#   trash of a directory of N files   vs  mv of the same-size directory through the mount
#   trash list of N items             vs  Debian's trash-list
#   trash empty of an N-file tree     vs  rm -rf of the same tree through the mount
# Usage: scripts/bench/trash.sh [N]   (default 10000; needs root, FUSE, trash-cli)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-10000}
CFS=${CONTAINERFS:-$PWD/.build/release/containerfs}
[[ -x $CFS ]] || CFS=$PWD/.build/debug/containerfs
W=$(mktemp -d /var/tmp/cfs-trash-bench.XXXXXX)
S=$W/store M=$W/mnt
mkdir -p "$M"
trap 'fusermount3 -u "$M" 2>/dev/null || true; rm -rf "$W"' EXIT
"$CFS" container create com.example.bench --store "$S" >/dev/null
"$CFS" mount "$S" "$M"
D=$M/containers/com.example.bench/Documents
now() { date +%s.%N; }
tree() { mkdir -p "$1"; (cd "$1" && for ((d = 0; d < N / 100; d++)); do mkdir "d$d"; for ((f = 0; f < 100; f++)); do : >"d$d/f$f"; done; done); }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

tree "$D/t1"; tree "$D/t2"; sync
t0=$(now); "$CFS" trash "$D/t1" >/dev/null; t1=$(now)
mv "$D/t2" "$D/t2-moved"; t2=$(now)
echo "trash of a $N-file directory: $(secs "$t0" "$t1") s (one rename through the mount: $(secs "$t1" "$t2") s)"

# N trashed items, made in the store's trash while unmounted (what N trash-puts leave).
fusermount3 -u "$M"
TI=$S/trash/.Trash-0
for ((i = 0; i < N; i++)); do
    echo x >"$TI/files/item$i"
    printf '[Trash Info]\nPath=containers/com.example.bench/Documents/item%d\nDeletionDate=2026-12-01T10:00:00\n' "$i" >"$TI/info/item$i.trashinfo"
done
"$CFS" mount "$S" "$M"
t0=$(now); "$CFS" trash list --store "$S" >/dev/null; t1=$(now)
trash-list >/dev/null 2>&1 || true; t2=$(now)
echo "trash list of $N items: $(secs "$t0" "$t1") s (trash-list: $(secs "$t1" "$t2") s)"

"$CFS" trash empty --store "$S" >/dev/null
tree "$D/t3"; tree "$D/t4"; "$CFS" trash "$D/t3" >/dev/null; sync
t0=$(now); "$CFS" trash empty --store "$S" >/dev/null; t1=$(now)
rm -rf "$D/t4"; t2=$(now)
echo "trash empty of a $N-file tree: $(secs "$t0" "$t1") s (rm -rf through the mount: $(secs "$t1" "$t2") s)"
