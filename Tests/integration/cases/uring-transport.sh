# FUSE over io_uring (`-o uring`, DESIGN.md 31): requests come through the kernel's per-CPU
# io_uring queues instead of /dev/fuse. While the kernel's switch is off the mount is refused
# with the remedy. With it on, from each CPU in turn: a 4 MiB file written and read back cold
# (spliced data replies), names created, renamed, listed (2,000 entries) and removed, a
# setuid bit cleared by another user's write; a request parked behind a claim is answered
# from another thread; 40 reads parked at once on one CPU while that CPU's other requests are
# still answered; a caller interrupted while parked gets EINTR. After unmount the daemon's
# log says how many requests the ring carried (at least those made here) and that no request
# but FORGET and INTERRUPT came through /dev/fuse once it had started.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
_require_root
SWITCH=/sys/module/fuse/parameters/enable_uring
[[ -e $SWITCH ]] || _skip "kernel $(uname -r) has no FUSE over io_uring ($SWITCH missing)"
_users
WAS=$(cat "$SWITCH")
restore_switch() {
    local rc=$?
    echo "$WAS" >"$SWITCH"
    (exit "$rc")
    _cfs_cleanup
}
trap restore_switch EXIT

echo N >"$SWITCH"
_assert_exit 1 "$CONTAINERFS" mount "$TEST_STORE" "$TEST_MNT" -o uring
[[ $_OUT == *"-o uring: the kernel's FUSE io_uring transport is off ($SWITCH is N; as root: echo Y > $SWITCH)"* ]] ||
    _fail "unclear refusal: $_OUT"
_is_mounted "$TEST_MNT" && _fail "a refused mount is mounted"

echo Y >"$SWITCH"
fs_mount -o uring
C=$(_mkcontainer com.example.uring)
chmod 755 "$C"
D=$C/Documents
chmod 777 "$D"
SD=$TEST_STORE/containers/com.example.uring/Documents
head -c 4M /dev/urandom >"$TEST_TMP/src"

# MARK: every kind of request, from every CPU (each CPU has its own queue)
ops=0
for cpu in $(seq 0 $(($(nproc --all) - 1))); do
    taskset -c "$cpu" true 2>/dev/null || continue   # offline
    W=$D/cpu$cpu
    taskset -c "$cpu" mkdir "$W"
    taskset -c "$cpu" cp "$TEST_TMP/src" "$W/big"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    _assert_ok taskset -c "$cpu" cmp "$W/big" "$TEST_TMP/src"
    _assert_ok cmp "$SD/cpu$cpu/big" "$TEST_TMP/src"
    _assert_output 2000 taskset -c "$cpu" "$PY" - "$W" <<'PY'
import os, sys
w = sys.argv[1]
for i in range(2000):
    with open(f"{w}/f{i}", "w") as f:
        f.write(str(i))
for i in range(0, 2000, 2):
    os.rename(f"{w}/f{i}", f"{w}/g{i}")
names = [n for n in os.listdir(w) if n != "big"]
assert sorted(open(f"{w}/{n}").read() for n in names) == sorted(str(i) for i in range(2000))
print(len(names))
for n in names:
    os.unlink(f"{w}/{n}")
PY
    _assert_output "big" taskset -c "$cpu" ls "$W"
    # A set-user-ID file written by another user loses the bit (the write's kill flag
    # reaches the daemon through the ring too).
    echo data >"$W/suid"
    chmod 4777 "$W/suid"
    _assert_ok _as_user "$U1" taskset -c "$cpu" sh -c "echo more >>'$W/suid'"
    _assert_output "777" stat -c %a "$SD/cpu$cpu/suid"
    ops=$((ops + 2000 * 3 + 1000 + 64))
    _ok "cpu $cpu: 4 MiB read back cold, 2,000 names made, renamed, listed and removed, set-ID cleared"
done

# MARK: parked requests answered from another thread, and never stopping a queue
echo "claimed" >"$D/claimed"
echo "other" >"$D/other"
_hold w --write "$D/claimed"
taskset -c 0 cat "$D/claimed" >"$TEST_TMP/one.out" 2>&1 &
one=$!
_CFS_PIDS+=($one)
_wait_parked "$one" "a reader of the claimed file"
pids=()
for ((i = 1; i <= 40; i++)); do
    taskset -c 0 cat "$D/claimed" >"$TEST_TMP/cat.$i.out" 2>&1 &
    pids+=($!)
    _CFS_PIDS+=($!)
done
_wait_for 20 _all_parked "${pids[@]}" || _fail "not all 40 readers are waiting in the daemon after 20 s"
_assert_output "other" timeout 5 taskset -c 0 cat "$D/other"
_assert_output "6" timeout 5 taskset -c 0 fsop stat "$D/other" size
_ok "41 requests parked on CPU 0's queue; that CPU's other requests are answered"
# One more interrupted while it waits: EINTR from the ring as from /dev/fuse (open(2) by
# libc: Python's os.open would retry).
env --default-signal=INT taskset -c 0 "$PY" -c '
import ctypes, errno, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGINT, lambda *a: None)
fd = libc.open(os.fsencode(sys.argv[1]), os.O_RDONLY)
print(errno.errorcode[ctypes.get_errno()] if fd < 0 else "opened")
' "$D/claimed" >"$TEST_TMP/intr.out" 2>&1 &
intr=$!
_CFS_PIDS+=($intr)
_wait_parked "$intr" "an open to interrupt"
kill -INT "$intr"
wait "$intr"
_assert_eq "EINTR" "$(cat "$TEST_TMP/intr.out")" "interrupted open, parked"
_release w
wait "$one"
_assert_eq "claimed" "$(cat "$TEST_TMP/one.out")" "the first parked reader"
for ((i = 1; i <= 40; i++)); do
    wait "${pids[i - 1]}"
    _assert_eq "claimed" "$(cat "$TEST_TMP/cat.$i.out")" "parked reader $i"
done
_ok "all parked readers answered after the claim, one interrupted with EINTR"
ops=$((ops + 45))

# MARK: what went through the ring
fs_umount
line=$(grep -o "io_uring served [0-9]* requests; [0-9]* others came through /dev/fuse after it started" "$TEST_TMP/daemon.$_CFS_N.log") ||
    _fail "no io_uring summary in the daemon's log: $(cat "$TEST_TMP/daemon.$_CFS_N.log")"
read -r served strays <<<"$(echo "$line" | awk '{ print $3, $5 }')"
((served >= ops)) || _fail "io_uring served $served requests, fewer than the $ops made here"
_assert_eq 0 "$strays" "requests other than FORGET and INTERRUPT through /dev/fuse once the ring served"
_ok "io_uring served $served requests (at least $ops made here); none went through /dev/fuse"
