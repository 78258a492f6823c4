# The default transport: one reader of /dev/fuse per CPU, pinned to it (DESIGN.md 33). The
# daemon has a thread named cfs-read-N, allowed on CPU N alone, for each CPU it may run on
# and no other reader; from each CPU in turn a file is written and read back cold, names are
# created, renamed, listed and removed, a set-ID bit is cleared; a daemon started under
# `taskset -c 0` has two readers there, and an fsync goes to a slow lane while the lookup and
# create made meanwhile on CPU 0 are answered; the fsync lane's workers may run on every CPU
# the daemon may, the fallocate lane's on their reader's CPU alone; `-o threads=N` serves
# with libfuse's pool instead. After unmount the daemon's log says how many requests the
# readers served (at least those made here).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/transport.sh"
_require_root
_users

# readers PID: the daemon's reader threads, "NAME:CPUS-ALLOWED", sorted.
readers() {
    local task
    for task in /proc/"$1"/task/*; do
        grep -q '^cfs-read' "$task/comm" 2>/dev/null || continue
        echo "$(cat "$task/comm"):$(awk '/^Cpus_allowed_list/ { print $2 }' "$task/status")"
    done | sort -V | tr '\n' ' '
}
# expected_readers: cfs-read-N:N for each CPU this shell may run on (at most 16), twice if
# there is one.
expected_readers() {
    local cpus cpu
    cpus=$("$PY" -c 'import os; c = sorted(os.sched_getaffinity(0))[:16]; print(*(c * 2 if len(c) == 1 else c))')
    for cpu in $cpus; do printf 'cfs-read-%s:%s ' "$cpu" "$cpu"; done
}
# wait_readers EXPECTED WHAT: the daemon names and pins its readers once it serves.
wait_readers() {
    want=$1
    _wait_for 10 eval '[[ $(readers "$(_daemon_pid)") == "$want" ]]' ||
        _fail "$2: reader threads '$(readers "$(_daemon_pid)")', expected '$1'"
    _ok "$2: $1"
}
served() {   # the readers' line of the last daemon log: requests served
    grep -o "per-CPU readers served [0-9]* requests" "$TEST_TMP/daemon.$_CFS_N.log" | awk '{ print $4 }'
}

fs_mount
D=$(_open_documents com.example.readers)
SD=$TEST_STORE/containers/com.example.readers/Documents
wait_readers "$(expected_readers)" "reader threads of the daemon"

ops=0
_exercise_every_cpu "$D" "$SD"
_assert_lane_cpus "$D" "per-CPU readers"
fs_umount
n=$(served)
[[ -n $n ]] || _fail "no readers' summary in the daemon's log: $(cat "$TEST_TMP/daemon.$_CFS_N.log")"
((n >= ops)) || _fail "the readers served $n requests, fewer than the $ops made here"
_ok "the per-CPU readers served $n requests (at least $ops made here)"

# One CPU allowed: two readers there. An fsync goes to a slow lane (whose worker, started
# on demand, is a thread named cfs-sync-0) and the lookup and create made meanwhile on CPU 0
# are answered before it returns.
_CFS_WRAP=(taskset -c 0)
fs_mount
_CFS_WRAP=()
stat "$D" >/dev/null
wait_readers "cfs-read-0:0 cfs-read-0:0 " "reader threads of a daemon run under taskset -c 0"
ops=0
_assert_eq "0" "$(cat /proc/"$(_daemon_pid)"/task/*/comm | grep -c '^cfs-s')" "slow-lane workers before any fsync"
_fsync_meanwhile "$D" "$SD" "the daemon's readers are on CPU 0"
_assert_eq "1" "$(cat /proc/"$(_daemon_pid)"/task/*/comm | grep -c '^cfs-sync-0$')" "fsync-lane workers after one fsync"
fs_umount
n=$(served)
((n >= ops)) || _fail "the readers served ${n:-no} requests, fewer than the $ops made here"

# libfuse's pool when asked for (-o threads=N): no per-CPU readers, and it serves.
fs_mount -o threads=4
echo pooled >"$D/pooled"
_assert_output "pooled" cat "$SD/pooled"
_assert_output "pooled" cat "$D/pooled"
_assert_eq "" "$(readers "$(_daemon_pid)")" "reader threads with -o threads=4 (serving)"
fs_umount
_assert_eq "" "$(served)" "readers' summary with -o threads=4"
_ok "-o threads=4 serves with libfuse's pool"
