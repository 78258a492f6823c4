# An O_NONBLOCK open that meets a conflicting claim fails with EAGAIN at once instead of
# waiting, and changes nothing (an O_TRUNC open does not truncate); without a conflict
# (another file, a shared read, the claim's own command) it succeeds (docs/SEMANTICS.md §3;
# docs/SEMANTICS.md §3.4).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount
C=$(_mkcontainer com.example.nonblock)
D=$C/Documents
F=$D/f
SF=$TEST_STORE/containers/com.example.nonblock/Documents/f
echo data >"$F"
echo other >"$D/other"

# MARK: under a write claim, every O_NONBLOCK open of the file is EAGAIN at once
_hold w --write "$F"
_assert_errno EAGAIN timeout 2 fsop open "$F" "O_WRONLY|O_NONBLOCK"
_assert_errno EAGAIN timeout 2 fsop open "$F" "O_RDWR|O_NONBLOCK"
_assert_errno EAGAIN timeout 2 fsop open "$F" "O_WRONLY|O_APPEND|O_NONBLOCK"
_assert_errno EAGAIN timeout 2 fsop open "$F" "O_WRONLY|O_TRUNC|O_NONBLOCK"
_assert_errno EAGAIN timeout 2 fsop open "$F" "O_RDONLY|O_NONBLOCK"
_assert_errno EAGAIN timeout 2 fsop openw "$F" "O_WRONLY|O_CREAT|O_NONBLOCK" changed
_assert_output "data" cat "$SF"                       # nothing truncated, nothing written
_assert_output "$(fsop strerror EAGAIN)" "$PY" -c '
import os, sys
try:
    os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
except BlockingIOError as e:
    print(e.strerror)
' "$F"
# Another file is not affected, and the claim's own command is never refused.
_assert_ok timeout 2 fsop open "$D/other" "O_WRONLY|O_NONBLOCK"
_assert_ok timeout 2 fsop open "$D/other" "O_RDONLY|O_NONBLOCK"
_release w
_assert_output "OK" timeout 10 containerfs coordinate --write "$F" -- fsop open "$F" "O_WRONLY|O_TRUNC|O_NONBLOCK"
_assert_output "" cat "$F"
echo data >"$F"

# MARK: with the claim gone, O_NONBLOCK opens succeed
_assert_ok timeout 2 fsop open "$F" "O_WRONLY|O_NONBLOCK"
_assert_ok timeout 2 fsop open "$F" "O_RDONLY|O_NONBLOCK"

# MARK: under a read claim, reads share and writes are EAGAIN
_hold r --read "$F"
_assert_ok timeout 2 fsop open "$F" "O_RDONLY|O_NONBLOCK"
_assert_errno EAGAIN timeout 2 fsop open "$F" "O_WRONLY|O_NONBLOCK"
_assert_errno EAGAIN timeout 2 fsop open "$F" "O_RDWR|O_NONBLOCK"
_assert_errno EAGAIN timeout 2 fsop open "$F" "O_WRONLY|O_TRUNC|O_NONBLOCK"
_assert_output "data" cat "$SF"
_release r
_assert_ok timeout 2 fsop openw "$F" "O_WRONLY|O_TRUNC|O_NONBLOCK" after
_assert_output "after" cat "$F"
fs_umount
