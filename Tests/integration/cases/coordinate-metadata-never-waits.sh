# lookup, getattr, readlink, statfs, getxattr, listxattr and access never wait for claims
# (docs/SEMANTICS.md §3's deviation from Apple): `stat`, `ls -l`, `readlink` of a file under a long
# write claim, and of the items inside a directory under a write for deleting, answer at
# once (docs/SEMANTICS.md §3.3). The kernel's attribute and entry
# caches are off (timeouts 0), so every one of these reaches the daemon.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount -o attr_timeout=0,entry_timeout=0,negative_timeout=0
C=$(_mkcontainer com.example.metadata)
D=$C/Documents
F=$D/f
echo data >"$F"
ln -s f "$D/link"
fsop setxattr "$F" user.tag value >/dev/null

metadata_answers() {   # metadata_answers WHAT: every metadata request about f answers at once
    _assert_output "5" timeout 2 fsop stat "$F" size
    _assert_output "reg 0644" timeout 2 fsop stat "$F" type perm
    _assert_ok timeout 2 stat "$F"
    _assert_ok timeout 2 ls -l "$F"
    _assert_ok timeout 2 test -f "$F"
    _assert_output "f" timeout 2 fsop readlink "$D/link"
    _assert_output "f" timeout 2 readlink "$D/link"
    _assert_output "lnk" timeout 2 fsop lstat "$D/link" type
    _assert_output "reg 5" timeout 2 fsop stat "$D/link" type size
    _assert_output "value" timeout 2 fsop getxattr "$F" user.tag
    _assert_output "user.tag" timeout 2 fsop listxattr "$F"
    _assert_ok timeout 2 fsop access "$F" r
    _assert_ok timeout 2 fsop access "$F" w
    _assert_ok timeout 2 fsop statfs "$F" bsize namemax
    _assert_errno ENOENT timeout 2 fsop stat "$D/missing"
    _ok "$1: metadata answered at once"
}

# MARK: a write claim on the file
_hold w --write "$F"
metadata_answers "write claim on f"
_assert_ok timeout 2 ls -l "$D"         # a listing reads the directory, not f
_release w

# MARK: a write for deleting on the file
_hold del --write --for deleting "$F"
metadata_answers "write for deleting on f"
_release del

# MARK: a write for deleting on the directory (a subtree write)
_hold subtree --write --for deleting "$D"
metadata_answers "write for deleting on Documents"
_assert_output "dir" timeout 2 fsop stat "$D" type
_assert_ok timeout 2 stat "$D"
_assert_ok timeout 2 fsop statfs "$D" bsize
_release subtree

# MARK: a write claim on the directory
_hold dirw --write "$D"
metadata_answers "write claim on Documents"
_release dirw
fs_umount
