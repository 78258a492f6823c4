# The mounted layout (docs/SEMANTICS.md §1): a virtual root with containers/ and snapshots/, a container
# made by `mkdir containers/ID` or `container create` gets every standard directory; an
# invalid bundle id is EINVAL and creates nothing; the root and containers/ refuse every
# other mutation with EACCES; `.Trash-UID` is made only by its own uid.
. "$(dirname "$0")/../lib/common.sh"
_users
fs_mount
M=$TEST_MNT

_assert_output $'containers\nsnapshots' fsop listdir "$M"
_assert_output "dir 1777 0 0" fsop stat "$M" type perm uid gid
_assert_output "" fsop listdir "$M/snapshots"
_assert_output "" fsop listdir "$M/containers"

# MARK: mkdir containers/ID makes the whole layout
_assert_ok fsop mkdir "$M/containers/com.example.notes"
C=$M/containers/com.example.notes
_assert_output $'Documents\nLibrary\nNotes.app\ntmp' fsop listdir "$C"
_assert_output "Inbox" fsop listdir "$C/Documents"
_assert_output $'Application Support\nCaches\nPreferences' fsop listdir "$C/Library"
_assert_output "dir 0700 0 0" fsop stat "$C" type perm uid gid
for d in Documents Documents/Inbox Library "Library/Application Support" Library/Caches Library/Preferences tmp Notes.app; do
    _assert_output "dir 0755 0" fsop stat "$C/$d" type perm uid
done
_assert_output "com.example.notes" fsop listdir "$M/containers"
_assert_errno EEXIST fsop mkdir "$C"
# The store holds the same tree.
_assert_output $'Documents\nLibrary\nNotes.app\ntmp' fsop listdir "$TEST_STORE/containers/com.example.notes"

# The bundle's name is the last label, capitalised, + .app.
_assert_ok fsop mkdir "$M/containers/org.example.todo-list"
_assert_exists "$M/containers/org.example.todo-list/Todo-list.app"

# MARK: the CLI's container is visible through the live mount at once
_assert_ok containerfs container create io.example.cli --store "$TEST_STORE"
_assert_output $'Cli.app\nDocuments\nLibrary\ntmp' fsop listdir "$M/containers/io.example.cli"

# MARK: invalid ids: EINVAL, nothing created
before=$(fsop listdir "$TEST_STORE/containers")
for bad in not_a_bundle_id single a..b .a.b a.b. 'a b.c' 'com.example/x' 'com.ex@mple.x' 'com.é.x' '-' 'a.b\xff'; do
    [[ $bad == */* ]] && continue   # cannot even be one name
    _assert_errno EINVAL fsop mkdir "$M/containers/$bad"
done
_assert_errno ENAMETOOLONG fsop mkdir "$M/containers/com.$(printf 'a%.0s' {1..252})"
# An id may take all 255 bytes of a name: the CLI makes and removes one, and so does mkdir
# (the staging names were once built from the id, and failed from 229 bytes on).
LONG_ID="com.$(printf 'a%.0s' {1..249}).x"
_assert_ok containerfs container create "$LONG_ID" --store "$TEST_STORE"
_assert_output $'Documents\nLibrary\nX.app\ntmp' fsop listdir "$M/containers/$LONG_ID"
_assert_ok containerfs container remove --permanently "$LONG_ID" --store "$TEST_STORE"
_assert_errno ENOENT fsop stat "$M/containers/$LONG_ID"
_assert_ok fsop mkdir "$M/containers/$LONG_ID"
_assert_exists "$M/containers/$LONG_ID/X.app"
_assert_ok containerfs container remove --permanently "$LONG_ID" --store "$TEST_STORE"
_assert_output "" fsop listdir "$TEST_STORE/.staging"
_assert_output "$before" fsop listdir "$TEST_STORE/containers"
_assert_output "$before" fsop listdir "$M/containers"
# `.` and `..` are the kernel's: they exist.
_assert_errno EEXIST fsop mkdir "$M/containers/.."
_assert_errno EEXIST fsop mkdir "$M/containers/."

# MARK: the virtual root refuses everything but .Trash-<own uid>
_assert_errno EACCES fsop mkdir "$M/x"
_assert_errno EACCES fsop open "$M/f" "O_WRONLY|O_CREAT"
_assert_errno EACCES fsop symlink /etc "$M/l"
_assert_errno EACCES fsop mknod "$M/p" fifo 644
_assert_errno EACCES fsop rmdir "$M/containers"
_assert_errno EACCES fsop rename "$M/containers" "$M/c2"
_assert_errno EACCES fsop chmod "$M" 755
_assert_errno EACCES fsop mkdir "$M/.Trash-$U1_UID"
_assert_errno EACCES fsop mkdir "$M/.Trash-abc"
# One spelling per uid: no leading zero, no sign, and (uid_t)-1 is nobody's.
_assert_errno EACCES fsop mkdir "$M/.Trash-00"
_assert_errno EACCES fsop mkdir "$M/.Trash-+0"
_assert_errno EACCES fsop mkdir "$M/.Trash-4294967295"
_assert_ok fsop mkdir "$M/.Trash-0"
_assert_output "dir 0700 0" fsop stat "$M/.Trash-0" type perm uid
_assert_errno EEXIST fsop mkdir "$M/.Trash-0"
_assert_output $'.Trash-0\ncontainers\nsnapshots' fsop listdir "$M"

# MARK: containers/ refuses everything but mkdir of a valid id
_assert_errno EACCES fsop open "$M/containers/f" "O_WRONLY|O_CREAT"
_assert_errno EACCES fsop symlink /etc "$M/containers/com.example.link"
_assert_errno EACCES fsop mknod "$M/containers/com.example.fifo" fifo 644
_assert_errno EACCES fsop rmdir "$M/containers/io.example.cli"
_assert_errno EACCES fsop rename "$M/containers/io.example.cli" "$M/containers/io.example.other"
_assert_errno EACCES fsop rename "$C/Documents" "$M/containers/com.example.docs"
_assert_errno EACCES fsop chmod "$M/containers" 755
_assert_exists "$M/containers/io.example.cli"

# MARK: snapshots/ is read-only, for root too
_assert_errno EROFS fsop mkdir "$M/snapshots/x"
_assert_errno EROFS fsop open "$M/snapshots/f" "O_WRONLY|O_CREAT"
_assert_errno EROFS fsop chmod "$M/snapshots" 700
_assert_errno EROFS fsop symlink /etc "$M/snapshots/l"
_assert_errno EROFS fsop mknod "$M/snapshots/p" fifo 644
_assert_errno EROFS fsop utimens "$M/snapshots" now now
_assert_errno EROFS fsop chown "$M/snapshots" 0 0
_assert_errno EROFS fsop setxattr "$M/snapshots" user.x 1
_assert_errno EROFS fsop removexattr "$M/snapshots" user.x
echo f >"$C/Documents/f"
_assert_errno EROFS fsop rename "$C/Documents/f" "$M/snapshots/f"
_assert_errno EROFS fsop link "$C/Documents/f" "$M/snapshots/f"
_assert_errno EACCES fsop rmdir "$M/snapshots"
_assert_errno EACCES fsop rename "$M/snapshots" "$M/snaps"

# MARK: another user: a container of its own, its own trash only
_assert_ok _as_user "$U1" fsop mkdir "$M/containers/org.user.app"
_assert_output "dir 0700 $U1_UID $U1_GID" fsop stat "$M/containers/org.user.app" type perm uid gid
_assert_output "dir 0755 $U1_UID $U1_GID" fsop stat "$M/containers/org.user.app/Documents" type perm uid gid
_assert_errno EINVAL _as_user "$U1" fsop mkdir "$M/containers/bad_id"
_assert_errno EACCES _as_user "$U1" fsop mkdir "$M/.Trash-0x"
_assert_errno EEXIST _as_user "$U1" fsop mkdir "$M/.Trash-0"
_assert_errno EACCES _as_user "$U1" fsop mkdir "$M/.Trash-$U2_UID"
_assert_ok _as_user "$U1" fsop mkdir "$M/.Trash-$U1_UID"
_assert_output "dir 0700 $U1_UID $U1_GID" fsop stat "$M/.Trash-$U1_UID" type perm uid gid
_assert_errno EACCES _as_user "$U1" fsop mkdir "$M/x"
_assert_errno EACCES _as_user "$U1" fsop rmdir "$M/containers/org.user.app"
# Another user's container is private (0700): the kernel says EACCES.
_assert_errno EACCES _as_user "$U2" fsop listdir "$M/containers/org.user.app"

# MARK: the layout survives a remount and matches the CLI's list
fs_umount
fs_mount
_assert_output $'com.example.notes\nio.example.cli\norg.example.todo-list\norg.user.app' fsop listdir "$M/containers"
_assert_output $'Documents\nLibrary\nNotes.app\ntmp' fsop listdir "$C"
out=$(containerfs container list --store "$TEST_STORE" | awk '{ print $1 }' | sort | tr '\n' ' ')
_assert_eq "com.example.notes io.example.cli org.example.todo-list org.user.app " "$out" "container list ids"
