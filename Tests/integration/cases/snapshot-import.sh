# `containerfs snapshot import FILE|- [--name NAME]` (docs/DESIGN.md 54): export -> import ->
# export gives the same bytes (cmp) and the same files (sha256sum, modes, owners, times,
# user.* xattrs, hard links, symlinks); GNU tar reads what was imported and its own pax
# archives import; through the daemon while mounted (from a file and from standard input,
# the new entry seen at once), on the store without a mount; only root keeps owners.
. "$(dirname "$0")/../lib/common.sh"
_require_root
_users
S=$TEST_STORE M=$TEST_MNT
fs_mount
C=$M/containers/com.example.imp
_mkcontainer com.example.imp >/dev/null
D=$C/Documents
cd "$TEST_TMP"
printf 'alpha\n' >"$D/a.txt"
mkdir "$D/sub" "$D/sub/deeper"
ln "$D/a.txt" "$D/sub/a-link"
ln -s ../a.txt "$D/sub/sym"
head -c 300000 /dev/urandom >"$D/sub/big.bin"
printf 'x' >"$D/sub/deeper/x"
chmod 640 "$D/a.txt"
chmod 2750 "$D/sub/deeper"
chown 1234:2345 "$D/sub/big.bin"
touch -d '2020-01-02 03:04:05.123456789' "$D/sub/big.bin"
touch -d '2019-06-07 08:09:10' "$D/sub/deeper"
_assert_output OK fsop setxattr "$D/a.txt" user.colour blue
_assert_output OK fsop setxattr "$D/sub" user.kind folder
_assert_output "$M/snapshots/A" containerfs snapshot publish "$C" --name A
_assert_ok containerfs snapshot export A -o "$TEST_TMP/a.tar" --store "$S"

# MARK: through the daemon, from a file: a snapshot of its own, seen at once
_assert_output "$M/snapshots/B" containerfs snapshot import "$TEST_TMP/a.tar" --name B --store "$S"
_assert_output "A
B" ls "$M/snapshots"
sums() { (cd "$1" && find . -type f -exec sha256sum {} + | sort -k2); }
# Whole seconds: restricted pax (decision 53) keeps sub-second times only in entries that
# need an extended header anyway.
meta() { (cd "$1" && find . -mindepth 1 -printf '%p %y %m %U:%G %Ts\n' | sed 's/\.[0-9]*$//' | sort); }
_assert_output "$(sums "$M/snapshots/A")" sums "$M/snapshots/B"
_assert_output "$(meta "$M/snapshots/A")" meta "$M/snapshots/B"
_assert_output "$(stat -c '%a %U %G %Y' "$M/snapshots/A")" stat -c '%a %U %G %Y' "$M/snapshots/B"
_assert_output blue fsop getxattr "$M/snapshots/B/Documents/a.txt" user.colour
_assert_output folder fsop getxattr "$M/snapshots/B/Documents/sub" user.kind
_assert_output ../a.txt readlink "$M/snapshots/B/Documents/sub/sym"
_assert_output "$(fsop stat "$M/snapshots/B/Documents/a.txt" ino) 2" fsop stat "$M/snapshots/B/Documents/sub/a-link" ino nlink
_assert_output "B import:$TEST_TMP/a.tar 4 300007 False" sh -c "containerfs snapshot list --json --store '$S' | $PY -c 'import json,sys; e=[x for x in json.load(sys.stdin) if x[\"name\"]==\"B\"][0]; print(e[\"name\"], e[\"source\"], e[\"files\"], e[\"bytes\"], e[\"damaged\"])'"
_assert_errno EROFS fsop unlink "$M/snapshots/B/Documents/a.txt"

# MARK: export -> import -> export is byte-identical; GNU tar lists and extracts it
_assert_ok containerfs snapshot export B -o "$TEST_TMP/b.tar" --store "$S"
_assert_output "$(tar tf "$TEST_TMP/a.tar" | sed 's|^A/|B/|')" tar tf "$TEST_TMP/b.tar"
_assert_ok containerfs snapshot remove A --store "$S"
_assert_output "$M/snapshots/A" sh -c "containerfs snapshot import - --name A --store '$S' <'$TEST_TMP/b.tar'"
_assert_ok containerfs snapshot export A -o "$TEST_TMP/a2.tar" --store "$S"
_assert_ok cmp "$TEST_TMP/a.tar" "$TEST_TMP/a2.tar"
_assert_output "A import:- 4 300007" sh -c "containerfs snapshot list --store '$S' | awk -F'\t' '\$1 == \"A\" { print \$1, \$2, \$5, \$6 }'"
mkdir "$TEST_TMP/x"
_assert_ok tar -C "$TEST_TMP/x" --xattrs --xattrs-include='user.*' -xpf "$TEST_TMP/b.tar"
_assert_output "$(sums "$M/snapshots/B")" sums "$TEST_TMP/x/B"
_assert_output blue fsop getxattr "$TEST_TMP/x/B/Documents/a.txt" user.colour

# MARK: GNU tar's own pax archive imports (a directory tree it wrote with -C)
_assert_ok tar --format=pax --xattrs --xattrs-include='user.*' -C "$TEST_TMP/x" -cf "$TEST_TMP/gnu.tar" B
_assert_output "$M/snapshots/G" containerfs snapshot import "$TEST_TMP/gnu.tar" --name G --store "$S"
_assert_output "$(sums "$TEST_TMP/x/B")" sums "$M/snapshots/G"
_assert_output "$(meta "$TEST_TMP/x/B")" meta "$M/snapshots/G"
_assert_output blue fsop getxattr "$M/snapshots/G/Documents/a.txt" user.colour
# Without one top directory the archive's root is the snapshot.
_assert_ok tar --format=pax -C "$TEST_TMP/x/B/Documents" -cf "$TEST_TMP/flat.tar" a.txt sub
_assert_output "$M/snapshots/F" containerfs snapshot import "$TEST_TMP/flat.tar" --name F --store "$S"
_assert_output "a.txt
sub" ls "$M/snapshots/F"

# MARK: progress on a terminal only (the exact outputs above show none when piped)
_require_cmd script
_assert_output "1" sh -c "script -qec \"containerfs snapshot import '$TEST_TMP/a.tar' --name T --store '$S'\" /dev/null | grep -c 'importing: .* MiB'"
_assert_output "1" sh -c "script -qec \"containerfs snapshot export T -o '$TEST_TMP/t.tar' --store '$S'\" /dev/null | grep -c 'exporting: .* MiB'"
_assert_ok containerfs snapshot remove T --store "$S"

# MARK: names that are not UTF-8 (pax hdrcharset=BINARY) and UTF-8 ones come back as bytes
printf 'e\n' >"$D/$(printf 'caf\xe9')" && printf 'n\n' >"$D/$(printf 'na\xc3\xafve')"
_assert_output "$M/snapshots/N" containerfs snapshot publish "$C" --name N
_assert_ok containerfs snapshot export N -o "$TEST_TMP/n.tar" --store "$S"
_assert_ok containerfs snapshot remove N --store "$S"
_assert_output "$M/snapshots/N" containerfs snapshot import "$TEST_TMP/n.tar" --store "$S"
_assert_output "e" cat "$M/snapshots/N/Documents/$(printf 'caf\xe9')"
_assert_output "n" cat "$M/snapshots/N/Documents/$(printf 'na\xc3\xafve')"
_assert_ok containerfs snapshot export N -o "$TEST_TMP/n2.tar" --store "$S"
_assert_ok cmp "$TEST_TMP/n.tar" "$TEST_TMP/n2.tar"
_assert_ok containerfs snapshot remove N --store "$S"
rm "$D/$(printf 'caf\xe9')" "$D/$(printf 'na\xc3\xafve')"

# MARK: names: from the archive's top directory by default; never over a snapshot
_assert_exit 1 containerfs snapshot import "$TEST_TMP/b.tar" --store "$S"
_assert_eq "containerfs: $M/snapshots/B: an item with that name already exists" "$_OUT" "taken name"
_assert_exit 1 containerfs snapshot import "$TEST_TMP/flat.tar" --name A --store "$S"
_assert_eq "containerfs: $M/snapshots/A: an item with that name already exists" "$_OUT" "taken --name"
_assert_output "A
B
F
G" ls "$M/snapshots"
_assert_output "" ls -A "$S/.staging"

# MARK: only root keeps the archive's owners; others own what they import
_assert_ok chmod 644 "$TEST_TMP/a.tar"
_assert_output "$M/snapshots/U" _as_user "$U1" containerfs snapshot import "$TEST_TMP/a.tar" --name U --store "$S"
_assert_output "$U1_UID:$U1_GID
$U1_UID:$U1_GID" stat -c '%u:%g' "$M/snapshots/U/Documents/sub/big.bin" "$M/snapshots/U"
_assert_output "750" stat -c '%a' "$M/snapshots/U/Documents/sub/deeper"
_assert_ok chmod 600 "$TEST_TMP/a.tar"
_assert_exit 1 _as_user "$U1" containerfs snapshot import "$TEST_TMP/a.tar" --name V --store "$S"
_assert_eq "containerfs: $TEST_TMP/a.tar: permission denied" "$_OUT" "unreadable archive"

# MARK: usage errors exit 2; a missing archive 1
_assert_exit 2 containerfs snapshot import --store "$S"
_assert_exit 2 containerfs snapshot import "$TEST_TMP/a.tar" --name ../x --store "$S"
_assert_exit 1 containerfs snapshot import "$TEST_TMP/none.tar" --store "$S"
_assert_eq "containerfs: $TEST_TMP/none.tar: no such file or directory" "$_OUT" "missing archive"

# MARK: on the store without a mount, under its lock; still there after the next mount
fs_umount
_assert_ok containerfs snapshot remove A --store "$S"
_assert_output "$S/snapshots/A" containerfs snapshot import "$TEST_TMP/b.tar" --name A --store "$S"
_assert_ok containerfs snapshot export A -o "$TEST_TMP/a3.tar" --store "$S"
_assert_ok cmp "$TEST_TMP/a.tar" "$TEST_TMP/a3.tar"
_assert_exit 1 containerfs snapshot import "$TEST_TMP/none.tar" --store "$S"
_assert_eq "containerfs: $TEST_TMP/none.tar: no such file or directory" "$_OUT" "missing archive, unmounted"
fs_mount
_assert_output "$(sums "$M/snapshots/B")" sums "$M/snapshots/A"
_assert_output "A: intact
B: intact
F: intact
G: intact
U: intact" sh -c "containerfs snapshot verify --store '$S' | sort"
_assert_output "" ls -A "$S/.staging"
