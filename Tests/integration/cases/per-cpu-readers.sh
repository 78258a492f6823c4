# The default transport: one reader of /dev/fuse per CPU, pinned to it (DESIGN.md 33). The
# daemon has a thread named cfs-read-N for each CPU it may run on and no other reader; from
# each CPU in turn a file is written and read back cold, names are created, renamed, listed
# and removed, a set-ID bit is cleared; a daemon started under `taskset -c 0` has one reader,
# whose fsync goes to its slow lane while the lookup and create made meanwhile on CPU 0 are
# answered; `-o threads=N` serves with libfuse's pool instead. After unmount the daemon's
# log says how many requests the readers served (at least those made here).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/transport.sh"
_require_root
_users

# readers PID: the daemon's reader threads, by name, sorted.
readers() { cat /proc/"$1"/task/*/comm | grep '^cfs-read-' | sort -V | tr '\n' ' '; }
# expected_readers [CPUS]: cfs-read-N for each CPU of the list (taskset's), or of this shell.
expected_readers() {
    local cpu
    for cpu in $("$PY" -c 'import os; print(*sorted(os.sched_getaffinity(0)))'); do printf 'cfs-read-%s ' "$cpu"; done
}
served() {   # the readers' line of the last daemon log: requests served
    grep -o "per-CPU readers served [0-9]* requests" "$TEST_TMP/daemon.$_CFS_N.log" | awk '{ print $4 }'
}

fs_mount
D=$(_open_documents com.example.readers)
SD=$TEST_STORE/containers/com.example.readers/Documents
_assert_eq "$(expected_readers)" "$(readers "$(_daemon_pid)")" "reader threads of the daemon"

ops=0
for cpu in $(seq 0 $(($(nproc --all) - 1))); do
    taskset -c "$cpu" true 2>/dev/null || continue   # offline
    _exercise_from_cpu "$cpu" "$D" "$SD"
done
fs_umount
n=$(served)
[[ -n $n ]] || _fail "no readers' summary in the daemon's log: $(cat "$TEST_TMP/daemon.$_CFS_N.log")"
((n >= ops)) || _fail "the readers served $n requests, fewer than the $ops made here"
_ok "the per-CPU readers served $n requests (at least $ops made here)"

# One CPU allowed: one reader, and an fsync (on its slow lane) does not hold up the others.
_CFS_WRAP=(taskset -c 0)
fs_mount
_CFS_WRAP=()
_assert_eq "cfs-read-0 " "$(readers "$(_daemon_pid)")" "reader threads of a daemon run under taskset -c 0"
ops=0
_fsync_meanwhile "$D" "$SD" "the daemon's only reader is on CPU 0"
fs_umount
n=$(served)
((n >= ops)) || _fail "the reader served ${n:-no} requests, fewer than the $ops made here"

# libfuse's pool when asked for (-o threads=N): no per-CPU readers, and it serves.
fs_mount -o threads=4
_assert_eq "" "$(readers "$(_daemon_pid)")" "reader threads with -o threads=4"
echo pooled >"$D/pooled"
_assert_output "pooled" cat "$SD/pooled"
_assert_output "pooled" cat "$D/pooled"
fs_umount
_assert_eq "" "$(served)" "readers' summary with -o threads=4"
_ok "-o threads=4 serves with libfuse's pool"
