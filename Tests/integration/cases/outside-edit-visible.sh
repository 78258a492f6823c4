# An edit made directly in the backing store, bypassing the mount, is visible through the
# mount on the very next call, with the default (long) cache timeouts: the daemon watches
# the store and invalidates the kernel's cached data, attributes and entries. New bytes,
# a new size, a new mode and mtime, a new file (even one just looked up as missing), a
# deleted file and a rename (docs/SEMANTICS.md §3.7).
# No sleeps: each check reads right after the store was changed.
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.outside)
D=$C/Documents
SD=$TEST_STORE/containers/com.example.outside/Documents

# MARK: content and size
echo "through the mount" >"$D/f"
_assert_output "through the mount" cat "$D/f"        # now in the page cache
_assert_output "18" fsop stat "$D/f" size              # and the attribute cache
echo "new" >"$SD/f"
_assert_output "new" cat "$D/f"
_assert_output "4" fsop stat "$D/f" size
echo "a longer line, written in the store" >"$SD/f"
_assert_output "a longer line, written in the store" cat "$D/f"
_assert_output "36" fsop stat "$D/f" size
echo "appended in the store" >>"$SD/f"
_assert_output $'a longer line, written in the store\nappended in the store' cat "$D/f"
_assert_output "58" fsop stat "$D/f" size
printf 'x' >"$SD/f"
_assert_output "x" fsop read "$D/f"
_assert_output "1" fsop stat "$D/f" size
# An open descriptor's next read sees it too.
exec 7<"$D/f"
printf 'y' >"$SD/f"
_assert_output "y" "$PY" -c 'import os; print(os.pread(7, 100, 0).decode())'
exec 7<&-

# MARK: mode, owner and times
_assert_output "0644" fsop stat "$D/f" perm
chmod 600 "$SD/f"
_assert_output "0600" fsop stat "$D/f" perm
chown 1234:5678 "$SD/f"
_assert_output "1234 5678" fsop stat "$D/f" uid gid
touch -m -d @1000000000 "$SD/f"
_assert_output "1000000000000000000" fsop stat "$D/f" mtime

# MARK: a new file appears (also right after it was looked up as missing)
_assert_errno ENOENT fsop stat "$D/new"                # a negative entry in the cache
_assert_output $'Inbox\nf' fsop listdir "$D"
echo "made in the store" >"$SD/new"
_assert_output "reg" fsop stat "$D/new" type
_assert_output "made in the store" cat "$D/new"
_assert_output $'Inbox\nf\nnew' fsop listdir "$D"
_assert_errno ENOENT fsop stat "$D/newdir"
mkdir "$SD/newdir"
echo inside >"$SD/newdir/file"
_assert_output "dir" fsop stat "$D/newdir" type
_assert_output "inside" cat "$D/newdir/file"

# MARK: a deleted file disappears
_assert_output "reg" fsop stat "$D/new" type           # a positive entry in the cache
rm "$SD/new"
_assert_errno ENOENT fsop stat "$D/new"
_assert_errno ENOENT cat "$D/new"
_assert_output $'Inbox\nf\nnewdir' fsop listdir "$D"
_assert_output "inside" cat "$D/newdir/file"
rm -r "$SD/newdir"
_assert_errno ENOENT fsop stat "$D/newdir/file"
_assert_errno ENOENT fsop stat "$D/newdir"
_assert_output $'Inbox\nf' fsop listdir "$D"

# MARK: a rename in the store: the old name is gone, the new one there
_assert_output "y" cat "$D/f"
_assert_errno ENOENT fsop stat "$D/g"
mv "$SD/f" "$SD/g"
_assert_errno ENOENT fsop stat "$D/f"
_assert_output "y" cat "$D/g"
_assert_output $'Inbox\ng' fsop listdir "$D"
fs_umount
