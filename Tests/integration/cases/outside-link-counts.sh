# A hard link made or removed in the store changes the link count the mount shows for the
# file's other names (DESIGN.md 59, "What directory marks do not hear"). A directory's mark
# hears of the name only, never of the count (that event goes to marks of the file itself
# or its file system), so the count the kernel cached stayed as it was until its attributes
# expired (60 s): every round wrong with the build before.
#
# Per mode: an outside link beside and into another directory raises the count a cached
# name shows; an outside unlink and a rename over a name lower it, a move to another
# directory keeps it; a link made through the mount and removed in the store; a file the
# kernel holds under three names. Each count is polled for up to 2 s (the watcher tells the
# kernel asynchronously, DESIGN.md 27 "Not covered"), then asserted exactly.
. "$(dirname "$0")/../lib/common.sh"

nlink_is() { # EXPECTED PATH
    [[ $(fsop stat "$2" nlink 2>/dev/null) == "$1" ]]
}

gone() { # PATH: the watcher's entry invalidation, a wake-up late (DESIGN.md 27)
    _wait_for 2 eval '! fsop stat "$1" nlink >/dev/null 2>&1' || true
    _assert_errno ENOENT fsop stat "$1"
}

expect_nlink() { # WHAT EXPECTED PATH
    _wait_for 2 nlink_is "$2" "$3" ||
        _fail "$1: $3 shows $(fsop stat "$3" nlink) links after 2 s, the store $2"
    _ok "$1: $3 shows $2 links"
}

for mode in default writeback; do
    fs_mount_mode "$mode"
    C=$(_mkcontainer com.example.links)
    D=$C/Documents
    SD=$MODE_STORE/containers/com.example.links/Documents
    mkdir "$SD/sub"

    # MARK: links made in the store
    echo data >"$SD/a"
    _assert_output "1" fsop stat "$D/a" nlink        # cached with one name
    ln "$SD/a" "$SD/b"
    expect_nlink "$mode: outside link" 2 "$D/a"
    ln "$SD/a" "$SD/sub/c"
    expect_nlink "$mode: outside link in another directory" 3 "$D/a"
    _assert_output "3" fsop stat "$D/sub/c" nlink
    _assert_output "3" fsop stat "$D/b" nlink        # all three names cached now

    # MARK: names removed in the store
    rm "$SD/b"
    expect_nlink "$mode: outside unlink" 2 "$D/a"
    _assert_output "2" fsop stat "$D/sub/c" nlink
    gone "$D/b"
    echo other >"$SD/sub/.new"
    mv "$SD/sub/.new" "$SD/sub/c"                   # an editor's save over a name
    expect_nlink "$mode: outside rename over a name" 1 "$D/a"
    _assert_output "1" fsop stat "$D/sub/c" nlink
    _assert_output "other" cat "$D/sub/c"

    # MARK: a link made through the mount, removed in the store
    ln "$D/a" "$D/sub/d"
    _assert_output "2" fsop stat "$D/a" nlink
    rm "$SD/sub/d"
    expect_nlink "$mode: own link removed outside" 1 "$D/a"
    _assert_output "data" cat "$D/a"

    # MARK: a name moved in the store keeps the count; removed there, it lowers it
    ln "$SD/a" "$SD/e"
    expect_nlink "$mode: outside link again" 2 "$D/a"
    _assert_output "2" fsop stat "$D/e" nlink
    mv "$SD/e" "$SD/../Library/e"                    # a move keeps the count
    gone "$D/e"
    expect_nlink "$mode: a name moved in the store" 2 "$D/a"
    _assert_output "2" fsop stat "$C/Library/e" nlink
    rm "$SD/../Library/e"
    expect_nlink "$mode: the moved name removed" 1 "$D/a"
    fs_umount
done
