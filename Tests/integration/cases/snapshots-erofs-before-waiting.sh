# Under snapshots/ every mutation fails with EROFS at once, before any waiting: while a
# `coordinate --write` claim is held on something else (a container file the mutation would
# also touch), and while conflicting claims are held on the snapshot file, its directory and
# snapshots/ itself. Reads there never wait (docs/SEMANTICS.md §1, §3; docs/SEMANTICS.md §3.2, §3.4
# behaviour 36). Linking from a snapshot into a container is EXDEV (docs/SEMANTICS.md §4).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
# A snapshot directory made in the store before mounting.
_assert_ok containerfs container create com.example.snap --store "$TEST_STORE"
SS=$TEST_STORE/snapshots/x
mkdir -p "$SS/sub"
echo snap >"$SS/file"
ln -s file "$SS/link"
fs_mount
S=$TEST_MNT/snapshots/x
O=$TEST_MNT/containers/com.example.snap/Documents/o
echo outside >"$O"
_assert_output "snap" cat "$S/file"

# all_erofs WHAT: every mutation under snapshots/ answers EROFS within 2 s (the deadlines
# are 30 s and 5 s: a waiting request would be killed by `timeout` and fail differently).
all_erofs() {
    local f=$S/file d=$S/sub
    _assert_errno EROFS timeout 2 fsop open "$S/new" "O_WRONLY|O_CREAT"
    _assert_errno EROFS timeout 2 fsop open "$d/new" "O_WRONLY|O_CREAT|O_EXCL"
    _assert_errno EROFS timeout 2 fsop open "$TEST_MNT/snapshots/new" "O_WRONLY|O_CREAT"
    _assert_errno EROFS timeout 2 fsop open "$f" O_WRONLY
    _assert_errno EROFS timeout 2 fsop open "$f" O_RDWR
    _assert_errno EROFS timeout 2 fsop open "$f" "O_WRONLY|O_APPEND"
    _assert_errno EROFS timeout 2 fsop open "$f" "O_WRONLY|O_TRUNC"
    _assert_errno EROFS timeout 2 fsop open "$f" "O_WRONLY|O_NONBLOCK"
    _assert_errno EROFS timeout 2 fsop truncate "$f" 0
    _assert_errno EROFS timeout 2 fsop unlink "$f"
    _assert_errno EROFS timeout 2 fsop unlink "$S/link"
    _assert_errno EROFS timeout 2 fsop rmdir "$d"
    _assert_errno EROFS timeout 2 fsop rmdir "$S"
    _assert_errno EROFS timeout 2 fsop mkdir "$d/new"
    _assert_errno EROFS timeout 2 fsop mkdir "$TEST_MNT/snapshots/y"
    _assert_errno EROFS timeout 2 fsop rename "$f" "$d/renamed"
    _assert_errno EROFS timeout 2 fsop rename "$S" "$TEST_MNT/snapshots/y"
    _assert_errno EROFS timeout 2 fsop rename "$f" "$O.out"
    _assert_errno EROFS timeout 2 fsop rename "$O" "$d/moved-in"
    _assert_errno EROFS timeout 2 fsop rename "$O" "$f"
    _assert_errno EROFS timeout 2 fsop rename "$O" "$f" exchange
    _assert_errno EROFS timeout 2 fsop link "$O" "$d/hardlink"
    _assert_errno EXDEV timeout 2 fsop link "$f" "$O.hardlink"
    _assert_errno EROFS timeout 2 fsop symlink file "$d/symlink"
    _assert_errno EROFS timeout 2 fsop mknod "$d/fifo" fifo 644
    _assert_errno EROFS timeout 2 fsop chmod "$f" 600
    _assert_errno EROFS timeout 2 fsop chmod "$S" 700
    _assert_errno EROFS timeout 2 fsop chown "$f" 0 0
    _assert_errno EROFS timeout 2 fsop lchown "$S/link" 0 0
    _assert_errno EROFS timeout 2 fsop utimens "$f" now now
    _assert_errno EROFS timeout 2 fsop utimens "$f" 1 2
    _assert_errno EROFS timeout 2 fsop setxattr "$f" user.test v
    _assert_errno EROFS timeout 2 fsop removexattr "$f" user.test
    _assert_errno EROFS timeout 2 fsop setxattr "$S" user.test v
    _assert_errno EROFS timeout 2 sh -c "echo x >'$f'"
    _assert_errno EROFS timeout 2 touch "$d/touched"
    _ok "$1: every mutation under snapshots/ is EROFS at once"
}

# reads_answer WHAT: reads under snapshots/ answer within 2 s.
reads_answer() {
    _assert_output "snap" timeout 2 cat "$S/file"
    _assert_output "snap" timeout 2 fsop read "$S/link"
    _assert_output $'file\nlink\nsub' timeout 2 fsop listdir "$S"
    _assert_output "file" timeout 2 fsop readlink "$S/link"
    _ok "$1: reads under snapshots/ answer at once"
}

all_erofs "no claim"
reads_answer "no claim"

# MARK: a write claim on something else (the container file some renames would move)
_hold other --write "$O"
_assert_errno EAGAIN timeout 2 fsop open "$O" "O_WRONLY|O_NONBLOCK"    # it is held
all_erofs "write claim on a container file"
reads_answer "write claim on a container file"

# MARK: conflicting claims on the snapshot itself
_hold subtree --write --for deleting "$S"
all_erofs "write for deleting on snapshots/x, write claim on the container file"
_release subtree
_hold file --write "$S/file"
all_erofs "write claim on snapshots/x/file, write claim on the container file"
_release file
_hold root --write --for moving "$TEST_MNT/snapshots"
all_erofs "write for moving on snapshots/, write claim on the container file"
_release root
_release other

# Nothing changed in the store.
_assert_output "snap" cat "$SS/file"
_assert_output $'file\nlink\nsub' fsop listdir "$SS"
_assert_output "" fsop listdir "$SS/sub"
_assert_output "x" fsop listdir "$TEST_STORE/snapshots"
_assert_output "outside" cat "$O"

# MARK: reads under snapshots/ never wait, even for conflicting claims (docs/SEMANTICS.md
# §3.2, §3.4: a snapshot's content never changes through the mount)
_hold file --write "$S/file"
reads_answer "write claim on snapshots/x/file"
_release file
_hold subtree --write --for deleting "$S"
reads_answer "write for deleting on snapshots/x"
_release subtree

fs_umount
