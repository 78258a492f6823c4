# statfs through the mount reports the backing store's file system (docs/SEMANTICS.md §1; issue 2):
# the same block size, size and inode totals at every path of the mount; free space
# follows writes made through the mount; df shows the mount with the store's size.
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.space)
"$PY" - "$TEST_MNT" "$TEST_STORE" "$C/Documents" <<'EOF'
import os, sys
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
mnt, store, docs = sys.argv[1:4]
def fig(path):
    s = os.statvfs(path)
    return s
s, m = fig(store), fig(mnt)
for field in ("f_bsize", "f_frsize", "f_blocks", "f_files", "f_namemax"):
    eq("mount root %s" % field, getattr(m, field), getattr(s, field))
for path in (os.path.join(mnt, "containers"), os.path.join(mnt, "snapshots"), docs,
             os.path.join(docs, "Inbox"), os.path.join(docs, "..", "Notes.app") if False else os.path.join(docs, "..", "tmp")):
    eq("same figures at %s" % os.path.relpath(path, mnt), (fig(path).f_blocks, fig(path).f_bsize), (s.f_blocks, s.f_bsize))
# Free space: near the store's (other programs may write meanwhile: 1% of the disk).
tol = s.f_blocks // 100
true("f_bavail close to the store's", abs(fig(mnt).f_bavail - fig(store).f_bavail) <= tol)
true("f_bfree close to the store's", abs(fig(mnt).f_bfree - fig(store).f_bfree) <= tol)
true("f_ffree close to the store's", abs(fig(mnt).f_ffree - fig(store).f_ffree) <= max(s.f_files // 100, 1000))
# Writing 256 MiB through the mount takes about that much from both views.
big = os.path.join(docs, "big")
before_m, before_s = fig(docs).f_bavail * s.f_frsize, fig(store).f_bavail * s.f_frsize
chunk = b"\xa5" * (1 << 20)
with open(big, "wb") as f:
    for _ in range(256):
        f.write(chunk)
    f.flush(); os.fsync(f.fileno())
used_m = before_m - fig(docs).f_bavail * s.f_frsize
used_s = before_s - fig(store).f_bavail * s.f_frsize
# (At least: other programs on this disk may take space meanwhile, so no upper bound here;
# the comparison with the store's own figure, taken at the same moment, is the exact one.)
true("the mount's free space shrank by at least 200 MiB", used_m >= 200 << 20, "shrank by %d MiB" % (used_m >> 20))
true("the store's agrees", abs(used_m - used_s) <= 64 << 20, "mount %d MiB, store %d MiB" % (used_m >> 20, used_s >> 20))
os.unlink(big)
done()
EOF
# df: the mount's size is the store's size.
_assert_eq "$(df --output=size -k "$TEST_STORE" | tail -1)" "$(df --output=size -k "$TEST_MNT" | tail -1)" "df size"
_assert_eq "fuse.containerfs" "$(df --output=fstype "$TEST_MNT" | tail -1 | tr -d ' ')" "df type"
_assert_eq "$(stat -f -c '%S %b %c' "$TEST_STORE")" "$(stat -f -c '%S %b %c' "$C/Documents")" "stat -f"
