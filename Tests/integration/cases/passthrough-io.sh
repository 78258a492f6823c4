# FUSE passthrough (`-o passthrough`, DESIGN.md 29): the kernel passes an open file's reads,
# writes and mmaps straight to the backing file. Counted with the kernel's fuse tracepoint:
# writing 8 MiB through the mount and reading it back send no WRITE and no READ, and the
# bytes are right through the mount and in the store. Then what passthrough must not
# change: an edit made in the store is read at once through a descriptor already open; a
# reader and a writer of one file side by side (the kernel wants one kind of handle per
# inode: an EIO here would mean two kinds met); a shared mmap writes the file; O_DIRECT
# beside a passed-through handle is passed through too (ext4's alignment rules); append and
# truncate keep the size right; a set-ID mode is given at once after a passed-through
# handle closes (its RELEASE may still be on its way), a set-ID file written by another user
# loses its bits (set-ID files go through the daemon, which clears them) while a plain file
# written by that user is passed through, and a set-ID mode given through the mount or in
# the store behind a passed-through handle is cleared by that handle's next write
# (passed-through I/O runs without CAP_FSETID); and `-o passthrough,writeback` is refused
# with a clear message.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/fusetrace.sh"
_require_root
if [[ -r /proc/config.gz ]] && ! zcat /proc/config.gz | grep -x 'CONFIG_FUSE_PASSTHROUGH=y' >/dev/null; then
    _skip "kernel $(uname -r) built without CONFIG_FUSE_PASSTHROUGH"
fi
_users
_assert_exit 2 "$CONTAINERFS" mount "$TEST_STORE" "$TEST_MNT" -o passthrough,writeback   # a usage error
[[ $_OUT == *"-o passthrough,writeback: choose one"* ]] || _fail "unclear refusal: $_OUT"
fs_mount -o passthrough
D=$(_open_documents com.example.passthrough)
SD=$TEST_STORE/containers/com.example.passthrough/Documents

# MARK: data never reaches the daemon
_trace_begin "$TEST_MNT"
head -c 8M /dev/urandom >"$TEST_TMP/src"
cp "$TEST_TMP/src" "$D/big"
cmp "$D/big" "$TEST_TMP/src" || _fail "read back through the mount differs"
_trace_end
# A kernel that refuses passthrough (no CONFIG_FUSE_PASSTHROUGH, before 6.9) is told in the
# daemon's log; everything is then served the usual way, which other cases test.
if grep -q "FUSE passthrough refused by the kernel" "$TEST_TMP/daemon.$_CFS_N.log"; then
    _skip "$(grep -m1 "FUSE passthrough refused" "$TEST_TMP/daemon.$_CFS_N.log")"
fi
_assert_eq 1 "$(_trace_count FUSE_CREATE)" "CREATE requests (the count sees this mount)"
_assert_eq 0 "$(_trace_count FUSE_WRITE)" "WRITE requests for 8 MiB written"
_assert_eq 0 "$(_trace_count FUSE_READ)" "READ requests for 8 MiB read"
_assert_ok cmp "$SD/big" "$TEST_TMP/src"

# MARK: coherent with the store, open descriptors included
echo "through the mount" >"$D/f"
exec 7<"$D/f"
printf 'edited in the store' >"$SD/f.tmp" && cat "$SD/f.tmp" >"$SD/f" && rm "$SD/f.tmp"
_assert_output "edited in the store" "$PY" -c 'import os; print(os.pread(7, 100, 0).decode())'
exec 7<&-

# MARK: handles side by side, mmap, append, truncate
_assert_output "reader saw: written by the writer" "$PY" - "$D/g" <<'PY'
import os, sys
w = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
r = os.open(sys.argv[1], os.O_RDONLY)
os.write(w, b"written by the writer")
print("reader saw:", os.pread(r, 100, 0).decode())
os.close(r); os.close(w)
PY
_assert_output "MAPPED by mmap" "$PY" - "$D/g" <<'PY'
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.ftruncate(fd, 14)
m = mmap.mmap(fd, 14)
m[:14] = b"MAPPED by mmap"
m.flush(); m.close(); os.close(fd)
print(open(sys.argv[1]).read())
PY
_assert_output "MAPPED by mmap" cat "$SD/g"
# O_DIRECT beside a passed-through handle of the same file: passed through too, so the
# caller's buffers meet the store's own file system and its alignment rules (on ext4:
# aligned works, unaligned is EINVAL) — the same answer as a file next to the store gives.
direct() {
    "$PY" - "$1" <<'PY'
import errno, mmap, os, sys
keep = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
d = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
buf.write(b"D" * 4096)
os.pwritev(d, [buf], 0)
try:
    os.pwrite(d, b"xyz", 2)
    result = "unaligned write accepted"
except OSError as e:
    result = errno.errorcode[e.errno]
print(os.pread(keep, 4, 0).decode(), result)
os.close(d); os.close(keep)
PY
}
native=$(direct "$TEST_TMP/direct")
[[ $native == "DDDD "* ]] || _fail "O_DIRECT next to the store: $native"
_assert_output "$native" direct "$D/g"
printf 'MAPPED by mmap' >"$D/g"
printf '+tail' >>"$D/g"
_assert_output "19" fsop stat "$D/g" size
truncate -s 6 "$D/g"
_assert_output "MAPPED" cat "$D/g"
_assert_output "6" fsop stat "$SD/g" size

# MARK: set-ID bits: a mode with one is given right after a passed-through handle closes. The
# kernel sends the handle's RELEASE before the SETATTR, but another CPU's reader may still be
# serving it: refused while a handle was passed through, this failed with ETXTBSY in 760 of
# 2,000 rounds. Files that have such a mode go through the daemon.
_assert_output "0 of 200" "$PY" -c 'import os, sys
f, failed = sys.argv[1], 0
for _ in range(200):
    os.close(os.open(f, os.O_WRONLY))
    try: os.chmod(f, 0o4755)
    except OSError: failed += 1
    os.chmod(f, 0o644)
print("%d of 200" % failed)' "$D/g"
_assert_ok chmod 4755 "$D/g"
exec 8<>"$D/g"                  # through the daemon now (set-ID)...
_assert_ok chmod 755 "$D/g"
_assert_output "MAPPED" cat "$D/g"   # ...and a second handle beside it is of the same kind
exec 8>&-

# MARK: set-ID bits still go when another user writes
: >"$D/suid" && chmod 6777 "$D/suid"
_as_user "$U1" sh -c "printf data >>'$D/suid'"
_assert_output "0777" fsop stat "$D/suid" perm
_assert_output "0777" fsop stat "$SD/suid" perm
: >"$D/plain" && chmod 666 "$D/plain"
_trace_begin "$TEST_MNT"
_as_user "$U1" sh -c "printf data >>'$D/plain'"
_trace_end
_assert_eq 1 "$(_trace_count FUSE_OPEN)" "OPEN requests for another user's append to a plain file"
_assert_eq 0 "$(_trace_count FUSE_WRITE)" "WRITE requests for another user's write to a plain file"
_assert_output "data" cat "$SD/plain"
# set_id_behind_handle NAME DIR: a set-ID mode given by path in DIR (the mount: a SETATTR;
# the store: none) while another user's handle of the file is passed through; that user's
# next write through the handle still clears the bits.
set_id_behind_handle() {
    : >"$D/$1" && chmod 777 "$D/$1"
    # The writer stays until told to go: bash closes a coproc's pipes once it has reaped it,
    # so a writer that exited right after its last answer could take the answer with it.
    coproc WRITER { _as_user "$U1" "$PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
print("open", flush=True); sys.stdin.readline()
os.write(fd, b"data"); os.close(fd); print("wrote", flush=True); sys.stdin.readline()' "$D/$1"; }
    local writer=$WRITER_PID said=""
    read -r -t 10 said <&"${WRITER[0]}"
    _assert_eq open "$said" "the other user's handle of $1"
    _assert_ok chmod 6777 "$2/$1"
    _trace_begin "$TEST_MNT"
    echo go >&"${WRITER[1]}"
    said=""; read -r -t 10 said <&"${WRITER[0]}"
    _trace_end
    echo bye >&"${WRITER[1]}"
    wait "$writer"
    _assert_eq wrote "$said" "the other user's write to $1"
    _assert_eq 0 "$(_trace_count FUSE_WRITE)" "WRITE requests for $1 (the handle is passed through)"
    _assert_output "0777" fsop stat "$SD/$1" perm
    _assert_output "0777" fsop stat "$D/$1" perm
    _assert_output "data" cat "$SD/$1"
}
set_id_behind_handle late "$SD"
set_id_behind_handle given "$D"
fs_umount
