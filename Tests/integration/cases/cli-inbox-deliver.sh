# `containerfs inbox deliver ID FILE...`: copies each file into Documents/Inbox/ (data, mode,
# mtime), never overwrites (a.txt, a.2.txt, ...), prints each resulting path; without a mount
# (under the store lock) and through the daemon, whose kernel view and presenters learn of
# each file at once; files are read with the caller's permissions; progress on a terminal
# only (containers-and-wrappers §1.5, SPEC §2).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
_users
S=$TEST_STORE M=$TEST_MNT
_assert_ok containerfs container create com.example.notes --store "$S"
SI=$S/containers/com.example.notes/Documents/Inbox
W=$TEST_TMP/work
mkdir -p "$W/dir"
printf 'hello\n' >"$W/a.txt"
chmod 0640 "$W/a.txt"
touch -d '2020-01-02 03:04:05.123456789' "$W/a.txt"
printf 'tar\n' >"$W/b.tar.gz"
printf 'x\n' >"$W/README"

# MARK: without a mount
_assert_output "$SI/a.txt" containerfs inbox deliver com.example.notes "$W/a.txt" --store "$S"
_assert_output $'a\n'"$SI/a.2.txt"$'\n'"$SI/b.tar.gz"$'\n'"$SI/README" sh -c "echo a; containerfs inbox deliver com.example.notes '$W/a.txt' '$W/b.tar.gz' '$W/README' --store '$S'"
_assert_output "hello" cat "$SI/a.2.txt"
_assert_output "0640 1577934245123456789" fsop stat "$SI/a.2.txt" perm mtime
_assert_output $'README\na.2.txt\na.txt\nb.tar.gz' fsop listdir "$SI"
_assert_output "" fsop listdir "$S/.staging"
# Bad input: usage errors exit 2, failed deliveries 1, naming the path and the reason; the
# other files of the command are still delivered.
_assert_exit 2 containerfs inbox deliver not_valid "$W/a.txt" --store "$S"
[[ $_OUT == *"not_valid: not a valid bundle identifier"* ]] || _fail "invalid id: $_OUT"
_assert_exit 2 containerfs inbox deliver com.example.notes --store "$S"
[[ $_OUT == *"missing the files to deliver"* ]] || _fail "no files: $_OUT"
_assert_exit 1 containerfs inbox deliver com.example.none "$W/a.txt" --store "$S"
_assert_eq "containerfs: containers/com.example.none: no such file or directory" "$_OUT" "unknown container"
_assert_exit 1 containerfs inbox deliver com.example.notes "$W/missing" "$W/dir" "$W/README" --store "$S"
_assert_eq "containerfs: $W/missing: no such file or directory
containerfs: $W/dir (only files can be delivered): is a directory
$SI/README.2" "$_OUT" "failures and a delivery"

# MARK: through the mount
fs_mount
I=$M/containers/com.example.notes/Documents/Inbox
_assert_output $'README\nREADME.2\na.2.txt\na.txt\nb.tar.gz' fsop listdir "$I"   # the kernel lists the Inbox now
EV='^(did|subitem|resync)'
_watch inbox "$I"
_assert_output "$I/a.3.txt" containerfs inbox deliver com.example.notes "$W/a.txt" --store "$S"
_assert_output $'README\nREADME.2\na.2.txt\na.3.txt\na.txt\nb.tar.gz' fsop listdir "$I"
_assert_output "hello" cat "$I/a.3.txt"
_assert_output "0640 1577934245123456789 0" fsop stat "$I/a.3.txt" perm mtime uid
# Announced once, as the daemon's own change (never as an outside one).
_expect_events inbox "subitemDidAppear a.3.txt" "$I" "$EV"
_assert_exit 1 containerfs inbox deliver com.example.none "$W/a.txt" --store "$S"
_assert_eq "containerfs: containers/com.example.none: no such file or directory" "$_OUT" "unknown container, mounted"
# Writing into the Inbox through the mount stays EACCES: deliver is the only way in.
_assert_errno EACCES fsop open "$I/new.txt" "O_WRONLY|O_CREAT"

# MARK: another user: their own container only, files read with their permissions
_assert_ok _as_user "$U1" containerfs container create org.example.user --store "$S"
UI=$M/containers/org.example.user/Documents/Inbox
install -o "$U1" -m 0600 /dev/null "$W/u1-file"
echo "u1 data" >"$W/u1-file"
install -o root -m 0600 /dev/null "$W/root-secret"
echo secret >"$W/root-secret"
_assert_output "$UI/u1-file" _as_user "$U1" containerfs inbox deliver org.example.user "$W/u1-file" --store "$S"
_assert_output "$U1_UID $U1_GID 0600" fsop stat "$UI/u1-file" uid gid perm
_assert_output "u1 data" _as_user "$U1" cat "$UI/u1-file"
_assert_exit 1 _as_user "$U1" containerfs inbox deliver org.example.user "$W/root-secret" --store "$S"
_assert_eq "containerfs: $W/root-secret: permission denied" "$_OUT" "a file the user cannot read"
_assert_exit 1 _as_user "$U1" containerfs inbox deliver com.example.notes "$W/u1-file" --store "$S"
_assert_eq "containerfs: containers/com.example.notes: only its owner (uid 0) or root may deliver into its Inbox: permission denied" "$_OUT" "another's container"
_assert_output "" fsop listdir "$S/.staging"

# MARK: progress: on a terminal only, for large files
dd if=/dev/zero of="$W/big" bs=1M count=40 status=none
_assert_output "$I/big" containerfs inbox deliver com.example.notes "$W/big" --store "$S" 2>"$TEST_TMP/piped.err"
_assert_eq "" "$(cat "$TEST_TMP/piped.err")" "stderr when piped"
script -qec "containerfs inbox deliver com.example.notes '$W/big' --store '$S'" /dev/null >"$TEST_TMP/tty.out"
grep -q "big: 100% (40 of 40 MiB)" "$TEST_TMP/tty.out" || _fail "no progress on a terminal: $(cat -v "$TEST_TMP/tty.out")"
grep -q "$I/big.2" "$TEST_TMP/tty.out" || _fail "path not printed on a terminal: $(cat -v "$TEST_TMP/tty.out")"
_assert_ok cmp "$W/big" "$I/big.2"
