# `containerfs snapshot export NAME -o FILE|-` (docs/DESIGN.md 53): a pax archive GNU tar
# lists and extracts (hard links, symlinks, modes, times, user.* xattrs kept), the same
# bytes every time, through the mount while it is live and from the store otherwise.
. "$(dirname "$0")/../lib/common.sh"
_require_root
S=$TEST_STORE M=$TEST_MNT
fs_mount
C=$M/containers/com.example.tar
_mkcontainer com.example.tar >/dev/null
D=$C/Documents
cd "$TEST_TMP"
printf 'alpha\n' >"$D/a.txt"
mkdir "$D/sub" && ln "$D/a.txt" "$D/sub/a-link" && ln -s ../a.txt "$D/sub/sym"
head -c 300000 /dev/urandom >"$D/sub/big.bin"
touch -d '2021-05-06 07:08:09.5' "$D/sub/big.bin"
chmod 600 "$D/a.txt"
_assert_output OK fsop setxattr "$D/a.txt" user.colour blue
_assert_output "$M/snapshots/t1" containerfs snapshot publish "$C" --name t1

# MARK: the archive, as GNU tar sees it
_assert_ok containerfs snapshot export t1 -o "$TEST_TMP/t1.tar" --store "$S"
_assert_output "t1/
t1/Documents/
t1/Documents/Inbox/
t1/Documents/a.txt
t1/Documents/sub/
t1/Documents/sub/a-link
t1/Documents/sub/big.bin
t1/Documents/sub/sym
t1/Library/
t1/Library/Application Support/
t1/Library/Preferences/" tar tf "$TEST_TMP/t1.tar"
_assert_output "hrw------- 0/0               0 2021-05-06 07:08 t1/Documents/sub/a-link link to t1/Documents/a.txt" \
    sh -c "tar tvf '$TEST_TMP/t1.tar' t1/Documents/sub/a-link | sed 's/ [0-9:-]* [0-9:]* t1/ 2021-05-06 07:08 t1/'"
_assert_output "lrwxrwxrwx 0/0 t1/Documents/sub/sym -> ../a.txt" \
    sh -c "tar tvf '$TEST_TMP/t1.tar' t1/Documents/sub/sym | awk '{ print \$1, \$2, \$6, \$7, \$8 }'"

# MARK: extracted, it is the snapshot again
mkdir "$TEST_TMP/x"
_assert_ok tar -C "$TEST_TMP/x" --xattrs --xattrs-include='user.*' -xpf "$TEST_TMP/t1.tar"
_assert_ok diff -r "$TEST_TMP/x/t1" "$M/snapshots/t1"
_assert_output "$(stat -c '%a %Y' "$M/snapshots/t1/Documents/sub/big.bin")" stat -c '%a %Y' "$TEST_TMP/x/t1/Documents/sub/big.bin"
_assert_output "600" stat -c '%a' "$TEST_TMP/x/t1/Documents/a.txt"
_assert_output "$(stat -c %i "$TEST_TMP/x/t1/Documents/a.txt") 2" stat -c '%i %h' "$TEST_TMP/x/t1/Documents/sub/a-link"
_assert_output blue fsop getxattr "$TEST_TMP/x/t1/Documents/a.txt" user.colour
_assert_output "$(cd "$M/snapshots/t1" && find . -type f -exec sha256sum {} + | sort -k2)" \
    sh -c "cd '$TEST_TMP/x/t1' && find . -type f -exec sha256sum {} + | sort -k2"

# MARK: deterministic: the same bytes again, to standard output too, and after a remount
SUM=$(sha256sum <"$TEST_TMP/t1.tar")
_assert_output "$SUM" sh -c "containerfs snapshot export t1 -o - --store '$S' | sha256sum"
fs_umount
_assert_output "$SUM" sh -c "containerfs snapshot export t1 -o - --store '$S' | sha256sum"

# MARK: errors: usage exits 2, a missing snapshot or an unwritable file 1, no file left
_assert_exit 2 containerfs snapshot export t1 --store "$S"
_assert_exit 2 containerfs snapshot export ../t1 -o x.tar --store "$S"
_assert_exit 1 containerfs snapshot export nosuch -o "$TEST_TMP/n.tar" --store "$S"
_assert_eq "containerfs: $S/snapshots/nosuch: no such snapshot (\`containerfs snapshot list\` shows the names)" "$_OUT" "unknown snapshot"
_assert_missing "$TEST_TMP/n.tar"
_assert_exit 1 containerfs snapshot export t1 -o "$TEST_TMP/missing-dir/t.tar" --store "$S"
_assert_eq "containerfs: $TEST_TMP/missing-dir/t.tar: No such file or directory" "$_OUT" "unwritable output"
