# systemd's Type=notify: a daemon started in the foreground with NOTIFY_SOCKET sends one
# datagram, READY=1 (and MAINPID), once the mount is live, and not before; with -o syslog it
# logs to syslog too (RFC 3164 datagrams, facility daemon). Both are served here by sockets
# of the test's own: systemd and journald themselves cannot run in CI (README,
# "Troubleshooting", for the manual check with a real unit).
. "$(dirname "$0")/../lib/common.sh"
M=$TEST_MNT S=$TEST_STORE
"$PY" - "$TEST_TMP/notify" "$TEST_TMP/syslog" "$M" >"$TEST_TMP/got" 2>&1 <<'PYEOF' &
import os, socket, sys, time
n = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); n.bind(sys.argv[1])
l = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); l.bind(sys.argv[2])
mnt = sys.argv[3]
n.settimeout(30)
msg = n.recv(4096).decode()
mounted = any(line.split()[4] == mnt for line in open("/proc/self/mountinfo"))
print("notify:", msg.replace("\n", " ").strip(), "| mounted then:", mounted, flush=True)
l.settimeout(5)
try:
    while True:
        print("syslog:", l.recv(4096).decode(), flush=True)
except socket.timeout:
    pass
PYEOF
listener=$!
_wait_for 10 test -S "$TEST_TMP/syslog" || _fail "the test's sockets are missing"
NOTIFY_SOCKET=$TEST_TMP/notify CONTAINERFS_SYSLOG_SOCKET=$TEST_TMP/syslog fs_mount -o syslog
pid=$(_daemon_pid)
wait $listener
cat "$TEST_TMP/got"
_assert_eq "notify: READY=1 MAINPID=$pid | mounted then: True" "$(grep '^notify:' "$TEST_TMP/got")" "one READY=1 datagram, once mounted"
grep -qxF "syslog: <30>containerfs[$pid]: containerfs.mount: $M: mounted $S" "$TEST_TMP/got" ||
    _fail "no syslog line of the mount: $(cat "$TEST_TMP/got")"
fs_umount
