# A program in the store writes a file with two names (hard links) through one of them,
# and that name is removed or replaced before the program closes the file: by the store
# or through the mount. The mount shows the file's other name as written (DESIGN.md 14,
# "Hard links"). The directories are watched with IN_EXCL_UNLINK, so the close of a
# descriptor whose name was unlinked reaches no directory's watch; without one on the
# file itself the other name kept the old size and pages until its attributes expired,
# and under `-o writeback` for good (found by a coherence fuzzer; every check below
# failed with the build before).
#
# Per mode and per way the name goes (store unlink, store rename over it, unlink and
# rename over it through the mount): the other name is read through the mount (cached),
# the name goes, and once the mount shows the file's new link count (and has read it
# again: the count's news dropped its pages) the writer overwrites the file (same size: no size change can give it away) and closes it. The
# mount must show the new bytes within 2 s (the watcher tells the kernel asynchronously,
# DESIGN.md 27 "Not covered").
. "$(dirname "$0")/../lib/common.sh"

for mode in default writeback; do
    fs_mount_mode "$mode"
    C=$(_mkcontainer com.example.gone)
    D=$C/Documents
    SD=$MODE_STORE/containers/com.example.gone/Documents

    for how in store-unlink store-rename mount-unlink mount-rename; do
        printf 'old' >"$SD/a-$how"
        ln "$SD/a-$how" "$SD/b-$how"
        _assert_output "old" cat "$D/b-$how"      # the kernel holds the file, pages and size
        _assert_output "2" fsop stat "$D/b-$how" nlink
        exec 7<>"$SD/a-$how"                      # the writer opens it by the name a
        case $how in
            store-unlink) rm "$SD/a-$how" ;;
            store-rename) printf 'new a' >"$SD/.a-$how"; mv "$SD/.a-$how" "$SD/a-$how" ;;
            mount-unlink) rm "$D/a-$how" ;;
            mount-rename) printf 'new a' >"$D/.a-$how"; mv "$D/.a-$how" "$D/a-$how" ;;
        esac
        _wait_for 2 eval '[[ $(fsop stat "$D/b-$how" nlink) == 1 ]]' ||
            _fail "$mode, $how: $D/b-$how shows $(fsop stat "$D/b-$how" nlink) links after 2 s, the store 1"
        _assert_output "old" cat "$D/b-$how"      # its pages cached again
        printf 'new' >&7
        exec 7>&-                                  # its close: no directory hears it
        _wait_for 2 _shows "new" "$D/b-$how" ||
            _fail "$mode, $how: $D/b-$how shows '$(cat "$D/b-$how")' after 2 s, the store '$(cat "$SD/b-$how")'"
        _ok "$mode, $how: the other name shows the write"
        _assert_output "3" fsop stat "$D/b-$how" size
    done
    fs_umount
done
