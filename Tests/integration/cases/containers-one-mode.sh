# `containers/` shows one mode, 01777 (DESIGN.md 5), whichever request the kernel last had its
# attributes from: LOOKUP, READDIRPLUS (`ls -l` of the root) or GETATTR. READDIRPLUS gave
# the store's 0755 and GETATTR 01777, so `stat` changed with what ran before it.
. "$(dirname "$0")/../lib/common.sh"
_require_root
fs_mount   # the default long attribute timeouts: the kernel keeps what it was told
_assert_output "1777" stat -c %a "$TEST_MNT/containers"                 # LOOKUP
echo 2 >/proc/sys/vm/drop_caches
ls -l "$TEST_MNT" >/dev/null                                             # READDIRPLUS
_assert_output "1777" stat -c %a "$TEST_MNT/containers"
_assert_output "drwxrwxrwt" stat -c %A "$TEST_MNT/containers"
fs_umount
fs_mount -o attr_timeout=0,entry_timeout=0                               # GETATTR every time
ls -l "$TEST_MNT" >/dev/null
_assert_output "1777" stat -c %a "$TEST_MNT/containers"
fs_umount
