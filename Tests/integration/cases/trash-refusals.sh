# timeout: 60
# What the trash refuses (docs/DESIGN.md 48-51): info files are untrusted input (anyone who
# owns .Trash-UID writes them, so do other programs): a forged or broken one is listed with
# its problem and never restored, and nothing moves; the bundle, snapshots/ and the
# standard directories cannot be trashed; restore never overwrites, re-creates missing
# parents inside the container, names a container that is gone; usage errors exit 2.
. "$(dirname "$0")/../lib/common.sh"
S=$TEST_STORE M=$TEST_MNT
fs_mount
C=$M/containers/com.example.notes
_mkcontainer com.example.notes >/dev/null
T=$M/.Trash-0
list() { containerfs trash list --store "$S"; }

# MARK: forged and broken info files
mkdir -m 700 "$T" "$T/files" "$T/info"
forge() {   # forge NAME CONTENT: an info file and its item
    printf '%b' "$2" >"$T/info/$1.trashinfo"
    echo "item $1" >"$T/files/$1"
}
D='DeletionDate=2026-01-02T03:04:05'
forge abs "[Trash Info]\nPath=/etc/passwd\n$D\n"
forge dotdot "[Trash Info]\nPath=containers/com.example.notes/../../../etc/passwd\n$D\n"
forge other "[Trash Info]\nPath=.Trash-1000/files/x\n$D\n"
forge enc "[Trash Info]\nPath=containers/com.example.notes/Documents/a%zz\n$D\n"
forge nogroup "Path=containers/com.example.notes/Documents/ng\n$D\n"
forge outside "[Trash Info]\nPath=snapshots/s1/x\n$D\n"
printf '[Trash Info]\nPath=containers/com.example.notes/Documents/lonely\n%s\n' "$D" >"$T/info/lonely.trashinfo"
echo orphan >"$T/files/orphan"
I="$T/info"
P_ABS="$I/abs.trashinfo: its Path= is absolute (a file of this volume's trash names a path relative to the mount): invalid argument"
P_DOTDOT="$I/dotdot.trashinfo: its Path= has '.' or '..' components or empty ones (it would lead out of its place): invalid argument"
P_ENC="$I/enc.trashinfo: its Path= is not percent-encoded: invalid argument"
P_NOGROUP="$I/nogroup.trashinfo: not a trash info file (no [Trash Info] group): invalid argument"
P_OTHER="$I/other.trashinfo: its Path= leads into a trash directory: invalid argument"
_assert_output "abs	-	9	-	($P_ABS)
dotdot	-	12	-	($P_DOTDOT)
enc	-	9	-	($P_ENC)
lonely	2026-01-02T03:04:05	0	$M/containers/com.example.notes/Documents/lonely	(no item in files/ for this info file)
nogroup	-	13	-	($P_NOGROUP)
other	-	11	-	($P_OTHER)
outside	2026-01-02T03:04:05	13	$M/snapshots/s1/x
orphan	-	0	-	(no info file for this item)" list
_assert_output 'orphan||no info file for this item' sh -c "containerfs trash list --json --store '$S' | '$PY' -c 'import json,sys
for r in json.load(sys.stdin):
    if r[\"name\"] == \"orphan\": print(r[\"name\"], r.get(\"originalPath\", \"\"), r[\"problem\"], sep=\"|\")'"
refuse() {   # refuse NAME MESSAGE
    _assert_exit 1 containerfs trash restore "$1" --store "$S"
    _assert_eq "containerfs: $2" "$_OUT" "restore $1: message"
}
refuse abs "$P_ABS"
refuse dotdot "$P_DOTDOT"
refuse other "$P_OTHER"
refuse enc "$P_ENC"
refuse nogroup "$P_NOGROUP"
refuse lonely "$T/files/lonely (its info file names no item in files/: nothing to restore): no such file or directory"
refuse orphan "$T/info/orphan.trashinfo (the trash has no info file for orphan): no such file or directory"
refuse outside "$M/snapshots/s1/x: read-only (bundle or snapshot)"
# --to does not make a forged file usable either.
_assert_exit 1 containerfs trash restore abs --to "$C/Documents" --store "$S"
_assert_eq "containerfs: $P_ABS" "$_OUT" "restore abs --to: message"
# Nothing moved: every item and info file is where it was, nothing reached its Path=.
_assert_output $'abs\ndotdot\nenc\nnogroup\norphan\nother\noutside' fsop listdir "$T/files"
_assert_output $'abs.trashinfo\ndotdot.trashinfo\nenc.trashinfo\nlonely.trashinfo\nnogroup.trashinfo\nother.trashinfo\noutside.trashinfo' fsop listdir "$T/info"
_assert_output "item abs" cat "$T/files/abs"
_assert_output $'Inbox' fsop listdir "$C/Documents"
_assert_missing "$M/.Trash-1000"
_assert_missing "$S/trash/.Trash-1000"
_assert_output "" fsop listdir "$M/snapshots"
# Emptying removes the unusable ones too (they are the user's own files).
_assert_output "removed 8 items, 74 bytes" containerfs trash empty --store "$S"
_assert_output "" list
_assert_output "" fsop listdir "$T/files"
_assert_output "" fsop listdir "$T/info"

# MARK: what cannot go to the trash
mkdir -p "$TEST_TMP/bundle/sub"
echo b >"$TEST_TMP/bundle/f"
echo g >"$TEST_TMP/bundle/sub/g"
_assert_ok containerfs container create com.example.bun --bundle "$TEST_TMP/bundle" --store "$S"
B=$M/containers/com.example.bun
_assert_eq "Bun.app" "$(_bundle_name com.example.bun)" "bundle name"
# Inside the bundle: read-only (EROFS), as any change there through the mount.
for p in Bun.app/f Bun.app/sub Bun.app/sub/g; do
    _assert_exit 1 containerfs trash "$B/$p"
    _assert_eq "containerfs: $B/$p: read-only (bundle or snapshot)" "$_OUT" "trash $p"
done
# The bundle directory itself is a standard directory of the container: EACCES, as `mv`
# of it through the mount (docs/SEMANTICS.md; Zone.checkRename: a standard directory, the
# bundle's included, is EACCES before its contents' EROFS).
_assert_errno EACCES mv "$B/Bun.app" "$B/Documents/x"
refused() { echo "containerfs: $1 (it cannot be moved to the trash: a standard directory, or Inbox, or not yours): permission denied"; }
for p in Bun.app Documents Library tmp Documents/Inbox Library/Caches Library/Preferences "Library/Application Support"; do
    _assert_exit 1 containerfs trash "$B/$p"
    _assert_eq "$(refused "$B/$p")" "$_OUT" "trash $p"
done
_assert_output $'f\nsub' fsop listdir "$B/Bun.app"
_assert_output $'Bun.app\nDocuments\nLibrary\ntmp' fsop listdir "$B"
_assert_output "Inbox" fsop listdir "$B/Documents"
_assert_exit 1 containerfs trash "$M/snapshots"
_assert_eq "containerfs: $M/snapshots: read-only (bundle or snapshot)" "$_OUT" "trash snapshots/"
_assert_exit 1 containerfs trash "$M/snapshots/none"
_assert_eq "containerfs: $M/snapshots/none: read-only (bundle or snapshot)" "$_OUT" "trash snapshots/none"
_assert_exit 1 containerfs trash "$M/containers"
_assert_eq "containerfs: $M/containers: not an item in a container (only items of containers/ID/ go to the trash): invalid argument" "$_OUT" "trash containers/"
_assert_exit 1 containerfs trash "$T/files"
_assert_eq "containerfs: $T/files: not an item in a container (only items of containers/ID/ go to the trash): invalid argument" "$_OUT" "trash the trash"
_assert_exit 1 containerfs trash "$C/Documents/missing"
_assert_eq "containerfs: $C/Documents/missing: no such file or directory" "$_OUT" "trash a missing item"
_assert_output "" list
# An Inbox item can be trashed (read, list, delete and move out work there).
echo delivered >"$TEST_TMP/report.txt"
_assert_output "$C/Documents/Inbox/report.txt" containerfs inbox deliver com.example.notes "$TEST_TMP/report.txt" --store "$S"
_assert_output "$T/files/report.txt" containerfs trash "$C/Documents/Inbox/report.txt"
_assert_missing "$C/Documents/Inbox/report.txt"
_assert_output "[Trash Info]
Path=containers/com.example.notes/Documents/Inbox/report.txt" head -2 "$T/info/report.txt.trashinfo"
# ... but not put back there: Inbox takes nothing new (EACCES); --to elsewhere works.
_assert_exit 1 containerfs trash restore report.txt --store "$S"
_assert_eq "containerfs: $C/Documents/Inbox/report.txt (it cannot be restored there: a standard directory, or Inbox, or not yours): permission denied" "$_OUT" "restore into Inbox"
_assert_output "$C/Documents/report.txt" containerfs trash restore report.txt --to "$C/Documents" --store "$S"
_assert_output "delivered" cat "$C/Documents/report.txt"

# MARK: restore never overwrites
echo one >"$C/Documents/o.txt"
_assert_output "$T/files/o.txt" containerfs trash "$C/Documents/o.txt"
echo two >"$C/Documents/o.txt"
_assert_exit 1 containerfs trash restore o.txt --store "$S"
_assert_eq "containerfs: $C/Documents/o.txt (restore never overwrites: move it away, or restore with --to): an item with that name already exists" "$_OUT" "restore over an item"
_assert_output "two" cat "$C/Documents/o.txt"
_assert_output "one" cat "$T/files/o.txt"
_assert_exists "$T/info/o.txt.trashinfo"
# --to an existing directory puts it in under its original name; there too never over one.
echo three >"$B/Documents/o.txt"
_assert_exit 1 containerfs trash restore o.txt --to "$B/Documents" --store "$S"
_assert_eq "containerfs: $B/Documents/o.txt (restore never overwrites: move it away, or restore with --to): an item with that name already exists" "$_OUT" "restore --to over an item"
_assert_output "three" cat "$B/Documents/o.txt"
# --to into another container works (a new name there).
_assert_output "$B/Documents/o-restored.txt" containerfs trash restore o.txt --to "$B/Documents/o-restored.txt" --store "$S"
_assert_output "one" cat "$B/Documents/o-restored.txt"
_assert_output "" list

# MARK: missing parents are made again, inside the container only
mkdir -p "$C/Documents/d1/d2"
echo deep >"$C/Documents/d1/d2/f.txt"
_assert_output "$T/files/f.txt" containerfs trash "$C/Documents/d1/d2/f.txt"
rm -r "$C/Documents/d1"
_assert_output "$C/Documents/d1/d2/f.txt" containerfs trash restore f.txt --store "$S"
_assert_output "deep" cat "$C/Documents/d1/d2/f.txt"
_assert_output "dir dir" sh -c "echo \$(fsop stat '$C/Documents/d1' type) \$(fsop stat '$C/Documents/d1/d2' type)"

# MARK: the container is gone
mkdir "$M/containers/com.example.gone"
echo g >"$M/containers/com.example.gone/Documents/g.txt"
_assert_output "$T/files/g.txt" containerfs trash "$M/containers/com.example.gone/Documents/g.txt"
_assert_output "$T/files/com.example.gone" containerfs container remove com.example.gone --store "$S"
_assert_errno ENOENT fsop stat "$M/containers/com.example.gone"
_assert_exit 1 containerfs trash restore g.txt --store "$S"
_assert_eq "containerfs: containers/com.example.gone (the container is gone: restore it from the trash first, or restore with --to): no such file or directory" "$_OUT" "restore into a gone container"
_assert_output "g" cat "$T/files/g.txt"
_assert_errno ENOENT fsop stat "$M/containers/com.example.gone"
# The container first, then its item.
_assert_output "$M/containers/com.example.gone" containerfs trash restore com.example.gone --store "$S"
_assert_output "$M/containers/com.example.gone/Documents/g.txt" containerfs trash restore g.txt --store "$S"
_assert_output "g" cat "$M/containers/com.example.gone/Documents/g.txt"
_assert_output "" list

# MARK: empty --older-than takes only what is old enough; an unknown name is refused
echo old >"$C/Documents/old.txt"
echo new >"$C/Documents/new.txt"
_assert_output "$T/files/old.txt
$T/files/new.txt" containerfs trash "$C/Documents/old.txt" "$C/Documents/new.txt"
sed -i 's/^DeletionDate=.*/DeletionDate=2020-01-01T00:00:00/' "$T/info/old.txt.trashinfo"
_assert_output "removed 1 item, 4 bytes" containerfs trash empty --older-than 30d --store "$S"
_assert_output "new.txt" sh -c "containerfs trash list --store '$S' | cut -f1"
_assert_exit 1 containerfs trash empty nosuch --store "$S"
_assert_eq "containerfs: nosuch: no such item in the trash (\`containerfs trash list\` shows the names)" "$_OUT" "empty of an unknown name"
_assert_output "removed 1 item, 4 bytes" containerfs trash empty new.txt --store "$S"
_assert_output "" list

# MARK: usage errors exit 2; a path outside any mount or store, and an unknown name, 1
_assert_exit 2 containerfs trash
[[ $_OUT == "Error: Missing expected argument '<paths> ...'"* ]] || _fail "trash without a path: $_OUT"
_assert_exit 2 containerfs trash restore --store "$S"
[[ $_OUT == "Error: Missing expected argument '<names> ...'"* ]] || _fail "restore without a name: $_OUT"
_assert_exit 2 containerfs trash empty --older-than xyz --store "$S"
[[ $_OUT == "Error: --older-than xyz: a duration such as 3600, 90m, 12h or 30d"* ]] || _fail "empty --older-than xyz: $_OUT"
_assert_exit 2 containerfs trash restore a b --to "$C/Documents" --store "$S"
[[ $_OUT == "Error: --to goes with one item"* ]] || _fail "restore a b --to: $_OUT"
echo out >"$TEST_TMP/outside.txt"
_assert_exit 1 containerfs trash "$TEST_TMP/outside.txt"
_assert_eq "containerfs: $TEST_TMP/outside.txt: not under a ContainerFS mount, nor in a store's containers/" "$_OUT" "trash outside"
_assert_output "out" cat "$TEST_TMP/outside.txt"
_assert_exit 1 containerfs trash restore nosuch --store "$S"
_assert_eq "containerfs: nosuch: no such item in the trash (\`containerfs trash list\` shows the names)" "$_OUT" "restore of an unknown name"
fs_umount
