# close(2) costs no round trip (issue 3; DESIGN.md 30): every handle is opened with
# FOPEN_NOFLUSH, so the kernel sends no FLUSH when a descriptor is closed, whatever the open
# (create, read-only, write-only, read-write, append, O_DIRECT, dup'd descriptors). Counted with
# the kernel's fuse:fuse_request_send tracepoint for this mount only. Positive control: under
# `-o writeback` the kernel ignores FOPEN_NOFLUSH and sends one FLUSH per close, so the same
# script must count them there. Locks still go with close (the kernel keeps POSIX locks;
# `locks` tests the rest).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/fusetrace.sh"

opens_and_closes() {   # opens_and_closes DIR: 7 kinds of open × 20, each closed; prints closes
    "$PY" - "$1" <<'EOF'
import fcntl, os, sys
d = sys.argv[1]
closes = 0
for i in range(20):
    fd = os.open(f"{d}/new{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"x" * 100)
    os.close(fd); closes += 1
    for flags in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND, os.O_RDONLY | os.O_DIRECT):
        fd = os.open(f"{d}/new{i}", flags)
        if flags == os.O_RDONLY:
            assert os.read(fd, 200) == b"x" * 100
        os.close(fd); closes += 1
    fd = os.open(f"{d}/new{i}", os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    dup = os.dup(fd)
    os.close(dup); os.close(fd); closes += 2
print(closes)
EOF
}

for mode in default writeback; do
    if [[ $mode == default ]]; then fs_mount; else fs_mount -o writeback; fi
    C=$(_mkcontainer com.example.noflush.$mode)
    _trace_begin "$TEST_MNT"
    closes=$(opens_and_closes "$C/Documents") || _fail "$mode: opens and closes failed"
    _trace_end
    _assert_eq 160 "$closes" "$mode: descriptors closed"
    flushes=$(_trace_count FUSE_FLUSH)
    opens=$(( $(_trace_count FUSE_OPEN) + $(_trace_count FUSE_CREATE) ))
    _assert_eq 140 "$opens" "$mode: OPEN and CREATE requests"
    if [[ $mode == default ]]; then
        _assert_eq 0 "$flushes" "FLUSH requests for 160 closes"
    else
        # The control: the tracepoint sees FLUSH where the kernel sends it.
        _assert_eq 160 "$flushes" "FLUSH requests for 160 closes under -o writeback"
    fi
    # Locks went with the close: another process takes the lock at once.
    "$PY" -c 'import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)' "$C/Documents/new0" ||
        _fail "$mode: the lock outlived its descriptors"
    _ok "$mode: the lock went with close"
    fs_umount
done
