# What a program wrote through the mount stays in the kernel's page cache (issue 3;
# DESIGN.md 26): with the store watcher invalidating on outside changes, the kernel's own
# "drop the pages when a refresh shows a new mtime" (auto_inval_data) is off, so writing a
# file, stat-ing it and setting its mtime do not throw away the pages just written. Counted
# with the fuse:fuse_request_send tracepoint: reading the 8 MiB back sends no READ. The other
# side of the bargain: a change made in the store is read at once (READs again, new bytes).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/fusetrace.sh"
fs_mount
C=$(_mkcontainer com.example.cached)
D=$C/Documents
SD=$TEST_STORE/containers/com.example.cached/Documents

head -c 8388608 /dev/urandom >"$TEST_TMP/data"
cp "$TEST_TMP/data" "$D/f"
fsop stat "$D/f" size >/dev/null            # a refresh: new mtime, same size
touch -m -d @1500000000 "$D/f"              # a SETATTR answered with the new mtime
_trace_begin "$TEST_MNT"
cmp "$TEST_TMP/data" "$D/f" || _fail "content read back differs"
_trace_end
_assert_eq 0 "$(_trace_count FUSE_READ)" "READ requests to read back 8 MiB just written"
_assert_output "1500000000000000000" fsop stat "$D/f" mtime

head -c 8388608 /dev/urandom >"$TEST_TMP/other"
cp "$TEST_TMP/other" "$SD/f"                # behind the mount
_trace_begin "$TEST_MNT"
cmp "$TEST_TMP/other" "$D/f" || _fail "the store's new content is not what the mount reads"
_trace_end
reads=$(_trace_count FUSE_READ)
((reads > 0)) || _fail "no READ after a change in the store (stale pages served)"
_ok "after a change in the store: $reads READ requests, new content"
fs_umount
