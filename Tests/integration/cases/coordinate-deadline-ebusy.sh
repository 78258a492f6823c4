# A request waiting for a claim fails with EBUSY at the mount's deadline, having changed
# nothing: content operations after claim_timeout, namespace operations after
# namespace_timeout (mount options, here 1 s each). `coordinate --timeout` gives up the
# same way (exit 1, a message naming the path). A SIGSTOPped holder does not hang anyone
# past the deadline, and SIGKILL of the holder releases its claim at once (docs/SEMANTICS.md §3;
# docs/SEMANTICS.md §3.4).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount -o claim_timeout=1,namespace_timeout=1
C=$(_mkcontainer com.example.deadline)
D=$C/Documents
F=$D/f
SF=$TEST_STORE/containers/com.example.deadline/Documents/f
echo data >"$F"
echo other >"$D/other"

# busy_after CMD...: CMD fails with EBUSY, after the 1 s deadline and well before 10 s.
busy_after() {
    local t0 t1 ms
    t0=$(date +%s%N)
    _assert_errno EBUSY timeout 10 "$@"
    t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000))
    ((ms >= 900)) || _fail "$*: EBUSY after $ms ms, before the 1 s deadline"
    ((ms < 8000)) || _fail "$*: EBUSY only after $ms ms"
    _ok "$*: EBUSY after $ms ms (deadline 1 s)"
}

# MARK: content operations: EBUSY after claim_timeout
_hold w --write "$F"
busy_after fsop open "$F" O_WRONLY
busy_after fsop open "$F" O_RDONLY
busy_after fsop open "$F" "O_RDWR|O_APPEND"
busy_after fsop truncate "$F" 0
busy_after sh -c "echo x >'$F'"
busy_after cat "$F"
_assert_output "data" cat "$SF"                     # nothing happened to the file

# MARK: namespace and metadata operations: EBUSY after namespace_timeout
busy_after fsop unlink "$F"
busy_after fsop rename "$F" "$D/g"
busy_after fsop rename "$D/other" "$F"              # replacing it
busy_after fsop chmod "$F" 600                      # a metadata write
_assert_exists "$SF"
_assert_missing "$D/g"
_assert_output "data" cat "$SF"
_assert_output "0644" fsop stat "$F" perm
_assert_output "other" cat "$D/other"

# MARK: `coordinate --timeout` gives up too
_assert_exit 1 timeout 10 containerfs coordinate --write --timeout 1 "$F" -- sh -c "echo never >'$F'"
[[ $_OUT == *"containers/com.example.deadline/Documents/f"* ]] || _fail "coordinate --timeout: message does not name the path: $_OUT"
_ok "coordinate --timeout 1: $_OUT"
_assert_exit 1 timeout 10 containerfs coordinate --read --timeout 1 "$F" -- true

# The holder is unharmed by the waiters that gave up, and nothing waits once it ends.
_release w
_assert_ok timeout 2 sh -c "echo after >'$F'"
_assert_output "after" timeout 2 cat "$F"

# MARK: a stopped holder: EBUSY at the deadline; SIGKILL frees the claim at once
_hold stopped --write "$F"
holder=${_HOLD_PID[stopped]}
kill -STOP "$holder"
busy_after fsop open "$F" O_WRONLY
busy_after cat "$F"
kill -KILL "$holder"
wait "$holder" 2>/dev/null || true
_assert_ok timeout 2 sh -c "echo freed >'$F'"
_assert_output "freed" timeout 2 cat "$F"
fs_umount
