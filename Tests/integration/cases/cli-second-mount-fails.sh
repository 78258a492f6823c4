# Only one daemon serves a store (docs/SEMANTICS.md §6, a lock file): a second mount of the same store,
# at another mount point, in the background or with -f or through mount(8), fails with a
# clear message (naming the store and who holds it), exit status 1, and changes nothing:
# the first mount keeps working, nothing is mounted at the second point, the store's
# contents are untouched.
. "$(dirname "$0")/../lib/common.sh"
S=$TEST_STORE M=$TEST_MNT M2=$TEST_TMP/second
mkdir -p "$M2"
fs_mount
C=$(_mkcontainer com.example.once)
echo before >"$C/Documents/f"
state() { (cd "$S" && find . -path ./daemon.log -prune -o -path './containerfs.db*' -prune -o -printf '%p %y %s %m\n' | sort); }
before=$(state)

_assert_exit 1 containerfs mount "$S" "$M2"
msg=$_OUT
[[ $msg == *"$S"* ]] || _fail "the message does not name the store: $msg"
[[ $msg == *"in use"* || $msg == *"already"* ]] || _fail "the message does not say the store is taken: $msg"
[[ $msg == *"$M"* || $msg == *"pid"* ]] || _fail "the message does not say who holds it: $msg"
_ok "message: $msg"
_assert_eq "" "$(_mount_fstype "$M2")" "second mount point"

rc=0
timeout 20 "$CONTAINERFS" mount "$S" "$M2" -f >"$TEST_TMP/f.log" 2>&1 || rc=$?
_assert_eq 1 "$rc" "exit status of a second mount with -f"
[[ $(cat "$TEST_TMP/f.log") == *"$S"* ]] || _fail "-f message does not name the store: $(cat "$TEST_TMP/f.log")"
_assert_eq "" "$(_mount_fstype "$M2")" "second mount point after -f"

# Through mount(8) (helper resolution: see cli-mount-options).
if PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin command -v containerfs >/dev/null; then
    rc=0
    out=$(mount -t fuse.containerfs "$S" "$M2" 2>&1) || rc=$?
    ((rc != 0)) || _fail "mount -t of a store in use succeeded"
    _ok "mount -t refused (exit $rc): $out"
    _assert_eq "" "$(_mount_fstype "$M2")" "second mount point after mount -t"
fi

# The first mount is untouched and still works.
_assert_output "before" cat "$C/Documents/f"
echo after >>"$C/Documents/f"
_assert_output $'before\nafter' cat "$S/containers/com.example.once/Documents/f"
after=$(state)
_assert_eq "$(grep -v 'Documents/f ' <<<"$before")" "$(grep -v 'Documents/f ' <<<"$after")" "the store, apart from the file written through the first mount"
fs_umount
