# timeout: 150
# A notification the kernel cannot take yet holds up nothing else (DESIGN.md 35). An entry
# invalidation waits for its directory's lock, which a namespace request parked on a claim
# holds (up to namespace_timeout); an inode invalidation waits for the file's cached pages,
# which a read parked on a claim holds (up to claim_timeout). Meanwhile edits made in the
# store elsewhere show through the mount, opens elsewhere are answered, and once the claim
# goes the blocked invalidation takes effect. Before, every open that caught up with the
# store waited behind the blocked one: 20 s with both deadlines at 20 s. Here they are
# 60 s and every check during the block must answer within 10 s.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount -o claim_timeout=60,namespace_timeout=60
C=$(_mkcontainer com.example.stall)
D=$C/Documents
SD=$TEST_STORE/containers/com.example.stall/Documents
echo data >"$D/f"
echo one >"$D/e"
head -c 1048576 /dev/urandom >"$D/big"
mkdir "$D/other"
echo one >"$D/other/h"
_assert_output "one" cat "$D/other/h"
_assert_output "one" cat "$D/e"
ls "$D/other" >/dev/null
# Names the kernel now caches as missing (negative entries, 60 s).
_assert_exit 1 test -e "$D/g"
_assert_exit 1 test -e "$D/other/k"
_assert_exit 1 test -e "$D/other/m"

# daemon_blocked WCHANS WHAT: a thread of the daemon waits in the kernel in one of WCHANS
# (a regular expression): the notification the case means to block is blocked.
daemon_blocked() {
    local wchans=$1
    _wait_for 10 eval 'grep -qxE "$wchans" /proc/$(_daemon_pid)/task/*/wchan' ||
        _fail "$2: no thread of the daemon waits in $1"
    _ok "$2: a notifier thread waits in $1"
}

# elsewhere_answers CONTENT NAME: an edit and a new name made in the store in
# Documents/other, and an edit of Documents/e, show through the mount while the
# notification about Documents or big is blocked.
elsewhere_answers() {
    echo "$1" >"$SD/other/h"
    echo "$1" >"$SD/other/$2"
    echo "$1" >"$SD/e"
    _assert_output "$1" timeout 10 cat "$D/other/h"
    _wait_for 10 test -e "$D/other/$2" || _fail "other/$2, made in the store, not seen through the mount within 10 s"
    _assert_output "$1" timeout 10 cat "$D/other/$2"
    [[ $(timeout 10 ls "$D/other") == *"$2"* ]] || _fail "ls other does not list $2"
    _ok "ls other lists $2"
    _assert_output "$1" timeout 10 cat "$D/e"
}

# MARK: a directory's lock held by an unlink parked on a claim
_hold w --write "$D/f"
fsop unlink "$D/f" &
unlinker=$!
_wait_parked $unlinker "unlink of f under a write claim"
echo new >"$SD/g"                                   # its invalidation waits for Documents
daemon_blocked "fuse_reverse_inval_entry|rwsem_down_write_slowpath" "entry invalidation of g"
elsewhere_answers two k
_assert_exit 1 test -e "$D/g"                       # still cached as missing: still blocked
_still_waiting $unlinker "unlink of f"
_release w
_finish $unlinker "unlink of f"
_assert_eq 0 "$_RC" "unlink of f after the claim went: exit status"
_wait_for 10 test -e "$D/g" || _fail "g, made in the store during the block, not seen after it"
_assert_output "new" cat "$D/g"

# MARK: a file's pages locked by a read parked on a claim
echo 1 >/proc/sys/vm/drop_caches                    # pages only: so that the read misses
python3 -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]): time.sleep(0.01)
sys.exit(0 if len(os.read(fd, 4096)) == 4096 else 1)
' "$D/big" "$TEST_TMP/opened" "$TEST_TMP/go" &
reader=$!
_wait_for 10 test -e "$TEST_TMP/opened" || _fail "reader did not open big"
_hold r --write "$D/big"
touch "$TEST_TMP/go"
# Readahead leaves the caller waiting on the locked page, not in the daemon.
_wait_for 10 eval '[[ $(cat /proc/$reader/wchan 2>/dev/null) == @(folio_wait_bit_common|request_wait_answer) ]]' ||
    _fail "read of big: not waiting under the claim (wchan $(cat /proc/$reader/wchan 2>/dev/null))"
_ok "read of big: waits for the claim"
echo tail >>"$SD/big"                               # its invalidation waits for big's pages
daemon_blocked "__folio_lock|folio_wait_bit_common|invalidate_inode_pages2_range" "inode invalidation of big"
elsewhere_answers three m
_still_waiting $reader "read of big"
_release r
_finish $reader "read of big"
_assert_eq 0 "$_RC" "read of big after the claim went: exit status"
_wait_for 10 eval '[[ $(tail -c 5 "$D/big") == tail ]]' || _fail "big's new size not seen after the block: $(stat -c %s "$D/big")"
_assert_output "1048581" stat -c %s "$D/big"
