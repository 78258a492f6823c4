# Containers are separate volumes to their apps: rename and link between two containers
# give EXDEV (docs/SEMANTICS.md §1), asserted with the system calls themselves (`mv` hides EXDEV behind
# copy and delete; it must still complete). Renames into and out of the volume's trash work
# from every container and keep the inode.
. "$(dirname "$0")/../lib/common.sh"
fs_mount
A=$(_mkcontainer com.example.alpha)
B=$(_mkcontainer com.example.beta)
echo alpha >"$A/Documents/f.txt"
mkdir -p "$A/Documents/dir/sub"
echo deep >"$A/Documents/dir/sub/x"
echo beta >"$B/Documents/g.txt"

# MARK: rename(2), renameat2(2) and link(2) between containers: EXDEV
for area in Documents "Library/Application Support" Library/Caches Library/Preferences tmp; do
    _assert_errno EXDEV fsop rename "$A/Documents/f.txt" "$B/$area/f.txt"
done
_assert_errno EXDEV fsop rename "$A/Documents/f.txt" "$B/f.txt"
_assert_errno EXDEV fsop rename "$A/Documents/dir" "$B/Documents/dir"
_assert_errno EXDEV fsop rename "$A/Documents/f.txt" "$B/Documents/g.txt"
_assert_errno EXDEV fsop rename "$A/Documents/f.txt" "$B/Documents/new.txt" noreplace
_assert_errno EXDEV fsop rename "$A/Documents/f.txt" "$B/Documents/g.txt" exchange
_assert_errno EXDEV fsop link "$A/Documents/f.txt" "$B/Documents/f.txt"
_assert_errno EXDEV fsop link "$A/Documents/f.txt" "$B/tmp/f.txt"
_assert_output "alpha" cat "$A/Documents/f.txt"
_assert_output "beta" cat "$B/Documents/g.txt"
_assert_missing "$B/Documents/f.txt"

# MARK: mv falls back to copy + delete: the data arrives under a new inode
ino=$(fsop stat "$A/Documents/f.txt" ino)
_assert_ok mv "$A/Documents/f.txt" "$B/Documents/f.txt"
_assert_output "alpha" cat "$B/Documents/f.txt"
_assert_missing "$A/Documents/f.txt"
_assert_ne "$ino" "$(fsop stat "$B/Documents/f.txt" ino)" "inode after mv between containers"
_assert_ok mv "$A/Documents/dir" "$B/Documents/"
_assert_output "deep" cat "$B/Documents/dir/sub/x"
_assert_missing "$A/Documents/dir"

# MARK: within one container: one volume, the inode stays
ino=$(fsop stat "$B/Documents/g.txt" ino)
_assert_ok fsop rename "$B/Documents/g.txt" "$B/Library/Preferences/g.txt"
_assert_ok fsop rename "$B/Library/Preferences/g.txt" "$B/tmp/g.txt"
_assert_ok fsop rename "$B/tmp/g.txt" "$B/g.txt"
_assert_output "$ino" fsop stat "$B/g.txt" ino
_assert_ok fsop link "$B/g.txt" "$B/Documents/g-link.txt"
_assert_output "2" fsop stat "$B/g.txt" nlink

# MARK: the trash is on every container's volume: in and out keep the inode
_assert_ok fsop mkdir "$TEST_MNT/.Trash-0"
mkdir -p "$TEST_MNT/.Trash-0/files" "$TEST_MNT/.Trash-0/info"
ino=$(fsop stat "$B/g.txt" ino)
_assert_ok fsop rename "$B/g.txt" "$TEST_MNT/.Trash-0/files/g.txt"
_assert_output "$ino" fsop stat "$TEST_MNT/.Trash-0/files/g.txt" ino
_assert_ok fsop rename "$TEST_MNT/.Trash-0/files/g.txt" "$A/Documents/g.txt"   # restored into another container
_assert_output "$ino" fsop stat "$A/Documents/g.txt" ino
dino=$(fsop stat "$B/Documents/dir" ino)
_assert_ok fsop rename "$B/Documents/dir" "$TEST_MNT/.Trash-0/files/dir"
_assert_ok fsop rename "$TEST_MNT/.Trash-0/files/dir" "$B/Documents/dir"
_assert_output "$dino" fsop stat "$B/Documents/dir" ino
_assert_output "deep" cat "$B/Documents/dir/sub/x"

# MARK: the same for a non-root user between two containers of its own
_users
_assert_ok _as_user "$U1" fsop mkdir "$TEST_MNT/containers/org.user.one"
_assert_ok _as_user "$U1" fsop mkdir "$TEST_MNT/containers/org.user.two"
U=$TEST_MNT/containers
_assert_ok _as_user "$U1" sh -c "echo mine >'$U/org.user.one/Documents/f'; mkdir '$U/org.user.one/Documents/d'"
_assert_errno EXDEV _as_user "$U1" fsop rename "$U/org.user.one/Documents/f" "$U/org.user.two/Documents/f"
_assert_errno EXDEV _as_user "$U1" fsop rename "$U/org.user.one/Documents/d" "$U/org.user.two/tmp/d"
_assert_errno EXDEV _as_user "$U1" fsop link "$U/org.user.one/Documents/f" "$U/org.user.two/Documents/f"
_assert_ok _as_user "$U1" mv "$U/org.user.one/Documents/f" "$U/org.user.two/Documents/f"
_assert_output "mine" cat "$U/org.user.two/Documents/f"
_assert_output "$U1_UID" fsop stat "$U/org.user.two/Documents/f" uid
