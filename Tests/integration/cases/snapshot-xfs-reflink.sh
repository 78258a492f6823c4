# timeout: 180
# On a store whose file system shares extents (XFS with reflink), a publish shares file
# data with FICLONE instead of copying it (docs/DESIGN.md 52): publishing a 100 MiB file
# grows the file system's used space by far less than 100 MiB, and `filefrag -v` flags the
# extents of both names "shared". The snapshot stays byte-for-byte frozen while the live
# file is rewritten in place through the mount (dd conv=notrunc) and appended to; the live
# file keeps its inode number and link count. A real XFS on a loop device.
. "$(dirname "$0")/../lib/common.sh"
_require_root
command -v mkfs.xfs >/dev/null || _skip "mkfs.xfs is missing (install xfsprogs)"
_require_cmd filefrag losetup sha256sum
XM=$TEST_TMP/xfs
_loop_fs 1G "$XM" mkfs.xfs -q -m reflink=1
_assert_output xfs stat -f -c %T "$XM"
S=$XM/store M=$TEST_MNT
fs_mount_at "$S" "$M"
D=$(_mkcontainer com.example.xfs)/Documents
used() { sync -f "$XM"; df -B1M --output=used "$XM" | tail -1 | tr -d ' '; }
# The measure itself: writing the 100 MiB does show.
before=$(used)
head -c 100M /dev/urandom >"$D/big"
grew=$(($(used) - before))
((grew >= 95)) || _fail "writing 100 MiB grew the used space by ${grew} MiB only: df does not measure what this case needs"
_ok "writing 100 MiB grew the used space by ${grew} MiB"
printf 'small\n' >"$D/small"
SUM=$(sha256sum <"$D/big")
INO=$(fsop stat "$D/big" ino)

# shared FILE: how many of FILE's extents `filefrag -v` flags shared, "N of M".
shared() {
    filefrag -v "$1" | awk '/^ *[0-9]+:/ { n++; if ($0 ~ /shared/) s++ } END { printf "%d of %d", s, n }'
}

# MARK: publish shares the data
_assert_output "0 of" sh -c "filefrag -v '$S/containers/com.example.xfs/Documents/big' | awk '/^ *[0-9]+:/ { n++; if (\$0 ~ /shared/) s++ } END { printf \"%d of\", s }'"
before=$(used)
_assert_output "$M/snapshots/frozen" containerfs snapshot publish "$D" --name frozen
after=$(used)
grew=$((after - before))
((grew < 10)) || _fail "publishing 100 MiB grew the used space by ${grew} MiB (expected shared extents: < 10 MiB)"
_ok "publishing 100 MiB grew the used space by ${grew} MiB"
LIVE=$S/containers/com.example.xfs/Documents/big SNAP=$S/snapshots/frozen/big
ext=$(shared "$SNAP")
[[ $ext =~ ^([0-9]+)\ of\ ([0-9]+)$ && ${BASH_REMATCH[1]} -ge 1 && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] || _fail "snapshot's extents: $ext shared, expected all"
_ok "every extent of the snapshot's big is shared ($ext)"
[[ $(shared "$LIVE") == "$ext" ]] || _fail "live file's extents: $(shared "$LIVE") shared, expected $ext"
_ok "every extent of the live big is shared ($ext)"
_assert_output "$SUM" sh -c "sha256sum <'$M/snapshots/frozen/big'"
_assert_output "$INO 1" fsop stat "$D/big" ino nlink

# MARK: frozen while the live file is rewritten in place and appended to through the mount
_assert_ok dd if=/dev/urandom of="$D/big" bs=1M seek=10 count=5 conv=notrunc status=none
_assert_ok dd if=/dev/zero of="$D/big" bs=4k seek=0 count=1 conv=notrunc status=none
head -c 3M /dev/urandom >>"$D/big"
printf 'more\n' >>"$D/small"
_assert_output "$SUM" sh -c "sha256sum <'$M/snapshots/frozen/big'"
_assert_output "$SUM" sh -c "sha256sum <'$SNAP'"
_assert_output "104857600" stat -c %s "$M/snapshots/frozen/big"
_assert_output "small" cat "$M/snapshots/frozen/small"
_assert_output "$((103 * 1048576))" stat -c %s "$D/big"
_assert_ne "$SUM" "$(sha256sum <"$D/big")" "live big after the rewrite"
_assert_output "small
more" cat "$D/small"
_assert_output "$INO 1" fsop stat "$D/big" ino nlink
# Only what was rewritten stopped being shared: the rest still is.
n=$(shared "$SNAP")
[[ $n =~ ^([0-9]+)\ of && ${BASH_REMATCH[1]} -ge 1 ]] || _fail "snapshot's extents after the rewrite: $n shared, expected some"
_ok "snapshot's extents still shared after the rewrite: $n"

# MARK: the frozen copy survives a remount and a second publish shares as well
fs_umount
fs_mount_at "$S" "$M"
_assert_output "$SUM" sh -c "sha256sum <'$M/snapshots/frozen/big'"
before=$(used)
_assert_output "$M/snapshots/second" containerfs snapshot publish "$D/big" --name second
grew=$(($(used) - before))
((grew < 10)) || _fail "second publish grew the used space by ${grew} MiB"
_ok "second publish grew the used space by ${grew} MiB"
_assert_output "$(sha256sum <"$D/big")" sh -c "sha256sum <'$M/snapshots/second'"
fs_umount
