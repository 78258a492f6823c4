# Documents/Inbox: read, list, delete and rename-out succeed; everything else fails with
# EACCES (docs/SEMANTICS.md §1.2), for root
# and for the container's owner. Files get there only by `inbox deliver`; here the test
# puts them into the store before mounting.
. "$(dirname "$0")/../lib/common.sh"
_users
_assert_ok containerfs container create com.example.notes --store "$TEST_STORE"
_assert_ok containerfs container create org.example.user --store "$TEST_STORE"
SI=$TEST_STORE/containers/com.example.notes/Documents/Inbox
for f in a.pdf b.pdf c.pdf d.pdf e.pdf f.pdf; do echo "content of $f" >"$SI/$f"; done
mkdir -p "$SI/folder/sub" "$SI/empty"
echo nested >"$SI/folder/sub/n.txt"
# The second container belongs to U1, Inbox content too.
SU=$TEST_STORE/containers/org.example.user
for f in a.pdf b.pdf c.pdf; do echo "user $f" >"$SU/Documents/Inbox/$f"; done
mkdir "$SU/Documents/Inbox/folder"
chown -R "$U1_UID:$U1_GID" "$SU"
fs_mount
C=$TEST_MNT/containers/com.example.notes
I=$C/Documents/Inbox
D=$C/Documents

# MARK: read and list
_assert_output "content of a.pdf" cat "$I/a.pdf"
_assert_output $'a.pdf\nb.pdf\nc.pdf\nd.pdf\ne.pdf\nempty\nf.pdf\nfolder' fsop listdir "$I"
_assert_ok fsop open "$I/a.pdf" O_RDONLY
_assert_output "0644" fsop stat "$I/a.pdf" perm

# MARK: everything else is EACCES, for root
refusals() {   # refusals RUNNER...
    local r=("$@")
    local f=$I/a.pdf
    _assert_errno EACCES "${r[@]}" fsop open "$I/new.txt" "O_WRONLY|O_CREAT"
    _assert_errno EACCES "${r[@]}" fsop open "$I/new.txt" "O_WRONLY|O_CREAT|O_EXCL"
    _assert_errno EACCES "${r[@]}" fsop open "$f" O_WRONLY
    _assert_errno EACCES "${r[@]}" fsop open "$f" O_RDWR
    _assert_errno EACCES "${r[@]}" fsop open "$f" "O_WRONLY|O_APPEND"
    _assert_errno EACCES "${r[@]}" fsop open "$f" "O_RDONLY|O_TRUNC"
    _assert_errno EACCES "${r[@]}" fsop truncate "$f" 0
    _assert_errno EACCES "${r[@]}" fsop mkdir "$I/newdir"
    _assert_errno EACCES "${r[@]}" fsop mkdir "$I/folder/newdir"
    _assert_errno EACCES "${r[@]}" fsop open "$I/folder/new.txt" "O_WRONLY|O_CREAT"
    _assert_errno EACCES "${r[@]}" fsop symlink a.pdf "$I/link"
    _assert_errno EACCES "${r[@]}" fsop mknod "$I/fifo" fifo 644
    _assert_errno EACCES "${r[@]}" fsop link "$f" "$I/hard"
    _assert_errno EACCES "${r[@]}" fsop link "$D/own.txt" "$I/hard"
    _assert_errno EACCES "${r[@]}" fsop link "$f" "$D/hard-out"
    _assert_errno EACCES "${r[@]}" fsop rename "$D/own.txt" "$I/own.txt"
    _assert_errno EACCES "${r[@]}" fsop rename "$D/own.txt" "$f"
    _assert_errno EACCES "${r[@]}" fsop rename "$f" "$I/renamed.pdf"
    _assert_errno EACCES "${r[@]}" fsop rename "$f" "$I/folder/a.pdf"
    _assert_errno EACCES "${r[@]}" fsop rename "$f" "$D/own.txt" exchange
    _assert_errno EACCES "${r[@]}" fsop rename "$D/own.txt" "$f" exchange
    _assert_errno EACCES "${r[@]}" fsop chmod "$f" 600
    _assert_errno EACCES "${r[@]}" fsop chmod "$I/folder" 700
    _assert_errno EACCES "${r[@]}" fsop chown "$f" "$OWNER" "$GROUP"
    _assert_errno EACCES "${r[@]}" fsop utimens "$f" now now
    _assert_errno EACCES "${r[@]}" fsop utimens "$f" 1 2
    _assert_errno EACCES "${r[@]}" fsop setxattr "$f" user.tag x
    _assert_errno EACCES "${r[@]}" fsop removexattr "$f" user.tag
    # Inbox itself: a standard directory, not writable.
    _assert_errno EACCES "${r[@]}" fsop chmod "$I" 700
    _assert_errno EACCES "${r[@]}" fsop setxattr "$I" user.tag x
    _assert_errno EACCES "${r[@]}" fsop rmdir "$I"
    _assert_errno EACCES "${r[@]}" fsop rename "$I" "$D/Inbox2"
}
echo own >"$D/own.txt"
OWNER=0 GROUP=0
refusals
_assert_errno EACCES touch "$I/new.txt"
_assert_errno EACCES sh -c "echo x >>'$I/a.pdf'"
_assert_errno EACCES mkdir "$I/x"
_assert_errno EACCES setfattr -n user.tag -v 1 "$I/a.pdf"
# A "safe save" (write a temporary file, rename it over) fails at its first step.
_assert_errno EACCES "$PY" -c 'import os,sys; fd=os.open(sys.argv[1]+"/.a.pdf.tmp", os.O_CREAT|os.O_WRONLY); os.rename(sys.argv[1]+"/.a.pdf.tmp", sys.argv[1]+"/a.pdf")' "$I"
_assert_output "content of a.pdf" cat "$I/a.pdf"
_assert_output "own" cat "$D/own.txt"

# MARK: delete and rename out work, and rename keeps the inode
ino=$(fsop stat "$I/b.pdf" ino)
_assert_ok fsop rename "$I/b.pdf" "$D/b.pdf"
_assert_output "$ino" fsop stat "$D/b.pdf" ino
_assert_output "content of b.pdf" cat "$D/b.pdf"
_assert_ok fsop rename "$I/c.pdf" "$D/own.txt"                 # out, over an existing file
_assert_output "content of c.pdf" cat "$D/own.txt"
_assert_ok fsop rename "$I/d.pdf" "$C/Library/d.pdf"           # out, to another area
_assert_ok fsop rename "$I/folder" "$D/folder"                 # a directory, with contents
_assert_output "nested" cat "$D/folder/sub/n.txt"
_assert_ok touch "$D/folder/sub/writable-now"                  # no longer in the Inbox
_assert_ok fsop unlink "$I/e.pdf"
_assert_ok fsop rmdir "$I/empty"
_assert_ok rm "$I/f.pdf"
_assert_ok mv "$I/a.pdf" "$D/"
_assert_output "" fsop listdir "$I"
_assert_output "" fsop listdir "$TEST_STORE/containers/com.example.notes/Documents/Inbox"

# MARK: the container's owner gets the same answers
U=$TEST_MNT/containers/org.example.user
I=$U/Documents/Inbox D=$U/Documents
_as_user "$U1" sh -c "echo own >'$D/own.txt'"
OWNER=$U1_UID GROUP=$U1_GID
refusals _as_user "$U1"
_assert_output "user a.pdf" _as_user "$U1" cat "$I/a.pdf"
_assert_ok _as_user "$U1" fsop rename "$I/a.pdf" "$D/a.pdf"
_assert_ok _as_user "$U1" fsop unlink "$I/b.pdf"
_assert_ok _as_user "$U1" rm -f "$I/c.pdf"
_assert_ok _as_user "$U1" rmdir "$I/folder"
_assert_output "" fsop listdir "$I"
# Another user may not even look in (container 0700).
_assert_errno EACCES _as_user "$U2" fsop listdir "$I"
