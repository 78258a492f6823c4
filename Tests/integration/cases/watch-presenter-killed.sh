# Presenters that cannot or may not answer do not hold I/O hostage. A `watch` killed with
# SIGKILL is dropped: the next write to its file completes at once. A stopped one is
# skipped at the presenter deadline and sent `resync` once it runs again. A `watch
# --refuse ERRNO` fails accesses with that errno only for callers of its own uid (or any
# caller, when it runs as root); another user's refusal is ignored, though that presenter
# is still told of the changes (docs/SEMANTICS.md §3.6;
# docs/CONTROL-PROTOCOL.md).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
_users
fs_mount -o presenter_timeout=1
C=$(_mkcontainer com.example.presenters)
chmod 755 "$C" "$C/Documents"
F=$C/Documents/f
SF=$TEST_STORE/containers/com.example.presenters/Documents/f
echo data >"$F"
chmod 666 "$F"       # every user may read (present) and write it: only presenters refuse

# MARK: a watcher killed with SIGKILL is dropped
_watch killed "$F"
_assert_ok timeout 5 sh -c "echo one >'$F'"
_wait_for 10 eval '_events killed | grep -q "^didChange"' || _fail "watch killed: no didChange: $(_events killed)"
_assert_output $'request relinquishToWriter f\ndidChange f' eval "_events killed '$C/Documents' | uniq"
_unwatch killed KILL
_assert_ok timeout 2 sh -c "echo two >'$F'"
_assert_ok timeout 2 fsop open "$F" O_RDONLY
_wait_for 10 eval '(($(_presenter_count "$F") == 0))' || _fail "the killed watcher is still listed: $(_presenters)"
_ok "the killed watcher is no longer listed"

# MARK: a stopped watcher is skipped at the deadline, then told to resync
_watch stopped "$F"
kill -STOP "${_WATCH_PID[stopped]}"
t0=$(date +%s%N)
_assert_ok timeout 10 sh -c "echo three >'$F'"
ms=$((($(date +%s%N) - t0) / 1000000))
((ms >= 900 && ms < 8000)) || _fail "write with a stopped presenter took $ms ms (presenter_timeout=1)"
_ok "write with a stopped presenter proceeded after $ms ms"
_assert_output "three" cat "$SF"
kill -CONT "${_WATCH_PID[stopped]}"
_wait_for 10 eval '_events stopped | grep -q "^resync"' || _fail "no resync after SIGCONT: $(_events stopped)"
_ok "the stopped watcher got resync"
_unwatch stopped

# MARK: a refusing watcher of root: every caller's access fails with its errno
_watch root-refuses "$F" --refuse 16
_assert_errno EBUSY timeout 5 fsop open "$F" O_WRONLY
_assert_errno EBUSY timeout 5 fsop open "$F" "O_WRONLY|O_TRUNC"
_assert_errno EBUSY timeout 5 sh -c "echo x >'$F'"
_assert_errno EBUSY timeout 5 fsop open "$F" O_RDONLY
_assert_errno EBUSY _as_user "$U1" timeout 5 fsop open "$F" O_WRONLY
_assert_errno EBUSY _as_user "$U2" timeout 5 sh -c "echo x >'$F'"
_assert_output "three" cat "$SF"
_unwatch root-refuses
_watch root-eacces "$F" --refuse 13
_assert_errno EACCES timeout 5 fsop open "$F" O_WRONLY
_assert_errno EACCES _as_user "$U1" timeout 5 fsop open "$F" O_WRONLY
_unwatch root-eacces KILL
_assert_ok timeout 2 fsop open "$F" O_WRONLY

# MARK: a refusing watcher of another user is told, never obeyed
_watch_as "$U2" u2-refuses "$F" --refuse 16
_assert_ok _as_user "$U1" timeout 5 sh -c "echo by-u1 >'$F'"
_assert_output "by-u1" cat "$SF"
_assert_ok timeout 5 sh -c "echo by-root >'$F'"
_assert_output "by-root" cat "$SF"
_assert_errno EBUSY _as_user "$U2" timeout 5 sh -c "echo by-u2 >'$F'"    # its own user: obeyed
_assert_output "by-root" cat "$SF"
_wait_for 10 eval '(($(_events u2-refuses | grep -c "^didChange") >= 2))' || _fail "the other user's watcher was not told: $(_events u2-refuses)"
_ok "the other user's watcher was told of the changes (didChange)"
# Killed, it stops refusing its own user at once.
_unwatch u2-refuses KILL
_assert_ok _as_user "$U2" timeout 2 sh -c "echo by-u2 >'$F'"
_assert_output "by-u2" cat "$SF"

# MARK: the same from the other side: U1's refusal binds U1 only
_watch_as "$U1" u1-refuses "$F" --refuse 16
_assert_errno EBUSY _as_user "$U1" timeout 5 fsop open "$F" O_WRONLY
_assert_ok _as_user "$U2" timeout 5 fsop open "$F" O_WRONLY
_assert_ok timeout 5 fsop open "$F" O_WRONLY
_unwatch u1-refuses KILL
_assert_ok _as_user "$U1" timeout 2 fsop open "$F" O_WRONLY
fs_umount
