#!/usr/bin/env bash
# replaced.sh - what a file replaced in the store costs the next open through the mount
# (evidence for docs/DESIGN.md 60, node ids): per round, the store changes a file the kernel
# holds, then one process opens, reads and closes it through the mount. Three kinds: the
# file unchanged (the baseline), rewritten in place (an invalidation), and replaced by a
# rename over its name (the OPEN answers ESTALE and the kernel looks the name up again).
#
# usage: replaced.sh BINARY [ROUNDS]      (root; default 2,000 rounds; store under /var/tmp)
set -euo pipefail
BIN=$(realpath "$1")
ROUNDS=${2:-2000}
W=$(mktemp -d /var/tmp/cfs-replaced.XXXXXX)
trap 'fusermount3 -u "$W/mnt" 2>/dev/null || true; rm -rf "$W"' EXIT
mkdir -p "$W/mnt"
"$BIN" mount "$W/store" "$W/mnt" >/dev/null
mkdir "$W/mnt/containers/com.example.replaced"
python3 - "$W/mnt/containers/com.example.replaced/Documents" "$W/store/containers/com.example.replaced/Documents" "$ROUNDS" <<'PY'
import os, sys, time
mount, store, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def read(p):
    with open(p) as f:
        return f.read()
def run(kind):
    p, s = mount + "/" + kind, store + "/" + kind
    with open(s, "w") as f:
        f.write("0")
    read(p)
    spent = 0.0
    for i in range(rounds):
        want = str(i % 10)
        if kind == "edited":
            with open(s, "r+") as f:
                f.write(want)
        elif kind == "replaced":
            with open(s + ".new", "w") as f:
                f.write(want)
            os.rename(s + ".new", s)
        else:
            want = "0"
        t = time.perf_counter()
        got = read(p)
        spent += time.perf_counter() - t
        assert got == want, (kind, i, got, want)
    print("%-10s %7.1f us per open+read+close (%d rounds)" % (kind, spent / rounds * 1e6, rounds))
for kind in ("unchanged", "edited", "replaced"):
    run(kind)
PY
