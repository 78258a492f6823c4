# Ctrl-C (SIGINT) on an open waiting for a claim makes it fail with EINTR at once, having
# changed nothing; the waiter is dropped, so no claim leaks: once the holder ends, the next
# access is not blocked, and waiters queued behind the interrupted one are served. A waiter
# killed with SIGKILL, and a `coordinate` interrupted while it waits for its claim, are
# cleaned up too (docs/SEMANTICS.md §3.4).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount
C=$(_mkcontainer com.example.interrupt)
F=$C/Documents/f
SF=$TEST_STORE/containers/com.example.interrupt/Documents/f
echo data >"$F"

# waiter NAME CMD...: starts CMD in the background with SIGINT at its default (a script's
# `&` would have it ignored, as for a terminal's job in the background) and waits until
# the daemon has parked it. Its pid is left in $W, its output in $TEST_TMP/NAME.out.
waiter() {
    local name=$1
    shift
    env --default-signal=INT "$@" >"$TEST_TMP/$name.out" 2>&1 &
    W=$!
    _wait_parked "$W" "$name"
}

# OPEN_C PATH FLAG: open(2) by libc, not retried on EINTR (Python's os.open retries, PEP
# 475), with a SIGINT handler that returns; prints the errno's name or "opened".
OPEN_C='
import ctypes, errno, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGINT, lambda *a: None)
fd = libc.open(os.fsencode(sys.argv[1]), getattr(os, sys.argv[2]))
print(errno.errorcode[ctypes.get_errno()] if fd < 0 else "opened")
'

# MARK: SIGINT on a waiting open: EINTR, nothing changed
_hold w --write "$F"
waiter shell-write sh -c "echo x >'$F'"
kill -INT "$W"
_finish "$W" "sh -c 'echo x > f' after SIGINT"
_assert_ne 0 "$_RC" "exit status of the interrupted shell"
[[ $(cat "$TEST_TMP/shell-write.out") == *"$(fsop strerror EINTR)"* ]] ||
    _fail "interrupted shell: expected '$(fsop strerror EINTR)', got: $(cat "$TEST_TMP/shell-write.out")"
_ok "sh -c 'echo x > f' interrupted: $(fsop strerror EINTR)"

waiter ctypes-write "$PY" -c "$OPEN_C" "$F" O_WRONLY
kill -INT "$W"
_finish "$W" "open(O_WRONLY) with a SIGINT handler, after SIGINT"
_assert_output "EINTR" cat "$TEST_TMP/ctypes-write.out"

waiter ctypes-read "$PY" -c "$OPEN_C" "$F" O_RDONLY
kill -INT "$W"
_finish "$W" "open(O_RDONLY) with a SIGINT handler, after SIGINT"
_assert_output "EINTR" cat "$TEST_TMP/ctypes-read.out"
_assert_output "data" cat "$SF"          # the interrupted O_TRUNC open truncated nothing

# A waiter queued behind interrupted ones is still served once the holder ends.
sh -c "echo queued >'$F'" >"$TEST_TMP/queued.out" 2>&1 &
queued=$!
_wait_parked "$queued" "echo queued > f, behind the interrupted waiters"
_release w
_finish "$queued" "echo queued > f"
_assert_eq 0 "$_RC" "exit status of the queued writer"
_assert_output "queued" cat "$F"

# MARK: no claim leaks: right after the holder ends, nothing waits
_assert_ok timeout 2 sh -c "echo next >'$F'"
_assert_output "next" timeout 2 cat "$F"
_assert_ok timeout 2 fsop open "$F" "O_WRONLY|O_NONBLOCK"

# MARK: a waiter killed with SIGKILL is dropped too
_hold w2 --write "$F"
waiter killed-write sh -c "echo killed >'$F'"
kill -KILL "$W"
_finish "$W" "a waiting writer killed with SIGKILL"
_assert_eq 137 "$_RC" "exit status of the killed writer"
_release w2
_assert_ok timeout 2 fsop open "$F" "O_WRONLY|O_NONBLOCK"
_assert_output "next" timeout 2 cat "$F"

# MARK: a `coordinate` interrupted while it waits for its claim holds nothing afterwards
_hold w3 --write "$F"
# Its claim request waits in the daemon, not in a FUSE request: wait until the command is
# connected to the control socket and asleep in its wait for the answer.
env --default-signal=INT containerfs coordinate --write "$F" -- sh -c "echo never >'$F'" >"$TEST_TMP/coordinate-waiting.out" 2>&1 &
W=$!
_wait_for 10 eval 'ls -l /proc/$W/fd 2>/dev/null | grep -q "socket:" && [[ $(cat /proc/$W/wchan 2>/dev/null) == @(*poll*|*wait*|*read*) ]]' ||
    _fail "coordinate --write f: not waiting for its claim after 10 s"
_ok "coordinate --write f: waits for its claim"
kill -INT "$W"
_finish "$W" "coordinate --write f (waiting) after SIGINT"
_assert_ne 0 "$_RC" "exit status of the interrupted coordinate"
_release w3
_assert_ok timeout 2 fsop open "$F" "O_WRONLY|O_NONBLOCK"
_assert_output "next" timeout 2 cat "$F"
fs_umount
