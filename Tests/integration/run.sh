#!/usr/bin/env bash
# ContainerFS integration suite: real mounts, one named behaviour per case (STYLE practice 13).
#
#   Tests/integration/run.sh [FILTER]
#
# Runs every cases/*.sh whose name contains FILTER (all without one), each with `bash -e`
# under `timeout`, with its own fresh $TEST_MNT, $TEST_STORE and $TEST_TMP. Exit status of
# a case: 0 pass, 77 skip, anything else fail (its output is printed). Ends with the line
#   N passed, N failed, N skipped
# and exits non-zero when a case failed or when a fuse.containerfs mount made during the run
# is still there at the end (it is then unmounted).
#
# Builds nothing: the binary is $CONTAINERFS (default .build/debug/containerfs of this
# repository). Needs root for most cases, /dev/fuse, fusermount3 (fuse3), python3, sqlite3,
# setfattr/getfattr (attr), setpriv/runuser/mount (util-linux), useradd (passwd).
#
# Environment: CONTAINERFS, TEST_BASE (where case directories go; default /var/tmp, a real
# disk: the conformance case compares with the file system underneath), CASE_TIMEOUT
# (seconds, default 120; a case may say `# timeout: N` in its first lines), KEEP=1 (keep
# every case directory; failed ones are always kept), CFS_MOUNT_OPTIONS (mount options
# added to every daemon a case starts with fs_mount_at: `uring` runs the suite over FUSE's
# io_uring transport, DESIGN.md 31).
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
FILTER=${1:-}

die() {
    echo "run.sh: $*" >&2
    echo "0 passed, 1 failed, 0 skipped"
    exit 2
}

# MARK: - Preconditions: fail loudly, never skip the whole suite

CONTAINERFS=${CONTAINERFS:-$REPO/.build/debug/containerfs}
[[ -x $CONTAINERFS ]] || die "$CONTAINERFS: missing or not executable (run 'swift build' first, or set CONTAINERFS)"
CONTAINERFS=$(realpath "$CONTAINERFS")
export CONTAINERFS
[[ -c /dev/fuse ]] || die "/dev/fuse: missing (the suite needs FUSE; it is not skipped)"
{ exec 9<>/dev/fuse; } 2>/dev/null || die "/dev/fuse: cannot be opened by uid $EUID"
exec 9>&-
for tool in fusermount3 python3 timeout awk setpriv; do
    command -v "$tool" >/dev/null 2>&1 || die "required tool '$tool' is not installed"
done
"$CONTAINERFS" --version >/dev/null 2>&1 || die "$CONTAINERFS --version failed: the binary does not run"

# MARK: - Cases

cases=()
for f in "$HERE"/cases/*.sh; do
    name=$(basename "$f" .sh)
    [[ -z $FILTER || $name == *"$FILTER"* ]] && cases+=("$f")
done
((${#cases[@]} > 0)) || die "no case matches '$FILTER'"

BASE=$(mktemp -d "${TEST_BASE:-/var/tmp}/containerfs-it.XXXXXX") || die "cannot make a work directory"
chmod 755 "$BASE"   # other users' cases must reach their mount points

# Our mounts: every FUSE mount whose mount point or source (the store) lies in this run's
# work directory. Every case keeps its stores and mount points there; a mount of another
# user of this machine (another checkout, a benchmark) is never ours and is left alone.
fuse_mounts() {
    awk -v b="$BASE/" '{
        mp = $5; gsub(/\\040/, " ", mp)
        t = ""; for (i = 7; i <= NF; i++) if ($i == "-") { t = $(i + 1); src = $(i + 2); break }
        if (t ~ /^fuse/ && (index(mp, b) == 1 || index(src, b) == 1)) print $3 " " mp
    }' /proc/self/mountinfo
}

# unmount_all DIR...: clean unmount, else abort the connection and unmount lazily.
unmount_one() {
    local dev=$1 mnt=$2
    fusermount3 -u "$mnt" 2>/dev/null && return 0
    [[ -w /sys/fs/fuse/connections/${dev#*:}/abort ]] && echo 1 >"/sys/fs/fuse/connections/${dev#*:}/abort" 2>/dev/null
    fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
}

# Leftovers of a case: mounts below its directory.
leftovers_under() {
    fuse_mounts | awk -v d="$1" 'index($2, d "/") == 1'
}

passed=0 failed=0 skipped=0
failed_names=()
suite_start=$(date +%s.%N)
echo "containerfs integration suite: ${#cases[@]} case(s), binary $CONTAINERFS, work dir $BASE"

for f in "${cases[@]}"; do
    name=$(basename "$f" .sh)
    dir="$BASE/$name"
    mkdir -p "$dir/mnt" "$dir/store" "$dir/tmp"
    chmod 755 "$dir" "$dir/mnt" "$dir/tmp"
    limit=$(sed -n '1,15s/^# timeout: *\([0-9][0-9]*\).*/\1/p' "$f" | head -1)
    limit=${limit:-${CASE_TIMEOUT:-120}}
    # A by-hand reproduction, libfuse-style.
    cat >"$dir/repro.sh" <<EOF
#!/usr/bin/env bash
# Re-runs case '$name' with the environment run.sh gave it.
export CONTAINERFS='$CONTAINERFS' TEST_NAME='$name' TEST_ROOT='$dir'
export TEST_MNT='$dir/mnt' TEST_STORE='$dir/store' TEST_TMP='$dir/tmp'
rm -rf '$dir/store' '$dir/tmp' && mkdir -p '$dir/store' '$dir/tmp'
exec bash -e '$f'
EOF
    chmod +x "$dir/repro.sh"

    start=$(date +%s.%N)
    rc=0
    env CONTAINERFS="$CONTAINERFS" TEST_NAME="$name" TEST_ROOT="$dir" \
        TEST_MNT="$dir/mnt" TEST_STORE="$dir/store" TEST_TMP="$dir/tmp" \
        timeout -k 10 "$limit" bash -e "$f" >"$dir/output.log" 2>&1 </dev/null || rc=$?
    elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')

    note=""
    if ((rc == 124 || rc == 137)); then
        note=" (timed out after ${limit}s)"
    fi
    left=$(leftovers_under "$dir")
    if [[ -n $left ]]; then
        while read -r dev mnt; do unmount_one "$dev" "$mnt"; done <<<"$left"
        note+=" (left mounted: $(awk '{ print $2 }' <<<"$left" | tr '\n' ' '))"
        ((rc == 0 || rc == 77)) && rc=1
    fi

    if ((rc == 0)); then
        passed=$((passed + 1))
        printf 'PASS  %-40s %6ss\n' "$name" "$elapsed"
        [[ -n ${KEEP:-} ]] || rm -rf "$dir"
    elif ((rc == 77)); then
        skipped=$((skipped + 1))
        printf 'SKIP  %-40s %6ss  %s\n' "$name" "$elapsed" "$(grep -m1 '^SKIP' "$dir/output.log")"
        [[ -n ${KEEP:-} ]] || rm -rf "$dir"
    else
        failed=$((failed + 1))
        failed_names+=("$name")
        printf 'FAIL  %-40s %6ss  exit %d%s\n' "$name" "$elapsed" "$rc" "$note"
        echo "----- output of $name (reproduce: $dir/repro.sh) -----"
        if (($(grep -c '^FAIL' "$dir/output.log") > 1)); then
            echo "    every failed check:"
            grep '^FAIL' "$dir/output.log" | head -n 40 | sed 's/^/      /'
            echo "    last lines:"
        fi
        tail -n 40 "$dir/output.log" | sed 's/^/    /'
        echo "----- end of $name -----"
    fi
done

# MARK: - Nothing may stay mounted

stray=$(fuse_mounts)
if [[ -n $stray ]]; then
    echo "run.sh: mounts of this run left behind (now unmounted):"
    while read -r dev mnt; do
        echo "    $mnt"
        unmount_one "$dev" "$mnt"
    done <<<"$stray"
    failed=$((failed + 1))
    failed_names+=("(mounts left behind)")
fi

total=$(awk -v a="$suite_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
((failed == 0)) && [[ -z ${KEEP:-} ]] && rm -rf "$BASE"
((failed > 0)) && echo "failed: ${failed_names[*]}"
echo "wall time ${total}s"
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
