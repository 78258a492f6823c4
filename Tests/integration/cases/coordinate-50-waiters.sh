# 50 opens waiting for a claim hold no FUSE worker thread (deferred replies): while they
# wait, other requests are served (stat, reads, listings, writes and closes of other files,
# creating and removing entries), and once the claim ends all 50 complete (docs/SEMANTICS.md §3;
# docs/SEMANTICS.md §3.4). libfuse's pool has at most 10 workers by default:
# a daemon that slept in its handlers would stop answering here.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount
C=$(_mkcontainer com.example.waiters)
D=$C/Documents
F=$D/blocked
echo "blocked content" >"$F"
echo "other content" >"$D/other"
mkdir "$D/dir"
N=50

_hold w --write "$F"
pids=()
for ((i = 1; i <= N; i++)); do
    cat "$F" >"$TEST_TMP/cat.$i.out" 2>&1 &
    pids+=($!)
    _CFS_PIDS+=($!)
done
_wait_for 20 _all_parked "${pids[@]}" || _fail "not all $N readers are waiting in the daemon after 20 s"
_ok "$N readers of the claimed file wait in the daemon"

# MARK: other requests are served while they wait
_assert_output "14" timeout 5 fsop stat "$D/other" size
_assert_output "other content" timeout 5 cat "$D/other"
_assert_output "other content" timeout 5 fsop read "$D/other"
_assert_output $'Inbox\nblocked\ndir\nother' timeout 5 fsop listdir "$D"
_assert_ok timeout 5 sh -c "echo written >'$D/new'"
_assert_output "written" timeout 5 cat "$D/new"
_assert_ok timeout 5 fsop rename "$D/new" "$D/dir/moved"
_assert_ok timeout 5 fsop unlink "$D/dir/moved"
_assert_ok timeout 5 fsop mkdir "$D/dir/sub"
_assert_ok timeout 5 fsop rmdir "$D/dir/sub"
_assert_output "16" timeout 5 fsop stat "$F" size      # metadata of the claimed file too
_assert_ok timeout 5 fsop statfs "$D" bsize
# A burst of opens and closes of another file, in parallel, each answered.
_assert_ok timeout 10 "$PY" -c '
import os, sys, concurrent.futures as cf
def once(_):
    with open(sys.argv[1], "rb") as f:
        return f.read()
with cf.ThreadPoolExecutor(32) as ex:
    assert all(r == b"other content\n" for r in ex.map(once, range(200)))
' "$D/other"
_all_parked "${pids[@]}" || _fail "a reader of the claimed file stopped waiting while the claim is held"
_ok "all $N readers still wait"
_assert_output "blocked content" cat "$TEST_STORE/containers/com.example.waiters/Documents/blocked"

# MARK: once the claim ends, all 50 complete
_release w
bad=0
for ((i = 1; i <= N; i++)); do
    _wait_for 10 eval '! _pid_running ${pids[$((i - 1))]}' || _fail "reader $i still waiting 10 s after the release"
    rc=0
    wait "${pids[$((i - 1))]}" || rc=$?
    out=$(cat "$TEST_TMP/cat.$i.out")
    if ((rc != 0)) || [[ $out != "blocked content" ]]; then
        echo "reader $i: exit $rc: $out" >&2
        bad=$((bad + 1))
    fi
done
_assert_eq 0 "$bad" "readers that failed after the release"
_assert_ok timeout 2 fsop open "$F" "O_WRONLY|O_NONBLOCK"
fs_umount
