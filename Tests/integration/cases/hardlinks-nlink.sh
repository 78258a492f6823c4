# Hard links: one inode under several names, st_nlink counted correctly everywhere (stat
# by each name, fstat of an open descriptor, another process), through link, unlink,
# rename over a link and remount; directories count their subdirectories as ext4 does;
# no hard links to directories (EPERM) or between containers (EXDEV).
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.links)
O=$(_mkcontainer com.example.other)
D=$C/Documents

"$PY" - "$D" "$O/Documents" <<'EOF'
import os, subprocess, sys
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
D, OTHER = sys.argv[1], sys.argv[2]
def p(n): return os.path.join(D, n)
def nlink(path): return os.lstat(path).st_nlink
def other_process_nlink(path):
    return int(subprocess.run(["stat", "-c", "%h", path], capture_output=True, text=True).stdout)

write_file(p("f"), b"data")
fd = os.open(p("f"), os.O_RDONLY)
eq("new file", nlink(p("f")), 1)
ok("link", os.link, p("f"), p("g"))
eq("nlink by the old name", nlink(p("f")), 2)
eq("nlink by the new name", nlink(p("g")), 2)
eq("same inode", os.lstat(p("f")).st_ino, os.lstat(p("g")).st_ino)
eq("fstat of an open descriptor", os.fstat(fd).st_nlink, 2)
os.mkdir(p("sub"))
ok("link into a subdirectory", os.link, p("f"), p("sub/h"))
ok("link in Library of the same container", os.link, p("f"), os.path.join(D, "..", "Library", "Caches", "k"))
eq("four names", nlink(p("g")), 4)
eq("another process agrees", other_process_nlink(p("sub/h")), 4)
with open(p("g"), "ab") as w: w.write(b"+more")
eq("data shared", read_file(p("sub/h")), b"data+more")
ok("unlink one name", os.unlink, p("f"))
eq("after unlink", nlink(p("g")), 3)
eq("fstat after unlink", os.fstat(fd).st_nlink, 3)
write_file(p("x"), b"x")
ok("rename another file over a link", os.rename, p("x"), p("g"))
eq("the surviving names count it", nlink(p("sub/h")), 2)
eq("another process agrees", other_process_nlink(p("sub/h")), 2)
os.unlink(os.path.join(D, "..", "Library", "Caches", "k"))
eq("one name left", nlink(p("sub/h")), 1)
os.unlink(p("sub/h"))
eq("open descriptor of a file without names", os.fstat(fd).st_nlink, 0)
eq("still readable", os.pread(fd, 100, 0), b"data+more")
os.close(fd)

err("link a directory", "EPERM", os.link, p("sub"), p("sub2"))
err("link onto an existing name", "EEXIST", os.link, p("g"), p("sub"))
err("link between containers", "EXDEV", os.link, p("g"), os.path.join(OTHER, "g"))
os.symlink("g", p("sym"))
ok("link a symlink itself", os.link, p("sym"), p("sym2"), follow_symlinks=False)
eq("the symlink has two names", nlink(p("sym")), 2)
eq("its target does not", nlink(p("g")), 1)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def linkat_follow(a, b):   # os.link(follow_symlinks=True) is link(2): it never follows
    if libc.linkat(-100, os.fsencode(a), -100, os.fsencode(b), 0x400) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
ok("link through a symlink (AT_SYMLINK_FOLLOW)", linkat_follow, p("sym"), p("g2"))
eq("the target has two names", nlink(p("g")), 2)

# Directories: 2 + number of subdirectories, like the disk underneath.
os.mkdir(p("tree"))
eq("empty directory", nlink(p("tree")), 2)
for i in range(3): os.mkdir(p("tree/d%d" % i))
write_file(p("tree/file"), b"")
eq("three subdirectories", nlink(p("tree")), 5)
os.rename(p("tree/d0"), p("d0-moved"))
eq("a subdirectory moved out", nlink(p("tree")), 4)
os.rmdir(p("tree/d1"))
eq("a subdirectory removed", nlink(p("tree")), 3)
ref = os.lstat(os.path.join(os.environ["TEST_STORE"], "containers", "com.example.links", "Documents", "tree")).st_nlink
eq("the store agrees", nlink(p("tree")), ref)
done()
EOF

# Survives a remount (names and count come from the store).
echo 1 >"$D/pair-a"
ln "$D/pair-a" "$D/pair-b"
ino=$(fsop stat "$D/pair-a" ino)
fs_umount
fs_mount
_assert_output "2 $ino" fsop stat "$D/pair-b" nlink ino
_assert_output "2 $ino" fsop stat "$D/pair-a" nlink ino
# `ls -l` and `find -links` (what users run) agree.
_assert_output "2" sh -c "ls -l '$D/pair-a' | awk '{ print \$2 }'"
_assert_output "$D/pair-a $D/pair-b" sh -c "find '$D' -maxdepth 1 -name 'pair-*' -links 2 -type f | sort | tr '\n' ' ' | sed 's/ \$//'"
