# timeout: 120
# A snapshot goes by itself at its expiry time while mounted (docs/SEMANTICS.md §4,
# docs/DESIGN.md 56): no `snapshot list` is ever run here, yet the name leaves `ls
# MNT/snapshots` within 2 s of its time (never before), its row leaves the database, its
# presenter hears of the deletion, and an earlier expiry published after a later one, or one
# published while nothing else expires, is still met. (Expiry while no daemon ran, at the
# next mount: snapshot-publish.sh.)
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
_require_root
_require_cmd sqlite3
S=$TEST_STORE M=$TEST_MNT
fs_mount
D=$(_mkcontainer com.example.expiry)/Documents
printf 'a\n' >"$D/a.txt"

rows() { sqlite3 "$S/containerfs.db" "select name || ' ' || state from snapshots order by name"; }
expires_of() { sqlite3 "$S/containerfs.db" "select cast(expires as integer) from snapshots where name = '$1'"; }
now() { date +%s.%N; }

# gone_in_time NAME: polls `ls MNT/snapshots` (50 ms) until NAME is not listed, up to 10 s;
# the first listing without it must come at or after its expiry time and within 2 s of it.
gone_in_time() {
    local name=$1 at listing seen=""
    at=$(expires_of "$name")
    [[ -n $at ]] || _fail "$name: no expiry time in the database"
    for ((i = 0; i < 200; i++)); do
        t=$(now)
        listing=$(ls "$M/snapshots")
        if ! grep -qx "$name" <<<"$listing"; then seen=$t; break; fi
        sleep 0.05
    done
    [[ -n $seen ]] || _fail "$name: still listed 10 s later (expires at $at, now $(now))"
    late=$(awk -v s="$seen" -v a="$at" 'BEGIN { printf "%.2f", s - a }')
    awk -v l="$late" 'BEGIN { exit !(l >= -0.05 && l < 2) }' || _fail "$name: left the listing ${late}s after its expiry time (expected 0 to 2 s)"
    _ok "$name: gone from ls ${late}s after its expiry time"
}

# MARK: a later expiry first, then an earlier one: the earlier is met
_assert_output "$M/snapshots/keep" containerfs snapshot publish "$D/a.txt" --name keep
_assert_output "$M/snapshots/late" containerfs snapshot publish "$D/a.txt" --name late --expires 1h
_assert_output "$M/snapshots/soon" containerfs snapshot publish "$D/a.txt" --name soon --expires 3s
_watch w "$M/snapshots/soon"
_assert_output "keep late soon" sh -c "ls '$M/snapshots' | xargs"
gone_in_time soon
_assert_missing "$M/snapshots/soon"
_assert_missing "$S/snapshots/soon"
_assert_output "keep published
late published" rows
_assert_output "" ls -A "$S/.staging"
_expect_events w $'request accommodateDeletion,relinquishToWriter snapshots/soon\ndidDelete snapshots/soon'
_unwatch w

# MARK: removing the last expiring snapshot, then publishing one while nothing expires
_assert_ok containerfs snapshot remove late --store "$S"
_assert_output "keep" ls "$M/snapshots"
_assert_output "$M/snapshots/again" containerfs snapshot publish "$D" --name again --expires 2
gone_in_time again
_assert_output "keep published" rows

# MARK: several at one time go together
for n in x1 x2 x3; do containerfs snapshot publish "$D/a.txt" --name "$n" --expires 2 >/dev/null; done
_assert_output "keep x1 x2 x3" sh -c "ls '$M/snapshots' | xargs"
gone_in_time x3
_assert_output "keep" ls "$M/snapshots"
_assert_output "keep published" rows
_assert_output "" ls -A "$S/.staging"
fs_umount
