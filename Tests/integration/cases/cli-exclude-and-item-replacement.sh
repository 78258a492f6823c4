# `containerfs exclude PATH [--off]` sets and clears user.containerfs.exclude-from-backup
# (value 1), as setfattr through the mount does (SPEC §4); `container path ID --directory
# item-replacement [--for PATH]` makes a fresh private directory in the container of the
# item to replace (containers-and-wrappers §2.3).
. "$(dirname "$0")/../lib/common.sh"
_users
S=$TEST_STORE M=$TEST_MNT
X=user.containerfs.exclude-from-backup
_assert_ok containerfs container create com.example.notes --store "$S"
fs_mount
C=$M/containers/com.example.notes
echo data >"$C/Documents/a.txt"

# MARK: exclude
_assert_ok containerfs exclude "$C/Documents/a.txt"
_assert_output "1" getfattr --absolute-names --only-values -n "$X" "$C/Documents/a.txt"
_assert_output "1" getfattr --absolute-names --only-values -n "$X" "$S/containers/com.example.notes/Documents/a.txt"
_assert_ok containerfs exclude "$C/Library"
_assert_output "1" getfattr --absolute-names --only-values -n "$X" "$C/Library"
_assert_ok containerfs exclude "$C/Documents/a.txt" --off
_assert_exit 1 getfattr --absolute-names -n "$X" "$C/Documents/a.txt"
[[ $_OUT == *"No such attribute"* ]] || _fail "cleared: $_OUT"
_assert_ok containerfs exclude "$C/Documents/a.txt" --off     # clearing twice is no error
# setfattr through the mount: the same attribute, read back by the CLI's reader, getfattr.
_assert_ok setfattr -n "$X" -v 1 "$C/Documents/a.txt"
_assert_output "1" getfattr --absolute-names --only-values -n "$X" "$C/Documents/a.txt"
_assert_ok setfattr -x "$X" "$C/Documents/a.txt"
_assert_exit 1 getfattr --absolute-names -n "$X" "$C/Documents/a.txt"
# Where the mount refuses changes, so does exclude, naming the path and the reason.
_assert_exit 1 containerfs exclude "$C/Notes.app"
_assert_eq "containerfs: $C/Notes.app: Read-only file system" "$_OUT" "bundle"
_assert_ok containerfs inbox deliver com.example.notes "$C/Documents/a.txt" --store "$S"
_assert_exit 1 containerfs exclude "$C/Documents/Inbox/a.txt"
_assert_eq "containerfs: $C/Documents/Inbox/a.txt: Permission denied" "$_OUT" "Inbox"
_assert_exit 1 containerfs exclude "$C/Documents/missing"
_assert_eq "containerfs: $C/Documents/missing: No such file or directory" "$_OUT" "missing"
_assert_exit 2 containerfs exclude
# A user: their own items only.
_assert_ok _as_user "$U1" containerfs container create org.example.user --store "$S"
UC=$M/containers/org.example.user
_as_user "$U1" sh -c "echo u >'$UC/Documents/u'"
_assert_ok _as_user "$U1" containerfs exclude "$UC/Documents/u"
_assert_output "1" getfattr --absolute-names --only-values -n "$X" "$UC/Documents/u"
_assert_exit 1 _as_user "$U1" containerfs exclude "$C/Documents/a.txt"
_assert_eq "containerfs: $C/Documents/a.txt: Permission denied" "$_OUT" "another's item"

# MARK: item replacement directories
T="$C/tmp/TemporaryItems/(A Document Being Saved By containerfs)"
_assert_output "$T" containerfs container path com.example.notes --directory item-replacement --store "$S"
_assert_output "$T 2" containerfs container path com.example.notes --directory item-replacement --store "$S"
_assert_output "dir 0700 0" fsop stat "$T 2" type perm uid
# The container of --for's item, whichever ID is given.
_assert_output "$UC/tmp/TemporaryItems/(A Document Being Saved By containerfs)" _as_user "$U1" containerfs container path org.example.user --directory item-replacement --for "$UC/Documents/u" --store "$S"
_assert_output "dir 0700 $U1_UID $U1_GID" fsop stat "$UC/tmp/TemporaryItems/(A Document Being Saved By containerfs)" type perm uid gid
_assert_output "$T 3" containerfs container path org.example.user --directory item-replacement --for "$C/Documents/a.txt" --store "$S"
# The replace-by-rename it is for stays in one container.
echo new >"$T 3/a.txt"
_assert_ok mv "$T 3/a.txt" "$C/Documents/a.txt"
_assert_output "new" cat "$C/Documents/a.txt"
# Refusals.
_assert_exit 1 containerfs container path com.example.notes --directory item-replacement --for "$M/snapshots/x" --store "$S"
_assert_eq "containerfs: $M/snapshots/x: Read-only file system (snapshots never change; no item in them can be replaced)" "$_OUT" "snapshot"
_assert_exit 1 containerfs container path com.example.notes --directory item-replacement --for "$M/containers" --store "$S"
_assert_eq "containerfs: $M/containers: not inside a container (an item replacement directory is made in the container of the item to replace)" "$_OUT" "outside"
_assert_exit 1 containerfs container path com.example.notes --directory item-replacement --for "$TEST_TMP" --store "$S"
_assert_eq "containerfs: $TEST_TMP: not under a ContainerFS mount" "$_OUT" "not under the mount"
_assert_exit 1 _as_user "$U1" containerfs container path com.example.notes --directory item-replacement --store "$S"
_assert_eq "containerfs: containers/com.example.notes: only its owner (uid 0) or root may make an item replacement directory in it: permission denied" "$_OUT" "another's container"
_assert_exit 1 containerfs container path com.example.none --directory item-replacement --store "$S"
_assert_eq "containerfs: containers/com.example.none: no such file or directory" "$_OUT" "unknown container"
# An invalid id is a usage error, as for every `container` subcommand (exit 2, naming it).
_assert_exit 2 containerfs container path not_valid --directory item-replacement --store "$S"
[[ $_OUT == *"not_valid: not a valid bundle identifier"* ]] || _fail "invalid id: $_OUT"
_assert_exit 2 containerfs container path com.example.notes --directory documents --for "$C" --store "$S"
[[ $_OUT == *"--for goes with --directory item-replacement"* ]] || _fail "--for without item-replacement: $_OUT"
fs_umount
_assert_exit 1 containerfs container path com.example.notes --directory item-replacement --store "$S"
_assert_eq "containerfs: $S: no live mount of this store (paths are answered under the mount)" "$_OUT" "unmounted"
