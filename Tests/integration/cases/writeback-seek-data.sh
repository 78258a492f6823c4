# Under -o writeback, SEEK_DATA and SEEK_HOLE never call held data a hole (DESIGN.md 22).
# The kernel sends LSEEK without writing its dirty pages back first, and the backing file
# had not seen them: 4 KiB written at 1 MiB, then SEEK_DATA from 0 failed with ENXIO (the
# store's file was still empty), as did SEEK_HOLE; a copy by a sparse-aware program would
# have lost the data (found by stress-ng's seek stressor). Under writeback the daemon
# leaves LSEEK to the kernel, which seeks by its own size, all of it data. The default
# mount answers by the store, holes included (posix-files).
. "$(dirname "$0")/../lib/common.sh"
fs_mount -o writeback
C=$(_mkcontainer com.example.wb-seek)
D=$C/Documents

_assert_output "size 1052672; data from 0: 0; hole from 0: 1052672; data from 1048586: 1048586; data from 1052672: ENXIO; copy equal" \
    "$PY" - "$D" <<'PY'
import errno, os, subprocess, sys
d = sys.argv[1]
p, q = os.path.join(d, "f"), os.path.join(d, "copy")
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(fd, b"x" * 4096, 1 << 20)          # held by the kernel, not in the store yet
out = ["size %d" % os.fstat(fd).st_size]
for name, whence, offset in (("data", os.SEEK_DATA, 0), ("hole", os.SEEK_HOLE, 0),
                             ("data", os.SEEK_DATA, (1 << 20) + 10), ("data", os.SEEK_DATA, 1052672)):
    try:
        out.append("%s from %d: %d" % (name, offset, os.lseek(fd, offset, whence)))
    except OSError as e:
        out.append("%s from %d: %s" % (name, offset, errno.errorcode[e.errno]))
subprocess.run(["cp", "--sparse=always", p, q], check=True)
with open(q, "rb") as c:
    out.append("copy equal" if c.read() == os.pread(fd, 2 << 20, 0) else "copy differs")
os.close(fd)
print("; ".join(out))
PY
fs_umount
