# Under -o writeback the kernel keeps a file's times itself and writes them back with a
# SETATTR after every rename and unlink (`fuse_update_ctime`: the mtime as it was, and a
# ctime). That changes nothing in the store, so the daemon answers it without coordinating
# it or telling presenters (DESIGN.md 22): a rename is one move for a presenter, as on the
# default mount, not a move and a change. A real change of times still is one.
# (The build before sent presenters a change for each rename.)
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount -o writeback
C=$(_mkcontainer com.example.wb-times)
D=$C/Documents
SD=$TEST_STORE/containers/com.example.wb-times/Documents
echo one >"$D/f"
echo two >"$D/g"
# Times set through the mount: the kernel's and the store's agree (after a write they
# differ: the kernel stamps it when the page is dirtied, the store when it is written back,
# and the first write-back of times is then a change indeed).
touch -m -d @1000000000 "$D/f" "$D/g"

_watch dir "$D"
mv "$D/f" "$D/f2"
rm "$D/f2"
mv "$D/g" "$D/g2"
DIR=$'subitemDidMove f -> f2\nsubitemDidDelete f2\nsubitemDidMove g -> g2'
_expect_events dir "$DIR" "$D" '^(did|subitem|resync)'
_assert_output "1000000000000000000" fsop stat "$D/g2" mtime
_assert_output "1000000000" stat -c %Y "$SD/g2"
touch -m -d @1100000000 "$D/g2"               # one change (reported once or twice)
folded() { _events dir "$D" | grep -E '^(did|subitem|resync)' | uniq; }
want=$DIR$'\nsubitemDidChange g2'
_wait_for 10 eval '[[ $(folded) == "$want" ]]' || _fail "watch dir: expected"$'\n'"$want"$'\n'"--- got ---"$'\n'"$(folded)"
_ok "watch dir: then subitemDidChange g2"
_assert_output "1100000000" stat -c %Y "$SD/g2"
fs_umount
