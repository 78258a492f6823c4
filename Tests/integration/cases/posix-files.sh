# Writable areas are a full POSIX file system (issue 2): open with every flag (O_EXCL,
# O_TRUNC, O_APPEND, O_DIRECT never fails), read, write, truncate, fallocate,
# copy_file_range, lseek SEEK_DATA/SEEK_HOLE, fsync and fsyncdir, mkdir, rmdir, unlink,
# rename over, symlink, readlink, chmod, chown, utimens (UTIME_NOW/OMIT), FIFOs and Unix
# sockets. Data-layout answers (holes, allocation) are compared with the same calls on the
# store's own file system.
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.posix)
REF=$TEST_TMP/ref
mkdir -p "$REF"

"$PY" - "$C/Documents" "$REF" <<'EOF'
import ctypes, hashlib, mmap, os, socket, stat, sys, threading, time
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *

D, REF = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 1, 2, 0x10

def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(length)) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))

def p(name):
    return os.path.join(D, name)

# MARK: open flags
f = p("f")
fd = ok("O_CREAT|O_EXCL new", os.open, f, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o640)
eq("write", os.write(fd, b"hello"), 5)
eq("fstat size", os.fstat(fd).st_size, 5)
eq("stat size (another path)", os.stat(f).st_size, 5)
eq("mode", stat.S_IMODE(os.stat(f).st_mode), 0o640 & ~0o022)
os.close(fd)
err("O_CREAT|O_EXCL existing", "EEXIST", os.open, f, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
os.close(ok("O_CREAT existing", os.open, f, os.O_CREAT | os.O_WRONLY))
eq("O_CREAT keeps data", read_file(f), b"hello")
os.close(ok("O_WRONLY|O_TRUNC", os.open, f, os.O_WRONLY | os.O_TRUNC))
eq("truncated", (os.stat(f).st_size, read_file(f)), (0, b""))
write_file(f, b"ab")
fd1 = os.open(f, os.O_WRONLY | os.O_APPEND)
fd2 = os.open(f, os.O_WRONLY | os.O_APPEND)
os.write(fd1, b"cd"); os.write(fd2, b"ef"); os.write(fd1, b"gh")
os.pwrite(fd2, b"ij", 0)  # Linux: pwrite on O_APPEND appends
os.close(fd1); os.close(fd2)
eq("O_APPEND from two descriptors", read_file(f), b"abcdefghij")
fd = os.open(f, os.O_RDWR | os.O_APPEND)
os.lseek(fd, 0, os.SEEK_SET); os.write(fd, b"k")
eq("O_APPEND ignores the offset", read_file(f), b"abcdefghijk")
os.close(fd)
os.close(ok("O_SYNC", os.open, f, os.O_WRONLY | os.O_SYNC))
os.close(ok("O_DSYNC", os.open, f, os.O_WRONLY | os.O_DSYNC))
os.close(ok("O_NOATIME (owner)", os.open, f, os.O_RDONLY | os.O_NOATIME))
os.close(ok("O_NONBLOCK", os.open, f, os.O_RDONLY | os.O_NONBLOCK))
fd = ok("O_PATH", os.open, f, os.O_PATH)
eq("fstat of O_PATH", os.fstat(fd).st_size, 11); os.close(fd)
err("O_DIRECTORY on a file", "ENOTDIR", os.open, f, os.O_RDONLY | os.O_DIRECTORY)
err("O_WRONLY on a directory", "EISDIR", os.open, D, os.O_WRONLY)

# O_DIRECT must not fail; aligned and unaligned I/O both work (FUSE direct_io).
g = p("direct")
fd = ok("O_DIRECT|O_CREAT", os.open, g, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
if fd is not None:
    buf = mmap.mmap(-1, 8192)
    buf.write(b"D" * 8192)
    eq("O_DIRECT aligned write", os.pwritev(fd, [buf], 0), 8192)
    rbuf = mmap.mmap(-1, 8192)
    eq("O_DIRECT aligned read", os.preadv(fd, [rbuf], 0), 8192)
    eq("O_DIRECT data", rbuf[:8192], b"D" * 8192)
    eq("O_DIRECT unaligned write", os.pwrite(fd, b"xyz", 3), 3)
    eq("O_DIRECT unaligned read", os.pread(fd, 5, 1), b"DDxyz")
    # A shared mapping of an uncached handle (FUSE_DIRECT_IO_ALLOW_MMAP; ENODEV without).
    def map_and_write():
        with mmap.mmap(fd, 8192, mmap.MAP_SHARED) as m:
            m[6:9] = b"map"
            m.flush()
        return os.pread(fd, 9, 0)
    eq("O_DIRECT shared mapping", ok("mmap(MAP_SHARED) of an O_DIRECT descriptor", map_and_write), b"DDDxyzmap")
    os.close(fd)
os.close(ok("O_DIRECT on an existing file, read-only", os.open, g, os.O_RDONLY | os.O_DIRECT))
eq("buffered view of O_DIRECT data", read_file(g)[:9], b"DDDxyzmap")

# MARK: read, write, holes
h = p("sparse")
fd = os.open(h, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"end", 1 << 20)
eq("size after write past EOF", os.fstat(fd).st_size, (1 << 20) + 3)
eq("hole reads zeros", os.pread(fd, 4, 4096), b"\0" * 4)
eq("short read at EOF", os.pread(fd, 100, 1 << 20), b"end")
eq("read past EOF", os.pread(fd, 10, 2 << 20), b"")
os.close(fd)

big = os.urandom(8 << 20)
write_file(p("big"), big)
eq("8 MiB round trip", hashlib.sha256(read_file(p("big"))).hexdigest(), hashlib.sha256(big).hexdigest())

# MARK: truncate
t = p("t")
write_file(t, b"0123456789")
fd = os.open(t, os.O_RDWR)
ok("ftruncate shrink", os.ftruncate, fd, 4)
eq("after ftruncate", os.pread(fd, 100, 0), b"0123")
ok("truncate grow by path", os.truncate, t, 8)
eq("grown with zeros", os.pread(fd, 100, 0), b"0123\0\0\0\0")
eq("fstat sees the path truncate", os.fstat(fd).st_size, 8)
os.close(fd)
err("truncate negative", "EINVAL", os.truncate, t, -1)
err("truncate directory", "EISDIR", os.truncate, D, 0)

# MARK: fallocate, SEEK_DATA/SEEK_HOLE, st_blocks: the same answers as the store's disk
def layout(root):
    q = os.path.join(root, "alloc")
    fd = os.open(q, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    out = []
    os.posix_fallocate(fd, 0, 1 << 20)
    out.append(("posix_fallocate", os.fstat(fd).st_size, os.fstat(fd).st_blocks))
    fallocate(fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20)
    out.append(("KEEP_SIZE", os.fstat(fd).st_size, os.fstat(fd).st_blocks))
    os.pwrite(fd, b"x" * 8192, 0)
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096)
    out.append(("PUNCH_HOLE", os.fstat(fd).st_size, os.fstat(fd).st_blocks, os.pread(fd, 8192, 0).count(b"\0")))
    fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, 100)
    out.append(("ZERO_RANGE", os.pread(fd, 101, 0).count(b"\0")))
    try:
        fallocate(fd, 0x4, 0, 1)   # an unknown mode
        out.append(("bad mode", "OK"))
    except OSError as e:
        out.append(("bad mode", errno.errorcode[e.errno]))
    os.close(fd)
    q = os.path.join(root, "holes")
    fd = os.open(q, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, b"a" * 4096, 0)
    os.pwrite(fd, b"b" * 4096, 1 << 20)
    os.fsync(fd)
    seeks = []
    for whence, name in ((os.SEEK_HOLE, "HOLE"), (os.SEEK_DATA, "DATA")):
        for off in (0, 4096, 8192, 1 << 20, (1 << 20) + 4096, 3 << 20):
            try:
                seeks.append((name, off, os.lseek(fd, off, whence)))
            except OSError as e:
                seeks.append((name, off, errno.errorcode[e.errno]))
    out.append(("seeks", seeks))
    os.close(fd)
    return out

mine, theirs = layout(D), layout(REF)
for a, b in zip(mine, theirs):
    eq("fallocate/lseek: " + a[0], a, b)

# MARK: copy_file_range
src, dst = p("cfr-src"), p("cfr-dst")
data = os.urandom(3 << 20)
write_file(src, data)
fi, fo = os.open(src, os.O_RDONLY), os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
n, total = 0, 0
while total < len(data):
    n = os.copy_file_range(fi, fo, len(data) - total, total, total)
    if n == 0:
        break
    total += n
eq("copy_file_range copied", total, len(data))
eq("copy_file_range at offsets", os.copy_file_range(fi, fo, 10, 5, (4 << 20)), 10)
os.close(fi); os.close(fo)
got = read_file(dst)
eq("copy_file_range data", hashlib.sha256(got[:len(data)]).hexdigest(), hashlib.sha256(data).hexdigest())
eq("copy_file_range tail", (len(got), got[4 << 20:]), ((4 << 20) + 10, data[5:15]))

# MARK: fsync, fdatasync, fsyncdir
fd = os.open(f, os.O_RDWR)
ok("fsync", os.fsync, fd)
ok("fdatasync", os.fdatasync, fd)
os.close(fd)
fd = os.open(D, os.O_RDONLY | os.O_DIRECTORY)
ok("fsyncdir", os.fsync, fd)
ok("fdatasync on a directory", os.fdatasync, fd)
os.close(fd)
ok("syncfs", libc.syncfs, os.open(D, os.O_RDONLY))

# MARK: directories
ok("mkdir", os.mkdir, p("d"), 0o750)
eq("mkdir mode", stat.S_IMODE(os.stat(p("d")).st_mode), 0o750)
err("mkdir existing", "EEXIST", os.mkdir, p("d"))
write_file(p("d/inner"), b"i")
err("rmdir non-empty", "ENOTEMPTY", os.rmdir, p("d"))
err("unlink a directory", "EISDIR", os.unlink, p("d"))
err("rmdir a file", "ENOTDIR", os.rmdir, p("d/inner"))
ok("unlink", os.unlink, p("d/inner"))
err("unlink again", "ENOENT", os.unlink, p("d/inner"))
ok("rmdir", os.rmdir, p("d"))
err("stat removed", "ENOENT", os.stat, p("d"))
ok("mkdir -p chain", os.makedirs, p("a/b/c/d/e"))
eq("nested listing", os.listdir(p("a/b/c/d")), ["e"])

# MARK: rename over
write_file(p("r1"), b"one")
write_file(p("r2"), b"two")
ino = os.stat(p("r1")).st_ino
fd_old = os.open(p("r2"), os.O_RDONLY)
ok("rename over a file", os.rename, p("r1"), p("r2"))
eq("new content", read_file(p("r2")), b"one")
eq("inode moved with the name", os.stat(p("r2")).st_ino, ino)
eq("the replaced file stays readable by its descriptor", os.pread(fd_old, 10, 0), b"two")
os.close(fd_old)
err("old name gone", "ENOENT", os.stat, p("r1"))
os.makedirs(p("rd1/x")); os.mkdir(p("rd2"))
ok("rename a directory over an empty one", os.rename, p("rd1"), p("rd2"))
eq("moved tree", os.listdir(p("rd2")), ["x"])
os.mkdir(p("rd3")); write_file(p("rd3/y"), b"")
err("rename over a non-empty directory", "ENOTEMPTY", os.rename, p("rd2"), p("rd3"))
err("rename a file over a directory", "EISDIR", os.rename, p("r2"), p("rd3"))
err("rename a directory over a file", "ENOTDIR", os.rename, p("rd3"), p("r2"))
err("rename into its own subdirectory", "EINVAL", os.rename, p("rd2"), p("rd2/x/in"))

# MARK: symlinks
ok("symlink relative", os.symlink, "r2", p("ln"))
eq("readlink", os.readlink(p("ln")), "r2")
eq("read through", read_file(p("ln")), b"one")
eq("lstat type", stat.S_ISLNK(os.lstat(p("ln")).st_mode), True)
eq("lstat size", os.lstat(p("ln")).st_size, 2)
ok("symlink dangling", os.symlink, "nowhere/at/all", p("dangling"))
err("stat dangling", "ENOENT", os.stat, p("dangling"))
eq("readlink dangling", os.readlink(p("dangling")), "nowhere/at/all")
ok("symlink to a directory", os.symlink, "rd2", p("dirlink"))
eq("list through it", os.listdir(p("dirlink")), ["x"])
long = "x" * 4095
ok("symlink 4095 bytes", os.symlink, long, p("longlink"))
eq("readlink 4095 bytes", os.readlink(p("longlink")), long)
err("readlink a file", "EINVAL", os.readlink, p("r2"))
err("O_NOFOLLOW", "ELOOP", os.open, p("ln"), os.O_RDONLY | os.O_NOFOLLOW)

# MARK: chmod, chown, utimens
ok("chmod", os.chmod, p("r2"), 0o4711)
eq("mode", stat.S_IMODE(os.stat(p("r2")).st_mode), 0o4711)
ok("chown", os.chown, p("r2"), 1234, 5678)
eq("owner", (os.stat(p("r2")).st_uid, os.stat(p("r2")).st_gid), (1234, 5678))
eq("chown cleared setuid", stat.S_IMODE(os.stat(p("r2")).st_mode), 0o711)
ok("lchown", os.lchown, p("ln"), 42, 43)
eq("lchown on the link", (os.lstat(p("ln")).st_uid, os.stat(p("r2")).st_uid), (42, 1234))
ok("utime explicit ns", os.utime, p("r2"), ns=(1_000_000_123, 2_000_000_456))
st = os.stat(p("r2"))
eq("atime/mtime ns", (st.st_atime_ns, st.st_mtime_ns), (1_000_000_123, 2_000_000_456))
class TS(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
def utimensat(path, a, m, flags=0):
    if libc.utimensat(-100, os.fsencode(path), (TS * 2)(a, m), flags) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
ok("UTIME_OMIT atime, explicit mtime", utimensat, p("r2"), TS(0, UTIME_OMIT), TS(77, 7))
st = os.stat(p("r2"))
eq("atime kept, mtime set", (st.st_atime_ns, st.st_mtime_ns), (1_000_000_123, 77_000_000_007))
before = time.time_ns()
ok("UTIME_NOW atime, UTIME_OMIT mtime", utimensat, p("r2"), TS(0, UTIME_NOW), TS(0, UTIME_OMIT))
st = os.stat(p("r2"))
true("atime now", st.st_atime_ns >= before - 10_000_000, "atime %d < %d" % (st.st_atime_ns, before))
eq("mtime kept", st.st_mtime_ns, 77_000_000_007)
ok("utimensat AT_SYMLINK_NOFOLLOW", utimensat, p("ln"), TS(5, 0), TS(6, 0), 0x100)
eq("link times", os.lstat(p("ln")).st_mtime_ns, 6_000_000_000)
eq("target mtime untouched", os.stat(p("r2")).st_mtime_ns, 77_000_000_007)

# MARK: write updates mtime and ctime as seen by another process at once
write_file(p("times"), b"a")
m0 = os.stat(p("times")).st_mtime_ns
time.sleep(0.02)
fd = os.open(p("times"), os.O_WRONLY)
os.write(fd, b"b")
os.close(fd)
true("mtime advanced after write", os.stat(p("times")).st_mtime_ns > m0)

# MARK: FIFOs and Unix sockets live in the kernel, named on the mount
ok("mkfifo", os.mkfifo, p("fifo"), 0o600)
def writer():
    with open(p("fifo"), "wb") as w:
        w.write(b"through the fifo")
th = threading.Thread(target=writer); th.start()
with open(p("fifo"), "rb") as r:
    eq("fifo data", r.read(), b"through the fifo")
th.join()
here = os.getcwd(); os.chdir(D)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ok("bind a Unix socket", srv.bind, "sock")
srv.listen(1)
cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ok("connect", cli.connect, "sock")
conn, _ = srv.accept()
cli.sendall(b"ping"); eq("socket data", conn.recv(4), b"ping")
for s in (conn, cli, srv): s.close()
eq("socket type", stat.S_ISSOCK(os.lstat("sock").st_mode), True)
os.chdir(here)

# MARK: names
ok("255-byte name", write_file, p("n" * 255), b"")
err("256-byte name", "ENAMETOOLONG", os.open, p("n" * 256), os.O_CREAT | os.O_WRONLY)
err("256-byte mkdir", "ENAMETOOLONG", os.mkdir, p("n" * 256))
for odd in ("with space", "-leading-dash", "new\nline", "tab\there", "back\\slash", "quote'\"", "*?[glob]", ".hidden", "._appledouble", "..dots"):
    ok("name %r" % odd, write_file, p(odd), odd.encode())
    eq("read %r" % odd, read_file(p(odd)), odd.encode())
names = set(os.listdir(D))
true("every odd name listed", {"with space", "new\nline", "._appledouble", "..dots"} <= names)
done()
EOF

# MARK: every writable area takes the same ordinary operations
for area in "" Documents "Library/Application Support" Library/Caches Library/Preferences tmp; do
    dir=$C${area:+/$area}
    _assert_ok sh -c "echo data >'$dir/.file' && mkdir '$dir/.d' && ln -s .file '$dir/.l' && mv '$dir/.file' '$dir/.d/file' && cat '$dir/.d/file' >/dev/null && rm -r '$dir/.d' '$dir/.l'"
done
_assert_output "" sh -c "ls -A '$C/tmp'"
