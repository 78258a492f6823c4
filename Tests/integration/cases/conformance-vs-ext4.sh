# timeout: 180
# POSIX conformance against the file system underneath (issue 2): the same syscall suite
# (lib/conformance.py: chmod, chown, ftruncate, truncate, link, mkdir, mkfifo, mknod, open,
# rename, rmdir, symlink, unlink, utimensat) runs on a plain directory of the store's own
# ext4 disk and on a container's Documents through the mount, as root (acting as root and,
# through setresuid, as two other users) and, through setpriv, as an unprivileged user.
# Every line — errno, resulting mode, owner, link count, which times changed — must match.
. "$(dirname "$0")/../lib/common.sh"
_users
fs_mount
C=$(_mkcontainer org.conformance.suite)
chmod 755 "$C"   # the container is private (0700); the other users must reach Documents

REF=$TEST_TMP/ext4
FUSE=$C/Documents
mkdir -p "$REF"
chmod 755 "$REF"
# The reference must be the store's own file system (no tmpfs, no other disk).
_assert_eq "$(stat -c %d "$TEST_STORE")" "$(stat -c %d "$REF")" "reference on the store's device"
fstype=$(stat -f -c %T "$REF")
echo "reference file system: $fstype"
[[ $fstype != tmpfs ]] || _fail "the reference directory is on tmpfs"

run_suite() {   # run_suite NAME: root mode and self mode on both trees, then compare
    local tree
    for tree in ref fuse; do
        local dir=$REF
        [[ $tree == fuse ]] && dir=$FUSE
        mkdir "$dir/root" "$dir/self"
        chmod 755 "$dir/root"
        chown "$U1_UID:$U1_GID" "$dir/self"
        "$PY" "$TEST_LIB/conformance.py" "$dir/root" --users "$U1_UID:$U1_GID,$U2_UID:$U2_GID" \
            >"$TEST_TMP/$tree.root.txt" 2>"$TEST_TMP/$tree.root.err" || _fail "conformance.py ($tree, root) crashed: $(cat "$TEST_TMP/$tree.root.err")"
        _as_user "$U1" "$PY" "$TEST_LIB/conformance.py" "$dir/self" --self \
            >"$TEST_TMP/$tree.self.txt" 2>"$TEST_TMP/$tree.self.err" || _fail "conformance.py ($tree, as $U1) crashed: $(cat "$TEST_TMP/$tree.self.err")"
    done
}
run_suite

for mode in root self; do
    lines=$(wc -l <"$TEST_TMP/ref.$mode.txt")
    ((lines > 100)) || _fail "reference run ($mode) printed only $lines lines"
    ! grep -q HARNESS-ERROR "$TEST_TMP/ref.$mode.txt" "$TEST_TMP/fuse.$mode.txt" || _fail "harness error: $(grep -h HARNESS-ERROR "$TEST_TMP"/*."$mode".txt | head -3)"
    if ! diff -u "$TEST_TMP/ref.$mode.txt" "$TEST_TMP/fuse.$mode.txt" >"$TEST_TMP/$mode.diff"; then
        echo "--- ext4 (-) vs containerfs (+), $mode mode ---"
        grep '^[-+][^-+]' "$TEST_TMP/$mode.diff" | head -80
        _fail "$mode mode: $(grep -c '^+[^+]' "$TEST_TMP/$mode.diff") line(s) differ from ext4 (of $lines)"
    fi
    _ok "$mode mode: all $lines results equal ext4's"
done
