# While `containerfs coordinate --write f` runs, other processes' writes and reads of f
# wait for it and complete once it ends; read claims share (a `cat` under a read claim is
# not blocked, a write waits for it); the claim's command and its descendants are never
# blocked by it, also a grandchild whose parent exited (docs/SEMANTICS.md §3.1,
# §3.5).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount
C=$(_mkcontainer com.example.coord)
F=$C/Documents/f
SF=$TEST_STORE/containers/com.example.coord/Documents/f
echo before >"$F"

# MARK: a write waits for a write claim; the claim's own command writes and reads at once
_hold w --write "$F" -- "echo inside >'$F' && cat '$F'"
_assert_output "inside" cat "$TEST_TMP/claim.w.log"
sh -c "echo after >'$F'" >"$TEST_TMP/writer.log" 2>&1 &
writer=$!
_wait_parked "$writer" "echo after > f"
_assert_output "inside" cat "$SF"     # the store: the waiting open has not truncated it
_still_waiting "$writer" "echo after > f"
_release w
_finish "$writer" "echo after > f"
_assert_eq 0 "$_RC" "exit status of the writer that waited"
_assert_output "after" cat "$F"

# MARK: a read waits for a write claim
_hold w2 --write "$F"
cat "$F" >"$TEST_TMP/reader.out" 2>&1 &
reader=$!
_wait_parked "$reader" "cat f"
_still_waiting "$reader" "cat f"
_release w2
_finish "$reader" "cat f"
_assert_eq 0 "$_RC" "exit status of the reader that waited"
_assert_output "after" cat "$TEST_TMP/reader.out"

# MARK: read claims share; a write waits for a read claim
_hold r --read "$F"
_assert_output "after" timeout 5 cat "$F"
_assert_output "after" timeout 5 fsop read "$F"
_assert_output "after" timeout 10 containerfs coordinate --read "$F" -- cat "$F"
_assert_output "after" timeout 10 containerfs coordinate --read --without-changes "$F" -- cat "$F"
sh -c "echo third >'$F'" >"$TEST_TMP/writer2.log" 2>&1 &
writer=$!
_wait_parked "$writer" "echo third > f under a read claim"
_assert_output "after" cat "$SF"
_still_waiting "$writer" "echo third > f under a read claim"
_release r
_finish "$writer" "echo third > f under a read claim"
_assert_eq 0 "$_RC" "exit status of the writer that waited for the read claim"
_assert_output "third" cat "$F"

# MARK: the claim's command and its children never wait for it
_assert_output "child" timeout 10 containerfs coordinate --write "$F" -- sh -c "echo child >'$F'; cat '$F'"
_assert_output "nested" timeout 10 containerfs coordinate --write "$F" -- sh -c "sh -c \"echo nested >'$F'\"; sh -c \"cat '$F'\""
_assert_output "child" timeout 10 containerfs coordinate --read "$F" -- sh -c "echo child >'$F'; cat '$F'"

# MARK: ... nor a grandchild whose parent exited (reparented to `coordinate`)
# The grandchild writes once its parent has exited (gone, or a zombie: `coordinate` may reap
# it late) and the test says go; meanwhile an outside reader waits for the claim, so the
# claim is known to be held while the grandchild writes.
G=$TEST_TMP/grandchild
mkdir "$G"
# shellcheck disable=SC2016
containerfs coordinate --write "$F" -- sh -c '
    (i=0
     while [ $i -lt 500 ]; do
         st=$(cut -d" " -f3 /proc/$$/stat 2>/dev/null)
         { [ -z "$st" ] || [ "$st" = Z ]; } && [ -e "$2/go" ] && break
         sleep 0.02; i=$((i + 1))
     done
     echo grandchild >"$1"; echo $? >"$2/rc") &
    touch "$2/started"; exit 0' sh "$F" "$G" >"$TEST_TMP/coordinate-grandchild.log" 2>&1 &
coord=$!
_wait_for 10 test -e "$G/started" || _fail "coordinate --write f -- (grandchild): command not started"
cat "$F" >"$TEST_TMP/outsider.out" 2>&1 &
outsider=$!
_wait_parked "$outsider" "cat f while the grandchild's claim is held"
touch "$G/go"
_finish "$coord" "coordinate --write f -- sh -c '(...; echo grandchild > f) & exit 0'"
_assert_eq 0 "$_RC" "exit status of coordinate (grandchild)"
_assert_output "0" cat "$G/rc"
_finish "$outsider" "cat f while the grandchild's claim is held"
_assert_eq 0 "$_RC" "exit status of the outside reader"
_assert_output "grandchild" cat "$TEST_TMP/outsider.out"

# MARK: nothing is left held
_assert_ok timeout 5 sh -c "echo free >'$F'"
_assert_output "free" timeout 5 cat "$F"
fs_umount
