# `containerfs snapshot publish|list|remove` (docs/SEMANTICS.md §4, docs/DESIGN.md 52):
# a snapshot holds exactly what it should (files, a hard link, symlinks, xattrs; not the
# bundle, tmp/, Library/Caches/ or excluded items), byte for byte, stays frozen while the
# live files change through the mount, is EROFS for root, has inode numbers of its own,
# and goes by `remove` or when it expires (also across a remount). Through the daemon while
# mounted, on the store without a mount.
. "$(dirname "$0")/../lib/common.sh"
_require_root
_users
S=$TEST_STORE M=$TEST_MNT
fs_mount
C=$M/containers/com.example.snap
_mkcontainer com.example.snap >/dev/null
D=$C/Documents
cd "$TEST_TMP"

# MARK: a container with something of every kind
printf 'alpha\n' >"$D/a.txt"
mkdir "$D/sub"
ln "$D/a.txt" "$D/sub/a-link"
ln -s ../a.txt "$D/sub/sym"
ln -s /nowhere "$D/dangling"
head -c 200000 /dev/urandom >"$D/sub/big.bin"
chmod 640 "$D/a.txt"
chown 1234:2345 "$D/sub/big.bin"
touch -d '2020-01-02 03:04:05.123456789' "$D/sub/big.bin"
_assert_output OK fsop setxattr "$D/a.txt" user.colour blue
printf 'secret\n' >"$D/excluded.txt"
_assert_ok containerfs exclude "$D/excluded.txt"
printf 't\n' >"$C/tmp/t" && printf 'c\n' >"$C/Library/Caches/c" && printf 'p\n' >"$C/Library/Preferences/p.plist"
LIVE_INO=$(fsop stat "$D/a.txt" ino)

# MARK: publish through the daemon; the kernel sees the new entry at once
_assert_output "" ls "$M/snapshots"
_assert_output "$M/snapshots/snap1" containerfs snapshot publish "$C" --name snap1
_assert_output "snap1" ls "$M/snapshots"
P=$M/snapshots/snap1
_assert_output "./Documents
./Documents/Inbox
./Documents/a.txt
./Documents/dangling
./Documents/sub
./Documents/sub/a-link
./Documents/sub/big.bin
./Documents/sub/sym
./Library
./Library/Application Support
./Library/Preferences
./Library/Preferences/p.plist" sh -c "cd '$P' && find . -mindepth 1 | sort"
for f in Documents/a.txt Documents/sub/big.bin Library/Preferences/p.plist; do
    _assert_ok cmp "$C/$f" "$P/$f"
done
_assert_output "640 0 0" stat -c '%a %u %g' "$P/Documents/a.txt"
_assert_output "$(stat -c '%a %u %g %y' "$D/sub/big.bin")" stat -c '%a %u %g %y' "$P/Documents/sub/big.bin"
_assert_output "$(stat -c '%a %y' "$D/sub")" stat -c '%a %y' "$P/Documents/sub"
_assert_output blue fsop getxattr "$P/Documents/a.txt" user.colour
_assert_output ../a.txt readlink "$P/Documents/sub/sym"
_assert_output /nowhere readlink "$P/Documents/dangling"

# MARK: inode numbers of its own; the hard link stays one file; live counts unchanged
SNAP_INO=$(fsop stat "$P/Documents/a.txt" ino)
_assert_ne "$LIVE_INO" "$SNAP_INO" "snapshot inode"
_assert_output "$SNAP_INO 2" fsop stat "$P/Documents/sub/a-link" ino nlink
_assert_output "$LIVE_INO 2" fsop stat "$D/a.txt" ino nlink

# MARK: frozen while the live files change through the mount
printf 'rewritten\n' >"$D/a.txt"
truncate -s 10 "$D/sub/big.bin"
chmod 600 "$D/sub/big.bin"
_assert_output OK fsop setxattr "$D/a.txt" user.colour red
mv "$D/sub" "$D/moved"
rm "$D/dangling"
_assert_output "alpha" cat "$P/Documents/a.txt"
_assert_output "alpha" cat "$P/Documents/sub/a-link"
_assert_output "200000 644" stat -c '%s %a' "$P/Documents/sub/big.bin"
_assert_output blue fsop getxattr "$P/Documents/a.txt" user.colour
_assert_output /nowhere readlink "$P/Documents/dangling"

# MARK: read-only for root: every mutation is EROFS
_assert_errno EROFS fsop write "$P/Documents/a.txt" x
_assert_errno EROFS fsop open "$P/Documents/new" 'O_WRONLY|O_CREAT' 644
_assert_errno EROFS fsop unlink "$P/Documents/a.txt"
_assert_errno EROFS fsop rename "$P/Documents/a.txt" "$P/Documents/b.txt"
_assert_errno EROFS fsop chmod "$P/Documents/a.txt" 777
_assert_errno EROFS fsop setxattr "$P/Documents/a.txt" user.colour green
_assert_errno EROFS fsop mkdir "$P/Documents/d"
_assert_errno EROFS fsop truncate "$P/Documents/a.txt" 0
_assert_errno EROFS fsop rmdir "$P/Library/Application Support"

# MARK: default names: sortable, unique
N1=$(containerfs snapshot publish "$D/a.txt")
N2=$(containerfs snapshot publish "$D/a.txt")
[[ $N1 =~ ^$M/snapshots/com\.example\.snap-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}-[0-9]{2}(\.2)?$ ]] || _fail "default name: $N1"
_ok "default name $N1"
[[ $N2 == "$N1.2" || $N2 == "$N1.3" || ${N2%T*} == "${N1%T*}" ]] || _fail "second default name: $N2"
_assert_ne "$N1" "$N2" "second default name"
_assert_output "rewritten" cat "$N1"
_assert_output "regular file" stat -c %F "$N2"

# MARK: list, text and JSON
_assert_output "snap1	containers/com.example.snap	-	4	200008" \
    sh -c "containerfs snapshot list --store '$S' | awk -F'\t' '\$1 == \"snap1\" { print \$1 \"\t\" \$2 \"\t\" \$4 \"\t\" \$5 \"\t\" \$6 }'"
_assert_output "3" sh -c "containerfs snapshot list --store '$S' | wc -l"
_assert_output "snap1 containers/com.example.snap None 4 200008 $P" \
    sh -c "containerfs snapshot list --json --store '$S' | $PY -c 'import json,sys; e=[x for x in json.load(sys.stdin) if x[\"name\"]==\"snap1\"][0]; print(e[\"name\"], e[\"source\"], e[\"expires\"], e[\"files\"], e[\"bytes\"], e[\"path\"])'"

# MARK: remove; the kernel forgets the entry at once
_assert_ok containerfs snapshot remove "${N1##*/}" "${N2##*/}" --store "$S"
_assert_output "snap1" ls "$M/snapshots"
_assert_exit 1 containerfs snapshot remove nosuch --store "$S"
_assert_eq "containerfs: snapshots/nosuch: no such file or directory" "$_OUT" "remove of an unknown name"

# MARK: usage errors exit 2; bad paths exit 1, naming the path and the reason
_assert_exit 2 containerfs snapshot publish
_assert_exit 2 containerfs snapshot publish "$C" --expires soon
[[ $_OUT == *"--expires soon: a duration such as 3600, 90m, 12h or 30d"* ]] || _fail "expires: $_OUT"
_assert_exit 2 containerfs snapshot publish "$C" --name .hidden
[[ $_OUT == *".hidden: not a snapshot name"* ]] || _fail "name: $_OUT"
_assert_exit 2 containerfs snapshot publish "$C" --name a/b
_assert_exit 2 containerfs snapshot remove --store "$S"
_assert_exit 2 containerfs snapshot nosuch
_assert_exit 1 containerfs snapshot publish "$C/Documents/missing"
_assert_eq "containerfs: $D/missing: no such file or directory" "$_OUT" "missing source"
_assert_exit 1 containerfs snapshot publish "$M/containers/com.example.nosuch"
_assert_eq "containerfs: $M/containers/com.example.nosuch: no such file or directory" "$_OUT" "missing container"
_assert_exit 1 containerfs snapshot publish "$P"
_assert_eq "containerfs: $M/snapshots/snap1: not a container or an item inside one (containers/ID[/…]): invalid argument" "$_OUT" "a snapshot as source"
_assert_exit 1 containerfs snapshot publish "$C/tmp"
_assert_eq "containerfs: $C/tmp: excluded from snapshots (the bundle, tmp/, Library/Caches/ or user.containerfs.exclude-from-backup): invalid argument" "$_OUT" "an excluded source"
_assert_exit 1 containerfs snapshot publish "$C" --name snap1
_assert_eq "containerfs: $M/snapshots/snap1: an item with that name already exists" "$_OUT" "a taken name"
_assert_exit 1 containerfs snapshot publish /nonexistent/x
_assert_eq "containerfs: /nonexistent/x: not under a ContainerFS mount, nor in a store's containers/" "$_OUT" "outside any mount"

# MARK: another user: their own container only; root's snapshots stay root's
_assert_ok _as_user "$U1" containerfs container create org.example.user --store "$S"
UC=$M/containers/org.example.user
_assert_output OK _as_user "$U1" fsop openw "$UC/Documents/mine" 'O_WRONLY|O_CREAT' mine 600
_assert_output "$M/snapshots/user1" _as_user "$U1" containerfs snapshot publish "$UC" --name user1
_assert_output "$U1_UID 600 mine" sh -c "stat -c '%u %a' '$M/snapshots/user1/Documents/mine' | tr '\n' ' '; cat '$M/snapshots/user1/Documents/mine'"
_assert_exit 1 _as_user "$U1" containerfs snapshot publish "$C"
_assert_eq "containerfs: containers/com.example.snap: only its owner (uid 0) or root may publish snapshots of it: permission denied" "$_OUT" "another's container"
_assert_exit 1 _as_user "$U1" containerfs snapshot remove snap1 --store "$S"
_assert_eq "containerfs: snapshots/snap1 (only its publisher or root may remove it): permission denied" "$_OUT" "another's snapshot"
_assert_errno EROFS _as_user "$U1" fsop unlink "$M/snapshots/user1/Documents/mine"
_assert_ok _as_user "$U1" containerfs snapshot remove user1 --store "$S"
_assert_output "snap1" ls "$M/snapshots"

# MARK: expiry: a snapshot whose time passed while unmounted is gone at the next mount
# (Its time is moved to the past while unmounted: a 1 s expiry could pass during a slow
# unmount, and the mounted daemon's timer, snapshot-expiry's business, would take it.)
_assert_output "$M/snapshots/short" containerfs snapshot publish "$D/a.txt" --name short --expires 3600
fs_umount
sqlite3 "$S/containerfs.db" "UPDATE snapshots SET expires = strftime('%s', 'now') - 1 WHERE name = 'short'"
_assert_exists "$S/snapshots/short"
fs_mount
_assert_output "snap1" ls "$M/snapshots"
_assert_missing "$S/snapshots/short"
fs_umount

# MARK: without a mount: on the store itself
mkfifo "$S/containers/com.example.snap/Documents/fifo"
_assert_exit 0 containerfs snapshot publish "$S/containers/com.example.snap/Documents" --name direct
_assert_eq "$S/snapshots/direct
containerfs: warning: $S/containers/com.example.snap/Documents/fifo: skipped (a FIFO)" "$(sort <<<"$_OUT")" "publish on the store, a FIFO skipped"
_assert_output "./Inbox
./a.txt
./moved
./moved/a-link
./moved/big.bin
./moved/sym" sh -c "cd '$S/snapshots/direct' && find . -mindepth 1 | sort"
_assert_output "direct
snap1" sh -c "containerfs snapshot list --store '$S' | cut -f1 | sort"
_assert_ok containerfs snapshot remove direct --store "$S"
_assert_missing "$S/snapshots/direct"
_assert_output "" ls -A "$S/.staging"
