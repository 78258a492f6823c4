# Writes do not cost a second round trip (issue 3; DESIGN.md 24): with
# FUSE_HANDLE_KILLPRIV_V2 negotiated through the channel tap, the kernel stops asking for
# `security.capability` (GETXATTR) before every write(2). Counted with the kernel's own
# fuse:fuse_request_send tracepoint in a private tracefs instance, for this mount's
# connection only: 200 writes by root and 200 by another user to one open file each send
# exactly 200 WRITE requests and at most one GETXATTR per file (the first write may ask).
# Without the flag the count is 200 GETXATTR per file.
. "$(dirname "$0")/../lib/common.sh"
_require_root
TRACING=/sys/kernel/tracing
[[ -d $TRACING/events ]] || mount -t tracefs nodev "$TRACING" 2>/dev/null || true
[[ -d $TRACING/events/fuse ]] || _skip "no fuse tracepoints in $TRACING"
_users
fs_mount
C=$(_mkcontainer com.example.killpriv)
chmod 755 "$C"
D=$C/Documents
chmod 777 "$D"

INSTANCE=$TRACING/instances/containerfs-test-$$
mkdir "$INSTANCE" || _skip "cannot make a tracefs instance"
_end_trace() {   # then the usual clean-up, with the case's exit status
    local rc=$?
    set +e
    echo 0 >"$INSTANCE/events/fuse/fuse_request_send/enable" 2>/dev/null
    rmdir "$INSTANCE" 2>/dev/null
    (exit "$rc")
    _cfs_cleanup
}
trap _end_trace EXIT
# The connection id the tracepoint prints is the mount's device number (major 0).
conn=$(mountpoint -d "$TEST_MNT" | cut -d: -f2)
echo "connection == $conn" >"$INSTANCE/events/fuse/fuse_request_send/filter"

count() {   # count OPCODE_NAME: requests of that kind since the last reset
    grep -c "($1)" "$INSTANCE/trace" || true
}

write_200() {   # write_200 FILE: one open, 200 pwrites of 4 KiB
    "$PY" - "$1" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o666)
for i in range(200):
    os.pwrite(fd, b"x" * 4096, (i % 16) * 4096)
os.close(fd)
EOF
}

for who in root "$U1"; do
    f=$D/by-$who
    : >"$f" && chmod 666 "$f"
    echo >"$INSTANCE/trace"
    echo 1 >"$INSTANCE/events/fuse/fuse_request_send/enable"
    if [[ $who == root ]]; then write_200 "$f"; else _as_user "$who" bash -c "$(declare -f write_200); PY=$PY write_200 $f"; fi
    echo 0 >"$INSTANCE/events/fuse/fuse_request_send/enable"
    _assert_eq 200 "$(count FUSE_WRITE)" "WRITE requests for 200 writes by $who"
    getxattr=$(count FUSE_GETXATTR)
    ((getxattr <= 1)) || _fail "200 writes by $who sent $getxattr GETXATTR requests (security.capability is asked before every write)"
    _ok "200 writes by $who: 200 WRITE, $getxattr GETXATTR"
done
_assert_eq 65536 "$(stat -c %s "$D/by-$U1")" "size after the other user's writes"
fs_umount
