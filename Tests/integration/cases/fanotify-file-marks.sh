# timeout: 120
# A daemon run by a user (not root) spends the user's fanotify marks (max_user_marks). A
# file with several names gets a mark of its own while the kernel holds it (DESIGN.md 59);
# the mark goes when the kernel forgets the file (the item goes, DESIGN.md 61), even while
# the file's inode stays in memory because a process holds it open in the store, where an
# evictable mark alone would stay. Looked up again, the file is marked again.
. "$(dirname "$0")/../lib/common.sh"
_require_root
_users
# A user's daemon opens /dev/fuse itself (Debian makes it 0666; some containers 0600).
fusemode=$(stat -c %a /dev/fuse)
trap 'rc=$?; chmod "$fusemode" /dev/fuse; (exit $rc); _cfs_cleanup' EXIT
chmod 666 /dev/fuse

store=$TEST_TMP/user-store mnt=$TEST_TMP/user-mnt
mkdir -p "$store" "$mnt"
chown "$U1:$U1" "$store" "$mnt"
_CFS_WRAP=(setpriv --reuid="$U1_UID" --regid="$U1_GID" --clear-groups --inh-caps=-all -- env HOME=/ PATH="$_CFS_USER_PATH")
fs_mount_at "$store" "$mnt"
_CFS_WRAP=()
pid=$(_daemon_pid "$mnt")
_wait_for 10 grep -q "store watcher: fanotify (marking each directory" "$TEST_TMP"/daemon.*.log || _fail "no fanotify watcher: $(cat "$TEST_TMP"/daemon.*.log)"
_assert_ok _as_user "$U1" mkdir "$mnt/containers/com.example.marks"
docs=$store/containers/com.example.marks/Documents
_assert_ok _as_user "$U1" sh -c "cd '$docs' && for i in \$(seq 1 50); do echo \$i > f\$i && ln f\$i g\$i; done"

# Holds every file open in the store: their inodes stay in memory, and evictable marks on them.
_as_user "$U1" "$PY" -c '
import os, sys, time
fds = [os.open(p, os.O_RDONLY) for p in sys.argv[1:]]
print("holding", len(fds), flush=True)
time.sleep(600)
' "$docs"/f* >"$TEST_TMP/holder.out" 2>&1 &
holder=$!
_CFS_PIDS+=("$holder")
_wait_for 10 grep -q "holding 50" "$TEST_TMP/holder.out" || _fail "holder: $(cat "$TEST_TMP/holder.out")"

fan=$(find /proc/"$pid"/fd -lname 'anon_inode:\[fanotify\]' -printf '%f\n' | head -1)
[[ -n $fan ]] || _fail "the daemon (pid $pid) has no fanotify descriptor"
inodes=$(stat -c %i "$docs"/f*)
marked_files() {
    local n=0 ino
    for ino in $inodes; do
        grep -q "ino:$(printf %x "$ino") " "/proc/$pid/fdinfo/$fan" && n=$((n + 1))
    done
    echo "$n"
}
# Only the user reaches a user's mount (no allow_other): the glob is the user's.
lookup() { _as_user "$U1" sh -c "stat '$mnt/containers/com.example.marks/Documents'/f* >/dev/null" || _fail "stat through the mount"; }
_assert_eq 0 "$(marked_files)" "no file is marked before the kernel is told of it"

lookup
_assert_eq 50 "$(marked_files)" "files with two names the kernel holds are marked"

# The kernel forgets the files (their dentries are unused): each FORGET lets the item go,
# and its mark with it.
sync
echo 2 >/proc/sys/vm/drop_caches
_wait_for 10 eval '[[ $(marked_files) == 0 ]]' || _fail "$(marked_files) of 50 file marks left after the kernel forgot the files"
_ok "the marks went with the items, the inodes still in memory"

lookup
_assert_eq 50 "$(marked_files)" "looked up again, the files are marked again"

kill "$holder"
wait "$holder" 2>/dev/null || true
fs_umount "$mnt"
