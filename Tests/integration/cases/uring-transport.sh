# FUSE over io_uring (`-o uring`, DESIGN.md 31): requests come through the kernel's per-CPU
# io_uring queues instead of /dev/fuse. While the kernel's switch is off the mount is refused
# with the remedy. With it on: auto_unmount removes a killed daemon's mount; from each CPU in
# turn a 4 MiB file written and read back cold (spliced data replies), names created,
# renamed, listed (2,000 entries) and removed, a setuid bit cleared by another user's write;
# a request parked behind a claim is answered from another thread; 40 reads parked at once
# on one CPU while that CPU's other requests are still answered; a caller interrupted while
# parked gets EINTR, also when the interrupt reached libfuse before its request (its queue's
# thread held with ptrace); an fsync that waits on the disk does not hold up its CPU's other
# requests, the queues' fsync-lane workers are not pinned to one CPU, their fallocate-lane
# workers are; an idle ring mount runs no thread for 3 s. After unmount the daemon's log
# says how many requests the ring carried (at least those made here), that no request but
# FORGET and INTERRUPT came through /dev/fuse once it had started, and how many interrupts
# were delivered again.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
. "$(dirname "$0")/../lib/transport.sh"
_require_root
SWITCH=/sys/module/fuse/parameters/enable_uring
[[ -e $SWITCH ]] || _skip "kernel $(uname -r) has no FUSE over io_uring ($SWITCH missing)"
_users
WAS=$(cat "$SWITCH")
restore_switch() {   # then the usual clean-up, with the case's exit status
    local rc=$?
    set +e   # else `(exit 1)` below would end the trap before the clean-up unmounts
    touch "$TEST_TMP/ring0.go" 2>/dev/null   # a queue thread held with ptrace goes on
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
# auto_unmount: fusermount3 alone leaves a killed daemon's mount behind with io_uring (its
# open sees ECONNABORTED, not ENOTCONN); the daemon's watcher (_unmount-when-gone) detaches
# it, and after a clean unmount goes away without touching anything.
fs_mount -o uring,auto_unmount
watcher() { pgrep -f "_unmount-when-gone $(realpath -m "$TEST_MNT")\$" >/dev/null; }
_wait_for 10 watcher || _fail "no unmount watcher 10 s after mounting with -o uring,auto_unmount"
fs_umount
_wait_for 10 eval '! watcher' || _fail "the unmount watcher still runs 10 s after a clean unmount"
_ok "-o uring,auto_unmount: the watcher leaves after a clean unmount"
fs_mount -o uring,auto_unmount
_assert_ok ls "$TEST_MNT"   # serving: the descriptor is the daemon's and its watcher runs
_wait_for 10 watcher || _fail "no unmount watcher 10 s after mounting with -o uring,auto_unmount"
pid=$(_daemon_pid)
kill -KILL "$pid"
_wait_for 20 eval '! _is_mounted "$TEST_MNT"' || _fail "-o uring,auto_unmount: still mounted 20 s after the daemon was killed"
wait "$pid" 2>/dev/null || true
unset "_CFS_PID[$(realpath -m "$TEST_MNT")]"
_wait_for 10 eval '! watcher' || _fail "the unmount watcher still runs 10 s after the daemon was killed"
_ok "-o uring,auto_unmount: a killed daemon's mount went away ($(grep -c "its mount was detached (auto_unmount)" "$TEST_TMP/daemon.$_CFS_N.log") detached by the watcher, the rest by fusermount3)"

fs_mount -o uring
D=$(_open_documents com.example.uring)
SD=$TEST_STORE/containers/com.example.uring/Documents

# MARK: every kind of request, from every CPU (each CPU has its own queue)
ops=0
_exercise_every_cpu "$D" "$SD"

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
# One more interrupted while it waits: EINTR from the ring as from /dev/fuse.
# open_on_cpu0 PATH: open(2) by libc on CPU 0 (Python's os.open would retry on EINTR), SIGINT
# caught; prints the errno's name, or "opened". Only in the background (`&`): it execs, so
# that $! is the caller itself.
open_on_cpu0() {
    exec env --default-signal=INT taskset -c 0 "$PY" -c '
import ctypes, errno, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGINT, lambda *a: None)
fd = libc.open(os.fsencode(sys.argv[1]), os.O_RDONLY)
print(errno.errorcode[ctypes.get_errno()] if fd < 0 else "opened")
' "$1"
}
open_on_cpu0 "$D/claimed" >"$TEST_TMP/intr.out" 2>&1 &
intr=$!
_CFS_PIDS+=($intr)
_wait_parked "$intr" "an open to interrupt"
kill -INT "$intr"
wait "$intr"
_assert_eq "EINTR" "$(cat "$TEST_TMP/intr.out")" "interrupted open, parked"
# An interrupt that reaches libfuse before its request does (the kernel has put the request
# into CPU 0's ring, but the queue's thread has not handed it to libfuse yet): libfuse
# answers it EAGAIN once another request comes by, which the kernel cannot match to a ring
# request, so the tap keeps it and delivers it again once its request is there and parked.
# The queue's thread is held with ptrace right where its io_uring_enter returns with the
# request; a lookup made on CPU 1 is the other request. (A signal that comes before the
# kernel has put the request into the ring makes no INTERRUPT at all with io_uring: the
# kernel's dev_uring.c does not look for it when it sends the request later.)
redelivered=0
if (($(nproc) >= 2)); then
    stat "$D/claimed" >/dev/null   # names and attributes cached: the open below is one request
    daemon=$(_daemon_pid)
    ring0=$(grep -lx "cfs-ring-0" /proc/"$daemon"/task/*/comm | cut -d/ -f5)
    [[ -n $ring0 ]] || _fail "no thread named cfs-ring-0 in daemon $daemon"
    rm -f "$TEST_TMP"/ring0.*
    "$PY" - "$ring0" "$TEST_TMP/ring0" >"$TEST_TMP/ring0.out" 2>&1 <<'PY' &
import ctypes, os, signal, struct, sys, time
tid, flag = int(sys.argv[1]), sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
DETACH, SYSCALL, SEIZE, INTERRUPT, GET_SYSCALL_INFO = 17, 24, 0x4206, 0x4207, 0x420E
TRACESYSGOOD, WALL, IO_URING_ENTER = 1, 0x40000000, 426
def ptrace(request, data=None, addr=None):
    if libc.ptrace(request, tid, addr, data) < 0:
        sys.exit(f"ptrace {request:#x} of {tid}: {os.strerror(ctypes.get_errno())}")
def wait_for(name):
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{flag}.{name}"):
        if time.monotonic() > deadline:
            ptrace(DETACH)
            sys.exit(f"no {name} in 60 s")
        time.sleep(0.01)
def syscall_stop():                    # the next system-call stop: (entry?, number or result)
    while True:
        ptrace(SYSCALL)
        _, status = os.waitpid(tid, WALL)
        if os.WIFSTOPPED(status) and os.WSTOPSIG(status) == (signal.SIGTRAP | 0x80):
            libc.ptrace(GET_SYSCALL_INFO, tid, ctypes.c_void_p(88), info)
            return info.raw[0] == 1, struct.unpack_from("<q", info.raw, 24)[0]
info = ctypes.create_string_buffer(88)
ptrace(SEIZE, TRACESYSGOOD)
ptrace(INTERRUPT)
os.waitpid(tid, WALL)
# Held where it is about to wait for requests again, with every completion it had taken:
# whatever it was doing (an interrupted wait may return without a stop of its own) is done.
while syscall_stop() != (True, IO_URING_ENTER):
    pass
open(f"{flag}.stopped", "w").close()
wait_for("asked")                      # the open on CPU 0 waits in the kernel
# Let that io_uring_enter run: the kernel puts the request into an entry as it does, and
# the thread is held again where the call returns, before it reads the completion.
while True:
    entry, value = syscall_stop()
    if not entry and value >= 0:
        break
    if not entry:                      # interrupted: to the next io_uring_enter's entry
        while syscall_stop() != (True, IO_URING_ENTER):
            pass
open(f"{flag}.held", "w").close()
wait_for("go")
ptrace(DETACH)
PY
    holder=$!
    _CFS_PIDS+=($holder)
    _wait_for 10 eval '[[ -e $TEST_TMP/ring0.stopped ]] || ! _pid_running $holder' || _fail "cfs-ring-0 not stopped after 10 s"
    [[ -e $TEST_TMP/ring0.stopped ]] || _fail "could not stop cfs-ring-0: $(cat "$TEST_TMP/ring0.out")"
    open_on_cpu0 "$D/claimed" >"$TEST_TMP/early.out" 2>&1 &
    early=$!
    _CFS_PIDS+=($early)
    _wait_for 10 _parked "$early" || _fail "the open on CPU 0 is not waiting for the kernel's answer"
    touch "$TEST_TMP/ring0.asked"
    _wait_for 10 eval '[[ -e $TEST_TMP/ring0.held ]] || ! _pid_running $holder' || _fail "cfs-ring-0 did not return from io_uring_enter in 10 s: $(cat "$TEST_TMP/ring0.out")"
    [[ -e $TEST_TMP/ring0.held ]] || _fail "ptrace holder: $(cat "$TEST_TMP/ring0.out")"
    kill -INT "$early"
    # Lookups from CPU 1 over a second: whichever comes after the kernel's INTERRUPT has
    # reached libfuse's /dev/fuse thread makes libfuse answer it EAGAIN.
    _assert_ok taskset -c 1 "$PY" -c '
import os, sys, time
for i in range(10):
    time.sleep(0.1)
    try:
        os.stat(f"{sys.argv[1]}-{i}")
    except FileNotFoundError:
        pass
' "$D/never-made-early"
    touch "$TEST_TMP/ring0.go"
    wait "$holder" || _fail "ptrace holder: $(cat "$TEST_TMP/ring0.out")"
    _wait_for 10 eval '! _pid_running $early' || _fail "the interrupted open on CPU 0 still waits 10 s after its queue resumed"
    wait "$early"
    _assert_eq "EINTR" "$(cat "$TEST_TMP/early.out")" "open interrupted before its queue took it"
    redelivered=1
    ops=$((ops + 3))
fi
_release w
wait "$one"
_assert_eq "claimed" "$(cat "$TEST_TMP/one.out")" "the first parked reader"
for ((i = 1; i <= 40; i++)); do
    wait "${pids[i - 1]}"
    _assert_eq "claimed" "$(cat "$TEST_TMP/cat.$i.out")" "parked reader $i"
done
_ok "all parked readers answered after the claim, one interrupted with EINTR"
ops=$((ops + 45))

# MARK: an fsync does not hold up its CPU's queue (the queue hands it to its slow lane)
_fsync_meanwhile "$D" "$SD" "CPU 0's io_uring queue"
_assert_lane_cpus "$D" "io_uring queues"

# MARK: an idle ring wakes nobody (its queue threads wait in io_uring_enter)
_assert_idle "-o uring"

# MARK: what went through the ring
fs_umount
line=$(grep -o "io_uring served [0-9]* requests; [0-9]* others came through /dev/fuse after it started; [0-9]* interrupts delivered again after their request" "$TEST_TMP/daemon.$_CFS_N.log") ||
    _fail "no io_uring summary in the daemon's log: $(cat "$TEST_TMP/daemon.$_CFS_N.log")"
read -r served strays again <<<"$(echo "$line" | awk '{ print $3, $5, $13 }')"
((served >= ops)) || _fail "io_uring served $served requests, fewer than the $ops made here"
_assert_eq 0 "$strays" "requests other than FORGET and INTERRUPT through /dev/fuse once the ring served"
_assert_eq "$redelivered" "$again" "interrupts delivered again after their request"
_ok "io_uring served $served requests (at least $ops made here); none went through /dev/fuse"
