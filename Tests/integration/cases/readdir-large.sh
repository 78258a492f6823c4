# timeout: 120
# A 5000-entry directory lists exactly 5000 entries plus . and .. (ls, os.listdir, getdents
# with a small buffer, after a remount), every d_ino equal to st_ino (`ls -i`); creating
# and deleting entries during a listing neither repeats nor drops an untouched entry
#.
. "$(dirname "$0")/../lib/common.sh"
# The 5000 entries are made in the store before mounting (creation through the mount is
# the business of other cases; a debug daemon takes ~4 ms per create, this keeps it quick).
_assert_ok containerfs container create com.example.big --store "$TEST_STORE"
SB=$TEST_STORE/containers/com.example.big/Documents/big
mkdir "$SB"
"$PY" - "$SB" <<'EOF'
import os, sys
d = sys.argv[1]
for i in range(5000):
    os.close(os.open(os.path.join(d, "entry-%05d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
EOF
fs_mount
C=$TEST_MNT/containers/com.example.big
B=$C/Documents/big
_assert_output 5002 sh -c "ls -f '$B' | wc -l"
_assert_output 5000 sh -c "ls '$B' | wc -l"
_assert_output 5000 sh -c "ls '$B' | sort -u | wc -l"
_assert_output 5000 sh -c "ls '$TEST_STORE/containers/com.example.big/Documents/big' | wc -l"
# ls -i prints d_ino; stat the same names: one line differs if any number does.
_assert_output 0 sh -c "ls -i '$B' | awk '{ print \$2, \$1 }' | sort >'$TEST_TMP/d_ino'; cd '$B' && stat -c '%n %i' * | sort >'$TEST_TMP/st_ino'; diff '$TEST_TMP/d_ino' '$TEST_TMP/st_ino' | grep -c '^[<>]' || true"

"$PY" - "$B" <<'EOF'
import ctypes, os, struct, sys, threading
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
d = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
SYS_getdents64 = 217

def getdents_all(path, bufsize, during=None):
    """Every (name, d_ino) of path read with getdents64 in bufsize chunks; `during` runs
    after the first chunk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    buf = ctypes.create_string_buffer(bufsize)
    out, first = [], True
    while True:
        n = libc.syscall(SYS_getdents64, fd, buf, bufsize)
        if n < 0:
            raise OSError(ctypes.get_errno(), "getdents64")
        if n == 0:
            break
        raw, off = buf.raw[:n], 0
        while off < n:
            ino, _, reclen, _ = struct.unpack_from("QqHB", raw, off)
            name = raw[off + 19:off + reclen].split(b"\0", 1)[0].decode()
            out.append((name, ino))
            off += reclen
        if first and during:
            during()
        first = False
    os.close(fd)
    return out

names = os.listdir(d)
eq("os.listdir count", len(names), 5000)
eq("os.listdir unique", len(set(names)), 5000)
small = getdents_all(d, 600)
eq("getdents64 with a 600-byte buffer: count", len(small), 5002)
eq("getdents64: no repeats", len(set(n for n, _ in small)), 5002)
eq("getdents64: . and ..", sorted(n for n, _ in small if n.startswith(".")), [".", ".."])
bad = [n for n, ino in small if not n.startswith(".") and os.lstat(os.path.join(d, n)).st_ino != ino]
eq("getdents64: d_ino == st_ino", bad, [])

# Churn during a listing, through the mount: 250 new entries appear and 250 others (the
# "victims", spread over the directory) vanish after the first chunk; the 4750 untouched
# entries must each come exactly once.
victims = ["entry-%05d" % i for i in range(0, 5000, 20)]
def churn():
    for v in victims:
        os.unlink(os.path.join(d, v))
    for i in range(250):
        os.close(os.open(os.path.join(d, "new-%04d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
listed = [n for n, _ in getdents_all(d, 4096, during=churn)]
untouched = set("entry-%05d" % i for i in range(5000)) - set(victims)
counts = {}
for n in listed:
    counts[n] = counts.get(n, 0) + 1
eq("no entry listed twice", [n for n, c in counts.items() if c > 1], [])
eq("no untouched entry dropped", sorted(untouched - set(listed)), [])
eq("a fresh listing after the churn", len(os.listdir(d)), 5000)
done()
EOF

# Cold caches: after a remount, listing and readdirplus attributes are right.
fs_umount
fs_mount
_assert_output 5000 sh -c "ls '$B' | wc -l"
_assert_output 5000 sh -c "ls -l '$B' | grep -c '^-rw-r--r-- 1 root root 0 '"
_assert_output 0 sh -c "ls -i '$B' | awk '{ print \$2, \$1 }' | sort >'$TEST_TMP/d_ino'; cd '$B' && stat -c '%n %i' * | sort >'$TEST_TMP/st_ino'; diff '$TEST_TMP/d_ino' '$TEST_TMP/st_ino' | grep -c '^[<>]' || true"

# Dot-files and AppleDouble `._*` files are listed like any other; `rm -r` of a directory
# holding only `._x` succeeds.
mkdir "$C/Documents/dots"
touch "$C/Documents/dots/._x" "$C/Documents/dots/.hidden"
_assert_output $'._x\n.hidden' sh -c "ls -A '$C/Documents/dots'"
rm "$C/Documents/dots/.hidden"
_assert_ok rm -r "$C/Documents/dots"
_assert_missing "$C/Documents/dots"
