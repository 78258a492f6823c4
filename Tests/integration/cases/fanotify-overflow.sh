# timeout: 180
# When the store watcher's queue overflows (more than fs.fanotify.max_queued_events unread),
# every item the kernel holds is invalidated, and with each directory marked the store is
# walked again, so that directories made while events were being lost get their marks
# (DESIGN.md 59). The daemon is stopped (SIGSTOP) while the store makes 40,000 files in a
# marked directory, appends to a file the kernel holds and makes a directory with a file in
# it; once it runs again, the append shows, and so does a change made later in the new
# directory: without the second walk that directory stayed unmarked and the change unseen.
. "$(dirname "$0")/../lib/common.sh"
_require_root
queue=$(cat /proc/sys/fs/fanotify/max_queued_events)
((queue < 40000)) || _skip "fs.fanotify.max_queued_events is $queue: 40,000 events do not overflow it"
fs_mount
log="$TEST_TMP/daemon.$_CFS_N.log"
_assert_ok _wait_for 5 grep -q "marking each directory of the store" "$log"   # logged once the mount serves
D=$(_mkcontainer com.example.overflow)/Documents
SD=$TEST_STORE/containers/com.example.overflow/Documents
echo one >"$SD/f"
_assert_output "4" stat -c %s "$D/f"                # cached
pid=$(_daemon_pid)
kill -STOP "$pid"
"$PY" - "$SD" <<'PY'
import os, sys
d = sys.argv[1]
os.mkdir(d + "/flood")
for i in range(40000):
    os.close(os.open("%s/flood-%d" % (d, i), os.O_CREAT | os.O_WRONLY, 0o644))
with open(d + "/f", "a") as f:
    f.write("two\n")
os.mkdir(d + "/late")
with open(d + "/late/x", "w") as f:
    f.write("x\n")
PY
kill -CONT "$pid"
_wait_for 20 grep -q "fanotify queue overflowed" "$log" || _fail "no overflow logged after 40,000 events with a queue of $queue"
_ok "the queue overflowed"
_wait_for 2 eval '[[ $(stat -c %s "$D/f") == 8 ]]' || _fail "$D/f: $(stat -c %s "$D/f") bytes after the overflow, the store 8"
_ok "the append made while events were lost shows"
_assert_output "2" stat -c %s "$D/late/x"          # cached
echo "more" >>"$SD/late/x"
_wait_for 2 eval '[[ $(stat -c %s "$D/late/x") == 7 ]]' || _fail "$D/late/x: $(stat -c %s "$D/late/x") bytes, the store 7: the directory made during the overflow is not marked"
_ok "a change in a directory made while events were lost shows"
fs_umount
