# Nothing can make the daemon create or delete outside the store (docs/SEMANTICS.md §6: openat with
# O_NOFOLLOW, never a path walk): `..` in names, bundle ids with dots, symlinks created
# through the mount or planted in the store, a directory swapped for a symlink behind the
# daemon's back, the CLI given `..`. Symlinks followed by the kernel on the caller's behalf
# (a link to /etc opened through the mount) are fine and work.
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.contained)
D=$C/Documents
SD=$TEST_STORE/containers/com.example.contained/Documents
OUT=$TEST_TMP/outside
mkdir -p "$OUT/victim"
echo precious >"$OUT/victim/file"
snapshot_outside() { (cd "$TEST_TMP" && find outside -printf '%p %y %s %n\n' | sort); }
before=$(snapshot_outside)
etc_before=$(stat -c '%h %i %Y' /etc/passwd /etc/hostname)

# MARK: `..` and dotted names
_assert_errno EEXIST fsop mkdir "$TEST_MNT/containers/.."
_assert_errno EACCES fsop mkdir "$TEST_MNT/containers/../escape"
_assert_errno EINVAL fsop mkdir "$TEST_MNT/containers/a..b"
_assert_errno EINVAL fsop mkdir "$TEST_MNT/containers/..com.example"
_assert_errno EROFS fsop mkdir "$D/../../../snapshots/z"
_assert_errno EACCES fsop mkdir "$D/../../../escape"
_assert_errno EINVAL fsop mkdir "$D/../../escape"   # = containers/escape: not a bundle id
for n in ..x x.. ...; do
    _assert_ok fsop mkdir "$D/$n"
    _assert_exists "$SD/$n"
    _assert_ok fsop rmdir "$D/$n"
done
_assert_missing "$TEST_STORE/escape"
_assert_missing "$TEST_STORE/containers/escape"
_assert_missing "$TEST_MNT/escape"

# MARK: symlinks made through the mount are stored as links, resolved by the kernel
_assert_ok fsop symlink /etc "$D/etc"
_assert_output "/etc" fsop readlink "$SD/etc"
_assert_output "$(cat /etc/hostname)" cat "$D/etc/hostname"
_assert_ok fsop symlink "$OUT/victim" "$D/victim"
_assert_ok fsop symlink ../../../../../../../../etc "$D/climb"
_assert_output "lnk" fsop lstat "$SD/climb" type
# Removing or renaming the link never touches what it points to.
_assert_ok fsop rename "$D/victim" "$D/victim2"
_assert_ok fsop unlink "$D/victim2"
_assert_ok rm -rf "$D/etc" "$D/climb"
_assert_output "precious" cat "$OUT/victim/file"
# Hard-linking a symlink links the symlink; following it to another file system is EXDEV.
_assert_ok fsop symlink /etc/passwd "$D/pw"
_assert_ok fsop link "$D/pw" "$D/pw2"
_assert_output "lnk 2" fsop lstat "$D/pw2" type nlink
_assert_errno EXDEV fsop link "$D/pw" "$D/pw3" follow

# MARK: symlinks planted in the store: the daemon never follows them
ln -s "$OUT/victim" "$SD/planted"
ln -s "$OUT" "$TEST_STORE/containers/com.example.contained/Library/Caches/planted-cache"
_assert_output "lnk" fsop lstat "$D/planted" type
_assert_ok fsop unlink "$D/planted"
_assert_output "precious" cat "$OUT/victim/file"
_assert_ok rm -rf "$C/Library/Caches"/*

# A link planted in STORE/containers is no container (reconcile takes only real
# directories): the mount neither lists nor looks it up (before: `com.example.swap ->
# victim`, which the kernel followed); `container create` of its id names it and says how
# to clear it, and `container remove` removes the link itself (before: "no such file or
# directory" through the daemon, so the id could never be used again).
ln -s "$OUT/victim" "$TEST_STORE/containers/com.example.swap"
_assert_output "com.example.contained" fsop listdir "$TEST_MNT/containers"
_assert_errno ENOENT fsop lstat "$TEST_MNT/containers/com.example.swap"
_assert_errno ENOENT fsop open "$TEST_MNT/containers/com.example.swap/new" "O_WRONLY|O_CREAT"
_assert_errno EEXIST fsop mkdir "$TEST_MNT/containers/com.example.swap"   # the name is taken all the same
_assert_exit 1 containerfs container create com.example.swap --store "$TEST_STORE"
_assert_eq "containerfs: $TEST_STORE/containers/com.example.swap: a symbolic link, not a container, holds this id in the store (\`containerfs container remove com.example.swap\` removes it): an item with that name already exists" "$_OUT" "create over a planted link"
_assert_ok containerfs container remove com.example.swap --store "$TEST_STORE"
_assert_missing "$TEST_STORE/containers/com.example.swap"
_assert_output "precious" cat "$OUT/victim/file"
_assert_ok containerfs container create com.example.swap --store "$TEST_STORE"
_assert_output "dir" fsop lstat "$TEST_MNT/containers/com.example.swap" type
_assert_ok containerfs container remove com.example.swap --store "$TEST_STORE"
# A planted regular file likewise; a user who does not own it may not remove it.
_users
touch "$TEST_STORE/containers/com.example.planted"
_assert_errno ENOENT fsop lstat "$TEST_MNT/containers/com.example.planted"
_assert_exit 1 _as_user "$U1" containerfs container remove com.example.planted --store "$TEST_STORE"
_assert_eq "containerfs: containers/com.example.planted: permission denied" "$_OUT" "a user removing root's stray file"
_assert_ok containerfs container remove com.example.planted --store "$TEST_STORE"
_assert_missing "$TEST_STORE/containers/com.example.planted"

# A directory the kernel holds, swapped for a symlink to the outside in the store: new
# entries made through the kernel's handle land in the moved directory, never outside.
mkdir "$D/held"
"$PY" - "$D/held" "$SD" "$OUT/victim" <<'EOF'
import os, sys
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
held, SD, victim = sys.argv[1:4]
dfd = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
os.rename(os.path.join(SD, "held"), os.path.join(SD, "held.moved"))
os.symlink(victim, os.path.join(SD, "held"))
try:
    fd = os.open("created", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=dfd); os.close(fd)
except OSError:
    pass
try:
    os.mkdir("made", dir_fd=dfd)
except OSError:
    pass
try:
    os.unlink("file", dir_fd=dfd)
except OSError:
    pass
try:
    os.rename("created", "renamed", src_dir_fd=dfd, dst_dir_fd=dfd)
except OSError:
    pass
os.close(dfd)
eq("nothing created in the symlink's target", sorted(os.listdir(victim)), ["file"])
true("what was made went into the real directory", set(os.listdir(os.path.join(SD, "held.moved"))) <= {"renamed", "created", "made"})
done()
EOF
_assert_output "precious" cat "$OUT/victim/file"

# MARK: the CLI refuses ids that are paths (usage errors: exit status 2)
_assert_exit 2 containerfs container create ../../escape --store "$TEST_STORE"
_assert_exit 2 containerfs container create .. --store "$TEST_STORE"
_assert_exit 2 containerfs container remove .. --store "$TEST_STORE"
_assert_exit 2 containerfs container remove ../containers --store "$TEST_STORE"
_assert_exit 2 containerfs container path ../../etc --store "$TEST_STORE"
_assert_exists "$TEST_STORE/containers/com.example.contained"
_assert_missing "$TEST_STORE/escape"
_assert_missing "$TEST_TMP/escape"

# MARK: root working on a store a user owns follows none of that user's links
# The store's log and database are opened by path; root once appended its log to, and
# opened its database through, whatever the store's owner linked there.
_users
US=$TEST_TMP/user-store
mkdir -p "$US" "$TEST_TMP/umnt"
chown "$U1_UID:$U1_GID" "$US"
_assert_ok _as_user "$U1" "$CONTAINERFS" container create org.example.own --store "$US"
for f in log db wal shm; do echo precious >"$OUT/victim/$f"; chmod 600 "$OUT/victim/$f"; done
before=$(snapshot_outside)
plant() { ln -s "$OUT/victim/$2" "$US/$1" && chown -h "$U1_UID:$U1_GID" "$US/$1"; }
plant daemon.log log
_assert_exit 1 containerfs mount "$US" "$TEST_TMP/umnt"
[[ ${_OUT,,} == *"${US,,}/daemon.log: too many levels of symbolic links"* ]] || _fail "a linked daemon.log: $_OUT"
rm "$US/daemon.log"
for f in db-wal:wal db-shm:shm db:db; do
    [[ -e $US/containerfs.${f%%:*} ]] && mv "$US/containerfs.${f%%:*}" "$US/kept.${f%%:*}"
    plant "containerfs.${f%%:*}" "${f#*:}"
    _assert_exit 1 containerfs container list --store "$US"
    [[ ${_OUT,,} == *"${US,,}/containerfs.${f%%:*}: too many levels of symbolic links"* ]] || _fail "a linked containerfs.${f%%:*}: $_OUT"
    _assert_exit 1 containerfs mount "$US" "$TEST_TMP/umnt"
    rm "$US/containerfs.${f%%:*}"
    [[ -e $US/kept.${f%%:*} ]] && mv "$US/kept.${f%%:*}" "$US/containerfs.${f%%:*}"
done
_assert_exit 1 _is_mounted "$TEST_TMP/umnt"
# Root-owned files of the store's own that an older version left there: the lock and the
# log are removed and made again as the owner (root could no longer mount the store:
# "daemon.log: permission denied"); a root-owned database is never handed over (any
# root-owned file the owner moved in under its name would be: a secret became readable),
# and the refusal names it and says what to do. A lock linked to a root-only file loses the
# link only: the file keeps its owner and content.
_assert_ok _as_user "$U1" "$CONTAINERFS" container create org.example.again --store "$US"
install -m 640 /dev/null "$US/daemon.log"
echo secret >"$TEST_TMP/root-only"
chmod 600 "$TEST_TMP/root-only"
rm -f "$US/.lock"
ln "$TEST_TMP/root-only" "$US/.lock"
chown 0:0 "$US/containerfs.db"
_assert_exit 1 containerfs mount "$US" "$TEST_TMP/umnt"
_assert_eq "containerfs: $US/containerfs.db (it belongs to uid 0, in a store uid $U1_UID owns, made so by an older ContainerFS: if it is this store's, \`chown $U1_UID:$U1_GID $US/containerfs.db*\`): Permission denied" "$_OUT" "a root-owned database in a user's store"
_assert_output "0 0 1 secret" sh -c "echo \$(stat -c '%u %g %h' '$TEST_TMP/root-only') \$(cat '$TEST_TMP/root-only')"
chown "$U1_UID:$U1_GID" "$US"/containerfs.db*
_assert_ok containerfs mount "$US" "$TEST_TMP/umnt"
_assert_output $'org.example.again\norg.example.own' fsop listdir "$TEST_TMP/umnt/containers"
_assert_ok containerfs unmount "$TEST_TMP/umnt"
_assert_output "$U1_UID"$'\n'"$U1_UID" stat -c '%u' "$US/daemon.log" "$US/.lock"
_assert_output "0 0 1 secret" sh -c "echo \$(stat -c '%u %g %h' '$TEST_TMP/root-only') \$(cat '$TEST_TMP/root-only')"

# Nothing outside the store changed.
_assert_eq "$before" "$(snapshot_outside)" "the outside tree"
_assert_eq "$etc_before" "$(stat -c '%h %i %Y' /etc/passwd /etc/hostname)" "/etc/passwd and /etc/hostname"
