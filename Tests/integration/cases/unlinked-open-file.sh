# A file unlinked (or renamed over) while open stays readable and writable through its
# descriptors, reports st_nlink 0, and leaves nothing behind: no .fuse_hidden* file on the
# mount or in the store, before or after close (the daemon keeps the backing descriptor).
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.unlinked)
D=$C/Documents
SD=$TEST_STORE/containers/com.example.unlinked/Documents

"$PY" - "$D" "$SD" <<'EOF'
import mmap, os, subprocess, sys
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
D, SD = sys.argv[1], sys.argv[2]
def hidden():
    names = []
    for root in (D, SD):
        for dirpath, dirs, files in os.walk(root):
            names += [n for n in files + dirs if n.startswith(".fuse_hidden")]
    return names

f = os.path.join(D, "doomed")
data = os.urandom(300000)
write_file(f, data)
fd = os.open(f, os.O_RDWR)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED)
ok("unlink while open", os.unlink, f)
err("the name is gone", "ENOENT", os.stat, f)
eq("not listed", "doomed" in os.listdir(D), False)
eq("no .fuse_hidden files", hidden(), [])
eq("fstat nlink", os.fstat(fd).st_nlink, 0)
eq("fstat size", os.fstat(fd).st_size, 300000)
eq("still readable", os.pread(fd, 300000, 0) == data, True)
eq("mapping still readable", m[:16], data[:16])
eq("still writable", os.pwrite(fd, b"more", 300000), 4)
eq("reads what it wrote", os.pread(fd, 4, 300000), b"more")
ok("ftruncate works", os.ftruncate, fd, 10)
eq("fstat after ftruncate", os.fstat(fd).st_size, 10)
ok("fchmod works", os.fchmod, fd, 0o600)
ok("fsync works", os.fsync, fd)
# Another process reaches it through /proc (the descriptor is all that is left).
r = subprocess.run(["cat", "/proc/%d/fd/%d" % (os.getpid(), fd)], capture_output=True)
eq("another process reads it through /proc", r.stdout, data[:10])
m.close()
os.close(fd)
eq("no .fuse_hidden files after close", hidden(), [])

# Renamed over while open: the old file lives on in its descriptor.
write_file(os.path.join(D, "a"), b"old contents")
write_file(os.path.join(D, "b"), b"new contents")
fd = os.open(os.path.join(D, "a"), os.O_RDONLY)
os.rename(os.path.join(D, "b"), os.path.join(D, "a"))
eq("descriptor keeps the replaced file", os.pread(fd, 100, 0), b"old contents")
eq("the name has the new one", read_file(os.path.join(D, "a")), b"new contents")
eq("replaced file has no links", os.fstat(fd).st_nlink, 0)
os.close(fd)
eq("no .fuse_hidden files", hidden(), [])

# A directory removed while a process is inside it.
os.mkdir(os.path.join(D, "gone"))
dfd = os.open(os.path.join(D, "gone"), os.O_RDONLY | os.O_DIRECTORY)
os.rmdir(os.path.join(D, "gone"))
eq("listing a removed directory", os.listdir(dfd), [])
err("creating in a removed directory", "ENOENT", os.open, "x", os.O_CREAT | os.O_WRONLY, dir_fd=dfd)
os.close(dfd)
done()
EOF
_assert_output "" sh -c "find '$TEST_STORE' '$TEST_MNT' -name '.fuse_hidden*'"
