# File identity (docs/SEMANTICS.md §1): st_ino is the store's inode number, unchanged by renames within
# a container, between its areas, into the trash and back, and across an unmount and
# mount; `ls -i` (d_ino) agrees with stat; every path of the mount has one st_dev
#.
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.ids)
SC=$TEST_STORE/containers/com.example.ids
echo data >"$C/Documents/file"
mkdir -p "$C/Documents/dir/sub"
echo deep >"$C/Documents/dir/sub/x"
fino=$(fsop stat "$C/Documents/file" ino)
dino=$(fsop stat "$C/Documents/dir" ino)
xino=$(fsop stat "$C/Documents/dir/sub/x" ino)
_assert_eq "$(stat -c %i "$SC/Documents/file")" "$fino" "st_ino is the store's inode"
_assert_eq "$(stat -c %i "$SC/Documents/dir")" "$dino" "st_ino of a directory is the store's"

# Renames: within a directory, between areas, into the trash and back.
mv "$C/Documents/file" "$C/Documents/renamed"
_assert_output "$fino" fsop stat "$C/Documents/renamed" ino
mv "$C/Documents/renamed" "$C/Library/Application Support/moved"
_assert_output "$fino" fsop stat "$C/Library/Application Support/moved" ino
mv "$C/Documents/dir" "$C/tmp/dir"
_assert_output "$dino $xino" sh -c "echo \$(fsop stat '$C/tmp/dir' ino) \$(fsop stat '$C/tmp/dir/sub/x' ino)"
mkdir -p "$TEST_MNT/.Trash-0/files"
mv "$C/Library/Application Support/moved" "$TEST_MNT/.Trash-0/files/moved"
_assert_output "$fino" fsop stat "$TEST_MNT/.Trash-0/files/moved" ino
mv "$TEST_MNT/.Trash-0/files/moved" "$C/Documents/file"
_assert_output "$fino" fsop stat "$C/Documents/file" ino
mv "$C/tmp/dir" "$C/Documents/dir"

# Remount: the same numbers, for names never looked up since.
fs_umount
fs_mount
_assert_output "$fino" fsop stat "$C/Documents/file" ino
_assert_output "$dino" fsop stat "$C/Documents/dir" ino
_assert_output "$xino" fsop stat "$C/Documents/dir/sub/x" ino

# d_ino == st_ino for every entry, and a single st_dev for the whole mount.
"$PY" - "$TEST_MNT" <<'EOF'
import os, sys
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
root = sys.argv[1]
dev = os.stat(root).st_dev
mismatch, devs, n = [], set(), 0
for dirpath, dirs, files in os.walk(root):
    with os.scandir(dirpath) as it:
        for e in it:
            st = os.lstat(e.path)
            n += 1
            devs.add(st.st_dev)
            if e.inode() != st.st_ino:
                mismatch.append((e.path, e.inode(), st.st_ino))
true("walked the tree", n > 15, "only %d entries" % n)
eq("d_ino == st_ino everywhere", mismatch, [])
eq("one st_dev", devs, {dev})
done()
EOF
# ls -i prints d_ino when it can: it agrees with stat too.
_assert_output "$fino" sh -c "ls -i '$C/Documents' | awk '\$2 == \"file\" { print \$1 }'"
_assert_output "$dino" sh -c "ls -id '$C/Documents/dir' | awk '{ print \$1 }'"
