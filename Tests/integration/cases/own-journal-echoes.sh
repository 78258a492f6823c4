# The daemon's own changes are never taken for outside changes (DESIGN.md 59: the watcher
# drops events by pid): a journal's life through the mount, made, given its owner
# (`fchown`, as SQLite does to each journal when run as root), written, synced, closed and
# removed, 200 times under one name, under `-o writeback`, where an outside change of a
# file drops its entry (an edit in the store must show through a new inode). The watcher's
# own tally at unmount must count exactly the two changes this case makes in the store
# (the echo-matching inotify watcher took some of the journal's echoes for outside changes,
# 0-20 extra LOOKUPs; the LOOKUPs are printed, not asserted: the kernel sends one or two
# more now and then whatever the watcher does).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/fusetrace.sh"
fs_mount -o writeback
C=$(_mkcontainer com.example.journal)
D=$C/Documents
stat "$D" >/dev/null                 # looked up before the count begins
_trace_begin "$TEST_MNT"
"$PY" - "$D" <<'PYEOF'
import os, sys
d = sys.argv[1]
for i in range(200):
    fd = os.open(f"{d}/db-journal", os.O_RDWR | os.O_CREAT, 0o644)
    os.fchown(fd, os.getuid(), os.getgid())
    os.write(fd, b"x" * 4096)
    os.fsync(fd)
    os.close(fd)
    os.unlink(f"{d}/db-journal")
PYEOF
_trace_end
creates=$(_trace_count FUSE_CREATE)
lookups=$(_trace_count FUSE_LOOKUP)
_assert_eq 200 "$creates" "CREATE requests for 200 journals"
_ok "200 journals made, written and removed: $lookups LOOKUP requests"
# The other side: an outside change of a journal-like file is still seen.
echo "made outside" >"$TEST_STORE/containers/com.example.journal/Documents/db-journal"
_wait_for 10 test -e "$D/db-journal" || _fail "a file made in the store is not seen through the mount"
_assert_output "made outside" cat "$D/db-journal"
chmod 600 "$TEST_STORE/containers/com.example.journal/Documents/db-journal"
_wait_for 10 eval '[[ $(stat -c %a "$D/db-journal") == 600 ]]' || _fail "a chmod in the store is not seen: $(stat -c %a "$D/db-journal")"
_ok "chmod in the store seen through the mount"
fs_umount
# Exactly the two changes made in the store were taken for outside changes.
_assert_ok grep -q "the daemon's own, 2 outside changes of the store" "$TEST_TMP/daemon.$_CFS_N.log"
_ok "$(grep -o "fanotify watcher: .*" "$TEST_TMP/daemon.$_CFS_N.log")"
