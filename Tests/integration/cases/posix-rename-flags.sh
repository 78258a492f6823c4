# rename(2) and renameat2(2) through the mount: overwrite, RENAME_NOREPLACE (EEXIST on an
# existing name), RENAME_EXCHANGE (a file and a directory swap, inodes follow their names),
# the flags' error cases, and what another process sees right after (contract test 12).
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.rename)

"$PY" - "$C/Documents" "$C/Library/Application Support" <<'EOF'
import ctypes, os, stat, subprocess, sys
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
D, L = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
NOREPLACE, EXCHANGE, WHITEOUT = 1, 2, 4
def renameat2(a, b, flags):
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), ctypes.c_uint(flags)) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
def p(n): return os.path.join(D, n)
def ino(path): return os.lstat(path).st_ino
def seen_by_other_process(path):   # a fresh process: no cache of ours
    return subprocess.run(["cat", path], capture_output=True).stdout

write_file(p("a"), b"A"); write_file(p("b"), b"B")
ia, ib = ino(p("a")), ino(p("b"))
err("NOREPLACE onto an existing file", "EEXIST", renameat2, p("a"), p("b"), NOREPLACE)
eq("both untouched", (read_file(p("a")), read_file(p("b"))), (b"A", b"B"))
os.mkdir(p("dir"))
err("NOREPLACE onto an existing directory", "EEXIST", renameat2, p("a"), p("dir"), NOREPLACE)
os.symlink("nowhere", p("dangling"))
err("NOREPLACE onto a dangling symlink", "EEXIST", renameat2, p("a"), p("dangling"), NOREPLACE)
ok("NOREPLACE onto a free name", renameat2, p("a"), p("c"), NOREPLACE)
eq("inode kept", ino(p("c")), ia)
err("old name gone", "ENOENT", os.lstat, p("a"))

ok("EXCHANGE two files", renameat2, p("b"), p("c"), EXCHANGE)
eq("contents swapped", (read_file(p("b")), read_file(p("c"))), (b"A", b"B"))
eq("inodes follow", (ino(p("b")), ino(p("c"))), (ia, ib))
eq("another process sees the swap", seen_by_other_process(p("b")), b"A")
write_file(p("dir/inside"), b"i")
idir = ino(p("dir"))
ok("EXCHANGE a file and a directory", renameat2, p("b"), p("dir"), EXCHANGE)
eq("dir is now the file", (stat.S_ISREG(os.lstat(p("dir")).st_mode), read_file(p("dir"))), (True, b"A"))
eq("b is now the directory", (stat.S_ISDIR(os.lstat(p("b")).st_mode), os.listdir(p("b"))), (True, ["inside"]))
eq("inode of the directory followed", ino(p("b")), idir)
eq("contents reachable by the new path", read_file(p("b/inside")), b"i")
err("EXCHANGE with a missing name", "ENOENT", renameat2, p("b"), p("missing"), EXCHANGE)
err("EXCHANGE and NOREPLACE together", "EINVAL", renameat2, p("b"), p("c"), EXCHANGE | NOREPLACE)
err("unknown flag", "EINVAL", renameat2, p("b"), p("c"), 1 << 10)
ok("EXCHANGE across directories of one container", renameat2, p("c"), os.path.join(L, "placeholder") if os.path.exists(os.path.join(L, "placeholder")) else (write_file(os.path.join(L, "placeholder"), b"P") or os.path.join(L, "placeholder")), EXCHANGE)
eq("exchanged across areas", (read_file(p("c")), read_file(os.path.join(L, "placeholder"))), (b"P", b"B"))
err("EXCHANGE a directory into its own subtree", "EINVAL", renameat2, p("b"), p("b/inside"), EXCHANGE)

# Plain rename(2) with overwrite.
write_file(p("old"), b"old"); write_file(p("new"), b"new")
fd = os.open(p("new"), os.O_RDONLY)
ok("rename over", os.rename, p("old"), p("new"))
eq("replaced", read_file(p("new")), b"old")
eq("the replaced file's descriptor still reads it", os.pread(fd, 10, 0), b"new")
eq("the replaced file has no links left", os.fstat(fd).st_nlink, 0)
os.close(fd)
eq("another process sees the new content", seen_by_other_process(p("new")), b"old")
ok("rename onto itself", os.rename, p("new"), p("new"))
os.link(p("new"), p("new2"))
ok("rename onto another link of itself", os.rename, p("new"), p("new2"))
eq("both links remain (POSIX)", (os.path.exists(p("new")), os.lstat(p("new2")).st_nlink), (True, 2))
os.mkdir(p("full")); write_file(p("full/x"), b"")
os.mkdir(p("empty"))
ok("directory over an empty directory", os.rename, p("empty"), p("b/emptied"))
err("directory over a non-empty directory", "ENOTEMPTY", os.rename, p("b"), p("full"))
err("NOREPLACE directory onto a directory", "EEXIST", renameat2, p("b"), p("full"), NOREPLACE)
done()
EOF
