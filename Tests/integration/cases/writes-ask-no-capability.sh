# Writes do not cost a second round trip (issue 3; DESIGN.md 24): with
# FUSE_HANDLE_KILLPRIV_V2 negotiated through the channel tap, the kernel stops asking for
# `security.capability` (GETXATTR) before every write(2). Counted with the kernel's own
# fuse:fuse_request_send tracepoint in a private tracefs instance, for this mount's
# connection only: 200 writes by root and 200 by another user to one open file each send
# exactly 200 WRITE requests and at most one GETXATTR per file (the first write may ask).
# Without the flag the count is 200 GETXATTR per file.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/fusetrace.sh"
_users
fs_mount
D=$(_open_documents com.example.killpriv)

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
    _trace_begin "$TEST_MNT"
    if [[ $who == root ]]; then write_200 "$f"; else _as_user "$who" bash -c "$(declare -f write_200); PY=$PY write_200 $f"; fi
    _trace_end
    _assert_eq 200 "$(_trace_count FUSE_WRITE)" "WRITE requests for 200 writes by $who"
    getxattr=$(_trace_count FUSE_GETXATTR)
    ((getxattr <= 1)) || _fail "200 writes by $who sent $getxattr GETXATTR requests (security.capability is asked before every write)"
    _ok "200 writes by $who: 200 WRITE, $getxattr GETXATTR"
done
_assert_eq 65536 "$(stat -c %s "$D/by-$U1")" "size after the other user's writes"
fs_umount
