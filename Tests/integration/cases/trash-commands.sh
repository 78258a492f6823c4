# `containerfs trash PATH...`, `trash list`, `trash restore`, `trash empty` and `container
# remove` to the trash (docs/SEMANTICS.md, trash; docs/DESIGN.md 48-51): through the daemon
# while mounted (moves through the mount, as the caller), directly on the store without a
# mount, as root and as another user; names made unique as a.2.txt.
. "$(dirname "$0")/../lib/common.sh"
_users
S=$TEST_STORE M=$TEST_MNT
_assert_ok containerfs container create com.example.notes --store "$S"
fs_mount
_assert_ok _as_user "$U1" containerfs container create org.example.user --store "$S"
C=$M/containers/com.example.notes D=$C/Documents T=$M/.Trash-0
cd "$TEST_TMP"

# MARK: trash: the resulting path, unique names, the kernel sees it at once
echo one >"$D/a.txt"
_assert_output "one" cat "$D/a.txt"
_assert_output "$T/files/a.txt" containerfs trash "$D/a.txt"
_assert_errno ENOENT fsop stat "$D/a.txt"
echo two >"$D/a.txt"
mkdir -p "$D/dir/sub" && echo deep >"$D/dir/sub/f" && echo 12345 >"$D/dir/g"
_assert_output "$T/files/a.2.txt
$T/files/dir" containerfs trash "$D/a.txt" "$D/dir"
_assert_output "one" cat "$T/files/a.txt"
_assert_output "two" cat "$T/files/a.2.txt"
_assert_output "[Trash Info]
Path=containers/com.example.notes/Documents/a.txt" head -2 "$T/info/a.2.txt.trashinfo"
grep -Eq '^DeletionDate=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$' "$T/info/a.2.txt.trashinfo" || _fail "DeletionDate: $(cat "$T/info/a.2.txt.trashinfo")"
# A relative path works too; one failing item leaves the others going (exit 1).
echo rel >"$D/rel.txt"
_assert_exit 1 env -C "$D" containerfs trash rel.txt missing.txt
_assert_eq "$T/files/rel.txt
containerfs: $D/missing.txt: no such file or directory" "$_OUT" "one item missing"

# MARK: list, text and JSON; directorysizes kept
_assert_output "a.2.txt	$(sed -n 's/^DeletionDate=//p' "$T/info/a.2.txt.trashinfo")	4	$D/a.txt" \
    sh -c "containerfs trash list --store '$S' | grep '^a.2.txt'"
_assert_output "dir	11" sh -c "containerfs trash list --store '$S' | awk -F'\t' '\$1 == \"dir\" { print \$1 \"\t\" \$3 }'"
_assert_output "11 $(stat -c %Y "$T/info/dir.trashinfo") dir" cat "$T/directorysizes"
_assert_output '[{"name":"a.2.txt","originalPath":"'"$D"'/a.txt","size":4,"type":"file"}]' \
    sh -c "containerfs trash list --json --store '$S' | python3 -c 'import json,sys; print(json.dumps([{k: e[k] for k in (\"name\",\"originalPath\",\"size\",\"type\")} for e in json.load(sys.stdin) if e[\"name\"] == \"a.2.txt\"], separators=(\",\",\":\")))'"
_assert_output "4" sh -c "containerfs trash list --json --store '$S' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'"

# MARK: restore: back in place, never over an item, --to elsewhere
_assert_output "$D/a.txt" containerfs trash restore a.txt --store "$S"
_assert_output "one" cat "$D/a.txt"
_assert_exit 1 containerfs trash restore a.2.txt --store "$S"
_assert_eq "containerfs: $D/a.txt (restore never overwrites: move it away, or restore with --to): an item with that name already exists" "$_OUT" "no overwrite"
_assert_output "one" cat "$D/a.txt"
_assert_output "two" cat "$T/files/a.2.txt"
mkdir "$D/elsewhere"
_assert_output "$D/elsewhere/a.txt" containerfs trash restore a.2.txt --to "$D/elsewhere" --store "$S"
_assert_output "two" cat "$D/elsewhere/a.txt"
_assert_output "$D/dir" containerfs trash restore dir --store "$S"
_assert_output "deep" cat "$D/dir/sub/f"
_assert_output "" cat "$T/directorysizes"
_assert_exit 1 containerfs trash restore nosuch --store "$S"
_assert_eq "containerfs: nosuch: no such item in the trash (\`containerfs trash list\` shows the names)" "$_OUT" "unknown name"

# MARK: empty: named items, by age, all
echo x >"$D/x" && echo y >"$D/y"
_assert_ok containerfs trash "$D/x" "$D/y"
_assert_output "removed 1 item, 2 bytes" containerfs trash empty x --store "$S"
_assert_missing "$T/files/x"
_assert_missing "$T/info/x.trashinfo"
_assert_output "removed 0 items, 0 bytes" containerfs trash empty --older-than 1d --store "$S"
_assert_exists "$T/files/y"
_assert_output "removed 2 items, 6 bytes" containerfs trash empty --store "$S"
_assert_output "" fsop listdir "$T/files"
_assert_output "" fsop listdir "$T/info"
_assert_output "" fsop listdir "$T/expunged"

# MARK: another user: their own trash, their own container only
UC=$M/containers/org.example.user
_as_user "$U1" sh -c "echo mine >'$UC/Documents/u.txt'"
_assert_output "$M/.Trash-$U1_UID/files/u.txt" _as_user "$U1" containerfs trash "$UC/Documents/u.txt"
_assert_output "$U1_UID 700" stat -c '%u %a' "$M/.Trash-$U1_UID"
_assert_output "$U1_UID" stat -c '%u' "$M/.Trash-$U1_UID/info/u.txt.trashinfo"
_assert_output "u.txt" sh -c "_as_user() { :; }; setpriv --reuid=$U1_UID --regid=$U1_GID --clear-groups $CONTAINERFS trash list --store '$S' | cut -f1"
_assert_output "" sh -c "containerfs trash list --store '$S'"   # root's trash is empty
echo rootfile >"$D/r.txt"
_assert_exit 1 _as_user "$U1" containerfs trash "$D/r.txt"
_assert_eq "containerfs: $D/r.txt: permission denied" "$_OUT" "another user's file"
_assert_output "rootfile" cat "$D/r.txt"
_assert_output "$UC/Documents/u.txt" _as_user "$U1" containerfs trash restore u.txt --store "$S"
_assert_output "mine" cat "$UC/Documents/u.txt"
# A user removes their own container (the daemon moves its root, in a directory only the
# store's owner may change) and restores it.
_assert_output "$M/.Trash-$U1_UID/files/org.example.user" _as_user "$U1" containerfs container remove org.example.user --store "$S"
_assert_errno ENOENT fsop stat "$UC"
_assert_output "$UC" _as_user "$U1" containerfs trash restore org.example.user --store "$S"
_assert_output "mine" cat "$UC/Documents/u.txt"

# MARK: container remove: the container as one item, restorable as a container
echo kept >"$D/kept.txt"
_assert_output "$T/files/com.example.notes" containerfs container remove com.example.notes --store "$S"
_assert_errno ENOENT fsop stat "$C"
_assert_output "org.example.user" sh -c "containerfs container list --store '$S' | cut -f1"
_assert_output "containers/com.example.notes" sed -n 's/^Path=//p' "$T/info/com.example.notes.trashinfo"
_assert_exit 1 _as_user "$U1" containerfs container remove com.example.notes --store "$S"
_assert_output "$C" containerfs trash restore com.example.notes --store "$S"
_assert_output "kept" cat "$D/kept.txt"
_assert_output $'com.example.notes\t0\norg.example.user\t'"$U1_UID" sh -c "containerfs container list --store '$S' | cut -f1,3 | sed 's/uid //'"
# Another user may not trash it by its path either (the daemon moves a container's root with
# its own rights, so it checks who asks).
_assert_exit 1 _as_user "$U1" containerfs trash "$C"
_assert_eq "containerfs: $C: permission denied" "$_OUT" "another user's container by path"
_assert_exists "$C/Documents/kept.txt"
# Another user may not remove it; a run in it holds it, unless --force.
_assert_exit 1 _as_user "$U1" containerfs container remove com.example.notes --store "$S"
_assert_eq "containerfs: containers/com.example.notes: permission denied" "$_OUT" "not the owner"
containerfs run --store "$S" com.example.notes -- sleep 30 &
runner=$!
_wait_for 10 eval '[[ -n $(sqlite3 "$S/containerfs.db" "select 1 from container_runs limit 1" 2>/dev/null) ]]' || _fail "run not recorded"
_assert_exit 1 containerfs container remove com.example.notes --store "$S"
_assert_eq "containerfs: $M/containers/com.example.notes (a program started by \`containerfs run\` for it is still running; --force removes it anyway): busy" "$_OUT" "in use"
_assert_exists "$C/Documents/kept.txt"
_assert_output "$T/files/com.example.notes" containerfs container remove --force com.example.notes --store "$S"
kill "$runner" 2>/dev/null; wait "$runner" 2>/dev/null || true
_assert_output "$C" containerfs trash restore com.example.notes --store "$S"
_assert_ok containerfs container remove --permanently com.example.notes --store "$S"
_assert_output "" fsop listdir "$T/files"
_assert_errno ENOENT fsop stat "$C"
fs_umount

# MARK: without a mount: the same core on the store, under its lock; the next mount sees it
_assert_ok containerfs container create com.example.direct --store "$S"
SD=$S/containers/com.example.direct/Documents
echo direct >"$SD/d.txt"
_assert_output "$S/trash/.Trash-0/files/d.txt" containerfs trash "$SD/d.txt"
_assert_output "d.txt" sh -c "containerfs trash list --store '$S' | cut -f1"
_assert_output "$S/containers/com.example.direct/Documents/d.txt" sh -c "containerfs trash list --store '$S' | cut -f4"
fs_mount
_assert_output "direct" cat "$M/.Trash-0/files/d.txt"
_assert_output "d.txt	$M/containers/com.example.direct/Documents/d.txt" sh -c "containerfs trash list --store '$S' | cut -f1,4"
fs_umount
_assert_output "$SD/d.txt" containerfs trash restore d.txt --store "$S"
_assert_output "direct" cat "$SD/d.txt"

# MARK: usage errors exit 2; paths outside any mount or store exit 1
_assert_exit 2 containerfs trash
_assert_exit 2 containerfs trash restore --store "$S"
_assert_exit 2 containerfs trash empty --older-than soon --store "$S"
_assert_exit 2 containerfs trash restore a b --to "$SD" --store "$S"
_assert_exit 1 containerfs trash /etc/hostname
_assert_eq "containerfs: /etc/hostname: not under a ContainerFS mount, nor in a store's containers/" "$_OUT" "outside"

# MARK: with two live mounts and no --store, the store used is named
fs_mount
_assert_ok containerfs container create com.example.other --store "$TEST_TMP/other"
fs_mount_at "$TEST_TMP/other" "$TEST_TMP/other-mnt"
_assert_exit 1 env -u CONTAINERFS_STORE HOME="$TEST_TMP/home" XDG_DATA_HOME= containerfs trash list
_assert_eq "containerfs: using the store $TEST_TMP/home/.local/share/containerfs (2 ContainerFS mounts are live, of $S, $TEST_TMP/other; --store or CONTAINERFS_STORE picks another)
containerfs: $TEST_TMP/home/.local/share/containerfs: not a ContainerFS store (no such directory)" "$_OUT" "ambiguous store"
_assert_output "" env CONTAINERFS_STORE="$TEST_TMP/other" containerfs trash list
fs_umount "$TEST_TMP/other-mnt"
fs_umount
