# A rename through the mount of a name the store has just renamed another file over, before
# the watcher's news reached the kernel: the kernel's entry of the name still leads to the
# old file, the daemon renames what the store's name leads to now, and the kernel moves its
# entry, with the old file, to the new name. The new name must show what the store has
# there (DESIGN.md 14; found by a coherence fuzzer:
# the old content stayed under the new name for good).
#
# (The build before failed 50 of 50 rounds on the default mount, 5 of 50 under writeback.)
#
# Per mode, 20 rounds: `a` made and read through the mount (the kernel holds it), `b` a
# hard link made through the mount of a file known as `k` (so an open of the moved entry
# finds its file still in place under the name the daemon knows, and nothing stale); `mv a
# b` in the store, `mv b c` through the mount at once; `c` must show a's content within 2 s.
. "$(dirname "$0")/../lib/common.sh"

for mode in default writeback; do
    fs_mount_mode "$mode"
    C=$(_mkcontainer com.example.renamed)
    D=$C/Documents
    SD=$MODE_STORE/containers/com.example.renamed/Documents
    for i in $(seq 1 20); do
        printf 'new %s' "$i" >"$D/a$i"
        printf 'old %s' "$i" >"$D/k$i"
        ln "$D/k$i" "$D/b$i"
        _assert_output "new $i" cat "$D/a$i"          # the kernel holds a
        _assert_output "old $i" cat "$D/b$i"          # and b, the file known as k
        # The store's rename over b, and at once (one process, microseconds apart) the
        # mount's rename of b.
        "$PY" -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2]); os.rename(sys.argv[3], sys.argv[4])' \
            "$SD/a$i" "$SD/b$i" "$D/b$i" "$D/c$i"
        _wait_for 2 _shows "new $i" "$D/c$i" ||
            _fail "$mode, round $i: c shows '$(cat "$D/c$i")' after 2 s, the store '$(cat "$SD/c$i")'"
        _assert_output "old $i" cat "$D/k$i"
    done
    _ok "$mode: the new name shows what the store renamed there, 20 rounds"
    fs_umount
done
