# Snapshots share data with live files where extents cannot be shared (docs/DESIGN.md 58):
# on ext4 a publish links each file into STORE/.snapshot-data/NAME/ and copies no data; the
# first change of a live file's data through the mount copies it aside first. The snapshot
# stays byte for byte and attribute for attribute as published under every kind of live
# change — also for a reader that had the snapshot file open, for a writer that had the live
# file open before the publish, across a remount, for another user — and the mount shows the
# live files' own link counts and inode numbers throughout.
# timeout: 240
. "$(dirname "$0")/../lib/common.sh"
_require_root
_users
S=$TEST_STORE M=$TEST_MNT
fs_mount
cd "$TEST_TMP"
_mkcontainer com.example.cow >/dev/null
C=$M/containers/com.example.cow
D=$C/Documents
B=$S/containers/com.example.cow/Documents  # the store's side

# Whether the store can share extents: then no link is made (snapshot-xfs-reflink covers it).
printf x >"$TEST_TMP/probe.a"
if cp --reflink=always "$TEST_TMP/probe.a" "$TEST_TMP/probe.b" 2>/dev/null; then
    _skip "the store's file system shares extents (FICLONE): publish clones instead of linking"
fi

links() { stat -c %h "$@" | paste -sd' '; }  # link counts in the store

# What a snapshot file is: data, then type, mode, owner, size, mtime, atime, and its xattrs.
shape() { # FILE
    sha256sum <"$1" | cut -c1-64
    stat -c '%F %a %u %g %s %Y %X %h' "$1"
    fsop listxattr "$1"
}

# MARK: a container of files of every size; one with two names
head -c 3000000 /dev/urandom >"$D/big.bin"
printf 'small\n' >"$D/small.txt"
: >"$D/empty"
for i in $(seq 1 20); do printf 'file %s\n' "$i" >"$D/f$i"; done
ln "$D/small.txt" "$D/small-link"
_assert_output OK fsop setxattr "$D/big.bin" user.kind blob
touch -d '2021-02-03 04:05:06' "$D/big.bin"
LIVE_INO=$(fsop stat "$D/big.bin" ino)
SMALL_INO=$(fsop stat "$D/small.txt" ino)

# MARK: publish links, copies nothing; the mount shows the live files as before
_assert_output "$M/snapshots/s1" containerfs snapshot publish "$C" --name s1
P=$M/snapshots/s1/Documents
_assert_output "$LIVE_INO 1" fsop stat "$D/big.bin" ino nlink
_assert_output "$SMALL_INO 2" fsop stat "$D/small.txt" ino nlink
_assert_output "2 3" links "$B/big.bin" "$B/small.txt"      # in the store: +1 link each
_assert_output "22" sh -c "ls '$S/.snapshot-data/s1' | wc -l"          # one per file with data, none for empty
_assert_output "1" stat -c %h "$B/empty"
_assert_ne "$LIVE_INO" "$(fsop stat "$P/big.bin" ino)" "snapshot inode"
_assert_output "2" stat -c %h "$P/small-link"
_assert_output "$(du -k "$D/big.bin" | cut -f1)" sh -c "du -k '$P/big.bin' | cut -f1"   # blocks of its data
_assert_output "0" stat -c %b "$S/snapshots/s1/Documents/big.bin"                      # in the store, sparse
_assert_output "" find "$M/containers" -samefile "$P/big.bin"
BIG=$(shape "$P/big.bin") SMALL=$(shape "$P/small.txt") EMPTY=$(shape "$P/empty")
_assert_ok cmp "$D/big.bin" "$P/big.bin"

# MARK: progress on a terminal, in files; nothing when piped
_require_cmd script
_assert_output "1" sh -c "script -qec \"containerfs snapshot publish '$C' --name progress\" /dev/null | grep -c 'publishing: 24 files of 24 (100%)'"
_assert_output "$M/snapshots/quiet" sh -c "containerfs snapshot publish '$C' --name quiet 2>'$TEST_TMP/err'"
_assert_output "" cat "$TEST_TMP/err"
_assert_ok containerfs snapshot remove progress quiet --store "$S"

# MARK: a snapshot reader keeps the published bytes while the live file is rewritten
# The kernel's cached pages of the snapshot file go first: the reader's reads reach the daemon.
sync && echo 1 >/proc/sys/vm/drop_caches
_assert_output "$(head -1 <<<"$BIG")" python3 -c "
import hashlib, os
reader = os.open('$P/big.bin', os.O_RDONLY)
first = os.read(reader, 100)
writer = os.open('$D/big.bin', os.O_WRONLY)
os.pwrite(writer, bytes(40960), 2000000)
os.close(writer)
rest = b''
while chunk := os.read(reader, 1 << 16):
    rest += chunk
print(hashlib.sha256(first + rest).hexdigest())"
_assert_output "$BIG" shape "$P/big.bin"
_assert_output "1 1" links "$B/big.bin" "$S/.snapshot-data/s1/$(stat -c %i "$S/snapshots/s1/Documents/big.bin")"
_assert_output "$LIVE_INO 1" fsop stat "$D/big.bin" ino nlink

# MARK: every kind of live change leaves the snapshot as it was
printf 'appended\n' >>"$D/f1"
truncate -s 2 "$D/f2"
: >"$D/f3"                                   # O_TRUNC
printf 'rewritten\n' >"$D/f4"
chmod 600 "$D/f5" && chown 1234:2345 "$D/f5" && touch -d '2000-01-01' "$D/f5"
_assert_output OK fsop setxattr "$D/f6" user.new value
mv "$D/f7" "$D/f7.moved"
rm "$D/f8"
printf 'replacement\n' >"$TEST_TMP/new" && mv "$TEST_TMP/new" "$D/f9"
printf 'through the other name\n' >>"$D/small-link"
python3 -c "
import mmap, os
fd = os.open('$D/f10', os.O_RDWR)
m = mmap.mmap(fd, 0)
m[0:4] = b'MMAP'
m.flush(); m.close(); os.close(fd)"
for i in $(seq 1 10); do
    _assert_output "file $i" cat "$P/f$i"
done
_assert_output "$SMALL" shape "$P/small.txt"
_assert_output "$SMALL" shape "$P/small-link"
_assert_output "$EMPTY" shape "$P/empty"
_assert_output "$SMALL_INO 2" fsop stat "$D/small.txt" ino nlink
_assert_output "1 2" links "$B/f1" "$B/small.txt"

# MARK: a writer open from before the publish: the publish copies that file
exec 8>>"$D/f11"
_assert_output "$M/snapshots/s2" containerfs snapshot publish "$C" --name s2
printf 'late write\n' >&8
exec 8>&-
_assert_output "file 11" cat "$M/snapshots/s2/Documents/f11"
_assert_output "file 11
late write" cat "$D/f11"

# MARK: two snapshots share one file; one change copies it once for both
_assert_output "$M/snapshots/s3" containerfs snapshot publish "$C" --name s3
_assert_output "4" stat -c %h "$B/f12"                                  # live, s1, s2, s3
_assert_output "1" fsop stat "$D/f12" nlink
printf 'changed\n' >"$D/f12"
_assert_output "file 12|file 12|file 12|changed" sh -c "cat '$P/f12' '$M/snapshots/s2/Documents/f12' '$M/snapshots/s3/Documents/f12' '$D/f12' | paste -sd'|'"
_assert_output "1" stat -c %h "$B/f12"

# MARK: across a remount the shared files are known again
fs_umount
fs_mount
_assert_output "1" fsop stat "$D/f13" nlink
_assert_output "4" stat -c %h "$B/f13"
dd if=/dev/zero of="$D/f13" bs=1 count=3 conv=notrunc status=none
_assert_output "file 13" cat "$P/f13"
_assert_output "file 13" cat "$M/snapshots/s3/Documents/f13"

# MARK: another user changing their own shared file
_assert_ok _as_user "$U1" containerfs container create org.example.cow --store "$S"
UD=$M/containers/org.example.cow/Documents
_assert_output OK _as_user "$U1" fsop openw "$UD/mine" 'O_WRONLY|O_CREAT' mine 600
_assert_output "$M/snapshots/u1" _as_user "$U1" containerfs snapshot publish "$UD/mine" --name u1
_assert_ok _as_user "$U1" sh -c "printf 'theirs\n' >'$UD/mine'"
_assert_output "mine" cat "$M/snapshots/u1"
_assert_output "theirs" _as_user "$U1" cat "$UD/mine"

# MARK: removing a snapshot removes its data; the others keep theirs
_assert_ok containerfs snapshot remove s1 --store "$S"
_assert_missing "$S/.snapshot-data/s1"
_assert_output "file 14" cat "$M/snapshots/s3/Documents/f14"
_assert_output "3" stat -c %h "$B/f14"
_assert_output "1" fsop stat "$D/f14" nlink

# MARK: verify: changes through the mount touch no snapshot, an edit of shared data in the
# store does; diff reads the linked data
chmod 600 "$D/f17" && mv "$D/f17" "$D/f17.moved" && touch "$D/f18" && ln "$D/f19" "$D/f19.link"
_assert_output "file 17|file 18" sh -c "cat '$M/snapshots/s3/Documents/f17' '$M/snapshots/s3/Documents/f18' | paste -sd'|'"
_assert_output "s2: intact
s3: intact
u1: intact" containerfs snapshot verify --store "$S"
printf 'behind the back\n' >>"$B/f16"
_assert_exit 1 containerfs snapshot verify s3 --store "$S"
_assert_eq "s3: damaged
  Documents/f16 (its data): changed (size, mtime)" "$_OUT" "verify after an edit of shared data in the store"
fs_umount
_assert_output "" sh -c "containerfs snapshot diff s3 --store '$S' | grep -E 'f1[45]\\b' || true"
_assert_output "changed	Documents/f16	size,mtime,content" sh -c "containerfs snapshot diff s3 --store '$S' | grep -E 'f16\\b'"

_assert_output "1" sh -c "script -qec \"containerfs snapshot publish '$S/containers/com.example.cow/Documents/f20' --name direct\" /dev/null | grep -c 'publishing: 1 files of 1 (100%)'"

# MARK: export from the unmounted store reads the linked data
_assert_output "file 15" sh -c "containerfs snapshot export s3 -o - --store '$S' | tar -xOf - s3/Documents/f15"
