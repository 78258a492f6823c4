# close(2) costs no round trip (issue 3; DESIGN.md 30): every handle is opened with
# FOPEN_NOFLUSH, so the kernel sends no FLUSH when a descriptor is closed, whatever the open
# (create, read-only, write-only, read-write, append, O_DIRECT, a locked descriptor and its
# dup), with or without `-o passthrough`. Counted with the kernel's fuse:fuse_request_send
# tracepoint for this mount only. A POSIX lock still goes with the close of a dup while its
# process lives (the kernel keeps locks; `locks` tests the rest). Positive control: under
# `-o writeback` the kernel ignores FOPEN_NOFLUSH and sends one FLUSH per close, so the same
# script must count them there.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/fusetrace.sh"

opens_and_closes() {   # opens_and_closes DIR: 142 opens and 165 closes; prints closes
    "$PY" - "$1" <<'EOF'
import fcntl, os, subprocess, sys
d = sys.argv[1]
closes = 0

def other_can_lock(path, held):
    """Another process tries the lock without waiting. Counts its closes: its own descriptor,
    and at its exec the `held` descriptors of ours it inherited (close-on-exec)."""
    global closes
    closes += 1 + held
    code = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
            "try:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n    sys.exit(1)")
    return subprocess.run([sys.executable, "-c", code, path]).returncode == 0

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
    if i == 0:
        assert not other_can_lock(f"{d}/new0", held=2), "another process took a held lock"
    os.close(dup); closes += 1
    if i == 0:
        assert other_can_lock(f"{d}/new0", held=1), "the lock outlived the close of a dup"
    os.close(fd); closes += 1
print(closes)
EOF
}

for mode in default passthrough writeback; do
    if [[ $mode == default ]]; then fs_mount; else fs_mount -o "$mode"; fi
    C=$(_mkcontainer com.example.noflush.$mode)
    _trace_begin "$TEST_MNT"
    closes=$(opens_and_closes "$C/Documents") || _fail "$mode: opens and closes failed"
    _trace_end
    _assert_eq 165 "$closes" "$mode: descriptors closed"
    flushes=$(_trace_count FUSE_FLUSH)
    opens=$(( $(_trace_count FUSE_OPEN) + $(_trace_count FUSE_CREATE) ))
    _assert_eq 142 "$opens" "$mode: OPEN and CREATE requests"
    if [[ $mode == writeback ]]; then
        # The control: the tracepoint sees FLUSH where the kernel sends it.
        _assert_eq 165 "$flushes" "FLUSH requests for 165 closes under -o writeback"
    else
        _assert_eq 0 "$flushes" "$mode: FLUSH requests for 165 closes"
    fi
    fs_umount
done
