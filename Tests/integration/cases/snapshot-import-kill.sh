# timeout: 240
# kill -9 during `snapshot import` (docs/DESIGN.md 54): of the CLI working on the store
# without a mount, and of the daemon importing for a client. After the next mount the
# snapshot is whole or absent, the table agrees with snapshots/, and `.staging/` is empty.
. "$(dirname "$0")/../lib/common.sh"
_require_root
S=$TEST_STORE M=$TEST_MNT
cd "$TEST_TMP"
# Many small files: an import that lasts long enough to be cut short.
$PY - <<'PY'
import os
for d in range(100):
    os.makedirs(f"big/K/d{d}")
    for f in range(100):
        with open(f"big/K/d{d}/f{f}", "wb") as out:
            out.write(os.urandom(2048))
PY
_assert_ok tar --format=pax -C big -cf "$TEST_TMP/big.tar" K
sums() { (cd "$1" && find . -type f -exec sha256sum {} + | sort -k2); }
WANT=$(sums big/K)

# whole_or_absent: after a remount, K is either the whole archive or not there at all.
whole_or_absent() {
    local listed
    listed=$(containerfs snapshot list --store "$S" | cut -f1 | grep -cx K || true)
    if [[ -e $M/snapshots/K ]]; then
        echo "  (the import had finished: K is whole)"
        _assert_eq 1 "$listed" "K listed"
        _assert_output "$WANT" sums "$M/snapshots/K"
        _assert_output "K: intact" containerfs snapshot verify K --store "$S"
        _assert_ok containerfs snapshot remove K --store "$S"
    else
        echo "  (the import was cut short: K is absent)"
        _assert_eq 0 "$listed" "K not listed"
    fi
    _assert_output "" ls -A "$S/.staging"
}

# started: the import has begun writing into .staging/.
started() { [[ -n $(ls -A "$S/.staging" 2>/dev/null) ]]; }

# MARK: the CLI on the store, killed mid-import
fs_mount
fs_umount
containerfs snapshot import "$TEST_TMP/big.tar" --name K --store "$S" >/dev/null 2>&1 &
CLI=$!
_wait_for 20 started || true
kill -9 "$CLI" 2>/dev/null || true
wait "$CLI" 2>/dev/null || true
fs_mount
whole_or_absent

# MARK: the daemon, killed while it imports for a client
containerfs snapshot import "$TEST_TMP/big.tar" --name K --store "$S" >/dev/null 2>&1 &
CLI=$!
_wait_for 20 started || true
kill -9 "$(_daemon_pid)"
wait "$CLI" 2>/dev/null || true
_force_unmount "$M"
fs_mount
whole_or_absent

# MARK: and an import that is let finish is whole
_assert_output "$M/snapshots/K" containerfs snapshot import "$TEST_TMP/big.tar" --store "$S"
_assert_output "$WANT" sums "$M/snapshots/K"
