# `containerfs purge [ID] [--tmp] [--caches]`: empties tmp/ and/or Library/Caches/ (no flag:
# both; no ID: every container of the caller's, all for root), the directories themselves
# stay, items open through the mount stay with the directories holding them, and it reports
# what it freed; tmp/ items older than 3 days go at mount (containers-and-wrappers §1.6).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
_users
S=$TEST_STORE M=$TEST_MNT
_assert_ok containerfs container create com.example.notes --store "$S"
_assert_ok containerfs container create com.example.mail --store "$S"
SC=$S/containers/com.example.notes
fill() {   # fill DIR: 3 items, 10 bytes
    mkdir -p "$1/d"
    printf '1234' >"$1/d/f"
    printf '123456' >"$1/g"
}

# MARK: without a mount
fill "$SC/tmp"; fill "$SC/Library/Caches"; fill "$S/containers/com.example.mail/tmp"
_assert_output "freed 3 items, 10 bytes" containerfs purge com.example.notes --caches --store "$S"
_assert_output "" fsop listdir "$SC/Library/Caches"
_assert_output $'d\ng' fsop listdir "$SC/tmp"
_assert_output "freed 6 items, 20 bytes" containerfs purge --store "$S"
_assert_output "" fsop listdir "$SC/tmp"
_assert_output "" fsop listdir "$S/containers/com.example.mail/tmp"
_assert_output "dir 0755" fsop stat "$SC/tmp" type perm
_assert_output "dir 0755" fsop stat "$SC/Library/Caches" type perm
_assert_output "freed 0 items, 0 bytes" containerfs purge --tmp --caches --store "$S"
_assert_exit 2 containerfs purge not_valid --store "$S"
[[ $_OUT == *"not_valid: not a valid bundle identifier"* ]] || _fail "invalid id: $_OUT"
_assert_exit 2 containerfs purge --tmp --bogus --store "$S"
_assert_exit 1 containerfs purge com.example.none --store "$S"
_assert_eq "containerfs: containers/com.example.none: no such file or directory" "$_OUT" "unknown container"

# MARK: at mount: tmp/ items older than 3 days (SPEC §1); Caches stay
fill "$SC/tmp"; fill "$SC/Library/Caches"
touch -d '5 days ago' "$SC/tmp/g" "$SC/Library/Caches/g"
fs_mount
C=$M/containers/com.example.notes
_assert_output "d" fsop listdir "$C/tmp"
_assert_output $'d\ng' fsop listdir "$C/Library/Caches"

# MARK: through the mount: open files stay, the kernel and presenters hear of the rest
EV='^(did|subitem|resync)'
printf 'abc' >"$C/tmp/g"
mkdir "$C/tmp/e"
printf '12' >"$C/tmp/e/open"
printf '123' >"$C/tmp/e/closed"
_watch tmp "$C/tmp"
_watch g "$C/tmp/g"
exec 7<"$C/tmp/e/open"
# Removed: d, d/f, g, e/closed (4 items, 4+3+3 bytes); kept: e/open and e.
_assert_output "freed 4 items, 10 bytes; kept 2 in use (open through the mount)" containerfs purge com.example.notes --tmp --store "$S"
_assert_output "e" fsop listdir "$C/tmp"
_assert_output "open" fsop listdir "$C/tmp/e"
_assert_errno ENOENT fsop stat "$C/tmp/g"
_assert_output $'d\ng' fsop listdir "$C/Library/Caches"
# One deletion each, in the order of the directory's listing; never an outside change.
WANT=$'subitemDidDelete d\nsubitemDidDelete e/closed\nsubitemDidDelete g'
_wait_for 10 eval '[[ $(_events tmp "$C/tmp" | grep -E "$EV" | sort) == "$WANT" ]]' ||
    _fail "presenter of tmp: expected"$'\n'"$WANT"$'\n'"got"$'\n'"$(_events tmp "$C/tmp")"
# A coordinated write for deleting: the file's presenter is asked to accommodate it first.
_expect_events g $'request accommodateDeletion,relinquishToWriter g\ndidDelete g' "$C/tmp"
exec 7<&-
_assert_output "freed 5 items, 12 bytes" containerfs purge com.example.notes --store "$S"
_assert_output "" fsop listdir "$C/tmp"
_assert_output "" fsop listdir "$C/Library/Caches"
_assert_output "" fsop listdir "$S/.staging"

# MARK: another user: their own containers only
_assert_ok _as_user "$U1" containerfs container create org.example.user --store "$S"
UC=$M/containers/org.example.user
_as_user "$U1" sh -c "printf 12345 >'$UC/tmp/u'"
fill "$C/tmp"
_assert_exit 1 _as_user "$U1" containerfs purge com.example.notes --store "$S"
_assert_eq "containerfs: containers/com.example.notes: only its owner (uid 0) or root may purge it: permission denied" "$_OUT" "another's container"
_assert_output "freed 1 item, 5 bytes" _as_user "$U1" containerfs purge --store "$S"
_assert_output "" fsop listdir "$UC/tmp"
_assert_output $'d\ng' fsop listdir "$C/tmp"
_assert_output "freed 3 items, 10 bytes" containerfs purge --store "$S"
