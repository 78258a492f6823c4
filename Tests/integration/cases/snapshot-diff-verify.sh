# `containerfs snapshot diff NAME [PATH] [--json]` and `snapshot verify [NAME] [--json]`
# (docs/DESIGN.md 55): diff names what changed in the live source since publish (added,
# removed, changed by type, size, mode, owner, mtime, xattrs, content; excluded items not
# at all); verify names the snapshots edited directly in the store, also an in-place edit
# that put the size and modification time back (the change time tells), and `snapshot
# list` marks them damaged. Through the daemon and on the store without a mount.
. "$(dirname "$0")/../lib/common.sh"
_require_root
S=$TEST_STORE M=$TEST_MNT
fs_mount
C=$M/containers/com.example.diff
_mkcontainer com.example.diff >/dev/null
D=$C/Documents
cd "$TEST_TMP"
mkdir "$D/sub"
for f in same content append mode owner mtime xattr gone kind; do printf '%s\n' "$f" >"$D/sub/$f"; done
ln -s same "$D/sub/link"
touch -d '2020-01-01 00:00:00' "$D/sub"/* "$D/sub" "$D"
_assert_output "$M/snapshots/P" containerfs snapshot publish "$C" --name P
_assert_output "" containerfs snapshot diff P --store "$S"

# MARK: every kind of change through the mount, each named
printf 'CONTENT\n' >"$D/sub/content" && touch -d '2020-01-01 00:00:00' "$D/sub/content"
printf 'more\n' >>"$D/sub/append"
chmod 600 "$D/sub/mode" && touch -d '2020-01-01 00:00:00' "$D/sub/mode"
chown 1234:2345 "$D/sub/owner"
touch -d '2021-01-01 00:00:00' "$D/sub/mtime"
_assert_output OK fsop setxattr "$D/sub/xattr" user.tag x
rm "$D/sub/gone"
rm "$D/sub/kind" && mkdir "$D/sub/kind"
ln -sfn mode "$D/sub/link"
printf 'new\n' >"$D/sub/added"
printf 'cache\n' >"$C/Library/Caches/ignored" && printf 't\n' >"$C/tmp/ignored"
printf 'secret\n' >"$D/excluded" && _assert_ok containerfs exclude "$D/excluded"
touch -d '2020-01-01 00:00:00' "$D/sub" "$D"
_assert_output "added	Documents/sub/added
changed	Documents/sub/append	size,mtime,content
changed	Documents/sub/content	content
removed	Documents/sub/gone
changed	Documents/sub/kind	type
changed	Documents/sub/link	mtime,content
changed	Documents/sub/mode	mode
changed	Documents/sub/mtime	mtime
changed	Documents/sub/owner	owner
changed	Documents/sub/xattr	xattrs" containerfs snapshot diff P --store "$S"
_assert_output "changed	.	mode
added	added" sh -c "chmod 700 '$D/sub' && touch -d '2020-01-01 00:00:00' '$D/sub' && containerfs snapshot diff P Documents/sub --store '$S' | head -2"
_assert_output "changed content ['content']" sh -c "containerfs snapshot diff P Documents/sub/content --json --store '$S' | $PY -c 'import json,sys; [print(e[\"change\"], e[\"path\"] if e[\"path\"] != \".\" else \"content\", e[\"what\"]) for e in json.load(sys.stdin)]'"
_assert_exit 1 containerfs snapshot diff P Documents/none --store "$S"
_assert_eq "containerfs: $M/snapshots/P/Documents/none: no such file or directory" "$_OUT" "diff of a missing item"
_assert_exit 2 containerfs snapshot diff P ../x --store "$S"
_assert_exit 1 containerfs snapshot diff nosuch --store "$S"
_assert_eq "containerfs: $M/snapshots/nosuch: no such snapshot (\`containerfs snapshot list\` shows the names)" "$_OUT" "diff of a missing snapshot"
_assert_ok containerfs snapshot export P -o "$TEST_TMP/p.tar" --store "$S"
_assert_output "$M/snapshots/I" containerfs snapshot import "$TEST_TMP/p.tar" --name I --store "$S"
_assert_exit 1 containerfs snapshot diff I --store "$S"
_assert_eq "containerfs: I: imported (import:$TEST_TMP/p.tar), it has no live source to compare with" "$_OUT" "diff of an imported snapshot"

# MARK: verify: the live changes above touched no snapshot
_assert_output "I: intact
P: intact" containerfs snapshot verify --store "$S"
_assert_output "P intact" sh -c "containerfs snapshot list --store '$S' | awk -F'\t' '\$1 == \"P\" { print \$1, \$7 }'"

# MARK: edits in the store behind the daemon's back: a snapshot is damaged
# Same size, same modification time: only the change time shows it.
$PY -c "
import os, sys
p = sys.argv[1]; st = os.stat(p)
with open(p, 'r+b') as f: f.write(b'S')
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))" "$S/snapshots/P/Documents/sub/same"
_assert_exit 1 containerfs snapshot verify --store "$S"
_assert_eq "I: intact
P: damaged
  Documents/sub/same: changed (ctime)" "$_OUT" "verify after an in-place edit"
printf 'x' >"$S/snapshots/I/Documents/sub/new"
rm "$S/snapshots/I/Documents/sub/gone"
_assert_exit 1 containerfs snapshot verify I --store "$S"
_assert_eq "I: damaged
  Documents/sub: changed (mtime, ctime)
  Documents/sub/gone: removed
  Documents/sub/new: added" "$_OUT" "verify I"
_assert_output "I damaged true
P damaged true" sh -c "containerfs snapshot verify --json --store '$S' | $PY -c 'import json,sys; [print(e[\"name\"], e[\"state\"], str(e[\"damaged\"]).lower()) for e in json.load(sys.stdin)]'"
_assert_output "I damaged
P damaged" sh -c "containerfs snapshot list --store '$S' | awk -F'\t' '{ print \$1, \$7 }' | sort"
_assert_output "{True}" sh -c "containerfs snapshot list --json --store '$S' | $PY -c 'import json,sys; print(set(e[\"damaged\"] for e in json.load(sys.stdin)))'"
_assert_exit 1 containerfs snapshot verify nosuch --store "$S"
_assert_eq "containerfs: snapshots/nosuch: no such file or directory" "$_OUT" "verify of a missing snapshot"

# MARK: without a mount, the same answers
fs_umount
_assert_exit 1 containerfs snapshot verify P --store "$S"
_assert_eq "P: damaged
  Documents/sub/same: changed (ctime)" "$_OUT" "verify unmounted"
_assert_ok containerfs snapshot remove P --store "$S"
_assert_output "I damaged" sh -c "containerfs snapshot list --store '$S' | awk -F'\t' '{ print \$1, \$7 }'"
_assert_output "" sqlite3 "$S/containerfs.db" "SELECT snapshot FROM snapshot_manifest WHERE snapshot = 'P'"
