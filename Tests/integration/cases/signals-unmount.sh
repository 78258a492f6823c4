# SIGTERM, SIGINT and SIGHUP make the daemon unmount cleanly and exit 0, for `-f` and for
# the background daemon, releasing the store at once (it mounts again); even a busy mount
# (a process inside it, a file open) goes away (docs/SEMANTICS.md §2, issue 2).
. "$(dirname "$0")/../lib/common.sh"
S=$TEST_STORE M=$TEST_MNT

for sig in TERM INT HUP; do
    fs_mount
    mkdir -p "$M/containers/com.example.sig/Documents/d" 2>/dev/null || true
    echo "$sig" >"$M/containers/com.example.sig/Documents/last-signal"
    pid=$(_daemon_pid "$M")
    kill -s "$sig" "$pid"
    _wait_for 10 eval '! _is_mounted "$M"' || _fail "SIG$sig: still mounted after 10 s"
    _wait_daemon "$M"     # exits, with status 0
    _ok "SIG$sig: unmounted, daemon exited 0"
    _assert_output "$sig" cat "$S/containers/com.example.sig/Documents/last-signal"
done

# The background daemon (`containerfs mount` without -f): its pid is in the store's lock.
_assert_ok containerfs mount "$S" "$M"
pid=$(grep -o '[0-9][0-9]*' "$S/.lock" | head -1)
[[ -n $pid ]] && _pid_running "$pid" || _fail "no daemon pid in $S/.lock: $(cat "$S/.lock")"
kill -TERM "$pid"
_wait_for 10 eval '! _is_mounted "$M"' || _fail "background daemon: still mounted after SIGTERM"
_wait_for 10 eval '! _pid_running $pid' || _fail "background daemon: still running after SIGTERM"
_ok "background daemon: SIGTERM unmounted"
_assert_ok containerfs mount "$S" "$M"           # the lock was released
_assert_ok containerfs unmount "$M"

# A busy mount: a process with its working directory inside and an open file.
fs_mount
D=$M/containers/com.example.sig/Documents
(cd "$D" && exec sleep 30) &
holder=$!
exec 7<"$D/last-signal"
sleep 0.2
pid=$(_daemon_pid "$M")
kill -TERM "$pid"
_wait_for 10 eval '! _is_mounted "$M"' || _fail "busy mount: still mounted 10 s after SIGTERM"
_wait_daemon "$M"
_ok "busy mount: detached and the daemon exited 0"
exec 7<&-
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
fs_mount                                          # and the store mounts again
_assert_output "HUP" cat "$D/last-signal"
fs_umount
