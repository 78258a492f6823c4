# An edit made in the store right after the mount itself changed the same file is still
# seen on the next read (DESIGN.md 14): the store watcher must not take the outside edit for
# the echo of the mount's own change. Each own change below once left an expectation that
# no echo ever met (a lone mtime or atime, a size, a hard link: none reaches a directory
# watch as IN_ATTRIB) or that a merged echo left over (chown, chmod and utimens in a row, as
# tar does), and the outside edit that followed within 2 s was served from stale pages.
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.echoes)
D=$C/Documents
SD=$TEST_STORE/containers/com.example.echoes/Documents

n=0
check() {   # check WHAT CMD...: CMD changes f through the mount; then the store changes it
    n=$((n + 1))
    printf 'before %04d\n' "$n" >"$D/f"
    _assert_output "before $(printf %04d $n)" cat "$D/f"      # pages and attributes cached
    "${@:2}"
    printf 'after  %04d\n' "$n" >"$SD/f"                       # same size, new bytes
    _assert_output "after  $(printf %04d $n)" cat "$D/f"
    _ok "outside edit right after $1 is read"
}
check "a hard link" ln -f "$D/f" "$D/link"
check "touch -m (mtime only)" touch -m -d @1400000000 "$D/f"
check "touch -a (atime only)" touch -a "$D/f"
check "a same-size truncate" truncate -s 12 "$D/f"
check "chmod, chown, utimens in a row" bash -c "chmod 640 '$D/f'; chown 0:0 '$D/f'; touch -d @1400000000 '$D/f'"
check "a setxattr" setfattr -n user.k -v v "$D/f"
fs_umount
