# The bundle (NAME.app) is read-only through the mount: every mutation inside it gives
# EROFS, for root too (docs/SEMANTICS.md §1); reading, mmap with
# PROT_EXEC and running an executable from it work. The bundle directory itself is a
# standard directory: it cannot be removed or renamed (EACCES, docs/SEMANTICS.md §1).
. "$(dirname "$0")/../lib/common.sh"
_users

# A bundle with a script, a data file, a subdirectory and a symlink, installed by the CLI.
B=$TEST_TMP/bundle
mkdir -p "$B/Contents/Resources"
printf '#!/bin/sh\necho hello from the bundle\n' >"$B/Contents/run.sh"
chmod 755 "$B/Contents/run.sh"
echo data >"$B/Contents/Resources/data.txt"
ln -s Resources/data.txt "$B/Contents/link"
_assert_ok containerfs container create com.example.notes --bundle "$B" --store "$TEST_STORE"
fs_mount
C=$TEST_MNT/containers/com.example.notes
A=$C/Notes.app
O=$C/Documents/outside.txt
echo outside >"$O"

# MARK: reading works
_assert_output "data" cat "$A/Contents/Resources/data.txt"
_assert_output "hello from the bundle" "$A/Contents/run.sh"
_assert_output "Resources/data.txt" fsop readlink "$A/Contents/link"
_assert_output $'Contents' fsop listdir "$A"
_assert_ok "$PY" -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_EXEC)
assert m[:9] == b"#!/bin/sh", m[:9]
' "$A/Contents/run.sh"

check_all_erofs() {   # check_all_erofs RUNNER...: every mutation, run through RUNNER
    local r=("$@")
    local f=$A/Contents/Resources/data.txt d=$A/Contents/Resources
    _assert_errno EROFS "${r[@]}" fsop open "$A/new" "O_WRONLY|O_CREAT"
    _assert_errno EROFS "${r[@]}" fsop open "$d/new" "O_WRONLY|O_CREAT|O_EXCL"
    _assert_errno EROFS "${r[@]}" fsop open "$f" "O_WRONLY|O_APPEND"
    _assert_errno EROFS "${r[@]}" fsop open "$f" "O_WRONLY|O_TRUNC"
    _assert_errno EROFS "${r[@]}" fsop open "$f" "O_RDWR"
    _assert_errno EROFS "${r[@]}" fsop open "$f" "O_RDONLY|O_TRUNC"
    _assert_errno EROFS "${r[@]}" fsop truncate "$f" 0
    _assert_errno EROFS "${r[@]}" fsop unlink "$f"
    _assert_errno EROFS "${r[@]}" fsop unlink "$A/Contents/link"
    _assert_errno EROFS "${r[@]}" fsop rmdir "$d"
    _assert_errno EROFS "${r[@]}" fsop mkdir "$d/sub"
    _assert_errno EROFS "${r[@]}" fsop rename "$f" "$d/renamed.txt"
    _assert_errno EROFS "${r[@]}" fsop rename "$f" "$C/Documents/moved-out.txt"
    _assert_errno EROFS "${r[@]}" fsop rename "$O" "$d/moved-in.txt"
    _assert_errno EROFS "${r[@]}" fsop rename "$O" "$f"
    _assert_errno EROFS "${r[@]}" fsop rename "$O" "$f" exchange
    _assert_errno EROFS "${r[@]}" fsop link "$f" "$d/hardlink"
    _assert_errno EROFS "${r[@]}" fsop link "$f" "$C/Documents/hardlink"
    _assert_errno EROFS "${r[@]}" fsop link "$O" "$d/hardlink"
    _assert_errno EROFS "${r[@]}" fsop symlink data.txt "$d/symlink"
    _assert_errno EROFS "${r[@]}" fsop mknod "$d/fifo" fifo 644
    _assert_errno EROFS "${r[@]}" fsop chmod "$f" 600
    _assert_errno EROFS "${r[@]}" fsop chmod "$A" 700
    _assert_errno EROFS "${r[@]}" fsop chown "$f" "$OWNER" "$GROUP"
    _assert_errno EROFS "${r[@]}" fsop lchown "$A/Contents/link" "$OWNER" "$GROUP"
    _assert_errno EROFS "${r[@]}" fsop utimens "$f" now now
    _assert_errno EROFS "${r[@]}" fsop utimens "$f" 1 2
    _assert_errno EROFS "${r[@]}" fsop utimens "$A/Contents/link" 1 2 nofollow
    _assert_errno EROFS "${r[@]}" fsop setxattr "$f" user.test v
    _assert_errno EROFS "${r[@]}" fsop removexattr "$f" user.test
    _assert_errno EROFS "${r[@]}" fsop setxattr "$d" user.test v
}

# MARK: as root, with the tools people use and with single system calls
_assert_errno EROFS touch "$A/new"
_assert_errno EROFS sh -c "echo x >>'$A/Contents/Resources/data.txt'"
_assert_errno EROFS sh -c ": >'$A/Contents/Resources/data.txt'"
_assert_errno EROFS truncate -s 0 "$A/Contents/Resources/data.txt"
_assert_errno EROFS rm -f "$A/Contents/Resources/data.txt"
_assert_errno EROFS mkdir "$A/Contents/x"
_assert_errno EROFS ln -s x "$A/Contents/y"
_assert_errno EROFS chmod 700 "$A/Contents/run.sh"
_assert_errno EROFS chown nobody "$A/Contents/run.sh"
_assert_errno EROFS touch -m "$A/Contents/run.sh"
_assert_errno EROFS setfattr -n user.x -v 1 "$A/Contents/run.sh"
OWNER=0 GROUP=0
check_all_erofs

# MARK: as the container's owner and as another user (the kernel would already say
# EACCES for some of these on a 0755 root-owned tree; the policy answers first for writes
# the mode would allow, so give the user a tree it owns: chown in the store)
chown -R "$U1_UID:$U1_GID" "$TEST_STORE/containers/com.example.notes"
chmod 755 "$TEST_STORE/containers/com.example.notes"
fs_umount
fs_mount
OWNER=$U1_UID GROUP=$U1_GID
check_all_erofs _as_user "$U1"

# MARK: the bundle directory itself is a standard directory
_assert_errno EACCES fsop rename "$A" "$C/Other.app"
_assert_errno EACCES fsop rename "$A" "$C/Documents/Notes.app"
_assert_errno EACCES fsop rmdir "$A"
_assert_errno EACCES fsop mkdir "$C/Second.app"
_assert_errno EACCES fsop rename "$C/Documents" "$C/Docs.app"

# Nothing changed in the store.
_assert_output "data" cat "$TEST_STORE/containers/com.example.notes/Notes.app/Contents/Resources/data.txt"
_assert_output $'Resources\nlink\nrun.sh' fsop listdir "$TEST_STORE/containers/com.example.notes/Notes.app/Contents"
