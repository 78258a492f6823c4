# timeout: 120
# `containerfs mount`: returns only once the mount is live (the daemon in the background),
# `-f` stays in the foreground, options allow_other, default_permissions, ro, auto_unmount,
# fsname and subtype reach the kernel, the type is fuse.containerfs; mount(8) works with
# `-t fuse.containerfs` and fstab-style generic options; bad mount points and options fail
# with a message naming them; `containerfs unmount` unmounts cleanly, also when the mount
# point is named through a symbolic link (docs/SEMANTICS.md §2, issue 2).
. "$(dirname "$0")/../lib/common.sh"
_users
S=$TEST_STORE M=$TEST_MNT
opts_of() { _mount_line "$1" | sed 's/.* - //'; }          # "TYPE SOURCE SUPEROPTS"
flags_of() { _mount_line "$1" | awk '{ print $6 }'; }     # per-mount flags (rw/ro,...)

# MARK: background mount returns when live; unmount
_assert_ok containerfs mount "$S" "$M"
# No polling: the mount must already be there and answer.
_assert_eq "fuse.containerfs" "$(_mount_fstype "$M")" "type right after return"
_assert_output $'containers\nsnapshots' fsop listdir "$M"
read -r type source superopts <<<"$(opts_of "$M")"
_assert_eq "$S" "$source" "default fsname (the store)"
[[ ,$superopts, == *,default_permissions,* ]] || _fail "default_permissions missing: $superopts"
[[ ,$superopts, == *,allow_other,* ]] || _fail "allow_other missing for root: $superopts"
_ok "default_permissions and allow_other by default (root)"
_assert_ok _as_user "$U1" ls "$M"                            # allow_other: other users get in
# A user cannot unmount root's mount: the message is fusermount3's own reason (it said
# "unmount failed (busy?)").
_assert_exit 1 _as_user "$U1" containerfs unmount "$M"
[[ $_OUT == "containerfs: $M: unmount failed: fusermount3: "* && $_OUT != *busy* ]] || _fail "unmount as another user: $_OUT"
_ok "unmount as another user: $_OUT"
_assert_eq "fuse.containerfs" "$(_mount_fstype "$M")" "still mounted"
_assert_ok containerfs unmount "$M"
_assert_eq "" "$(_mount_fstype "$M")" "after unmount"
_assert_ok containerfs mount "$S" "$M"                       # the store lock was released
# Through a symbolic link to the mount point's parent, and relative to it: mountinfo has the
# resolved path, and the mount is found there.
ln -sfn "$(dirname "$M")" "$TEST_TMP/via-link"
_assert_ok env -C "$TEST_TMP" containerfs unmount "via-link/$(basename "$M")"
_assert_eq "" "$(_mount_fstype "$M")" "after unmount through a symbolic link"
_assert_ok containerfs mount "$S" "$M"
_assert_ok containerfs unmount "$M"
_assert_exit 1 containerfs unmount "$M"
[[ $_OUT == *"$M"* ]] || _fail "unmount of a non-mount does not name the path: $_OUT"

# MARK: -f stays in the foreground until unmounted
"$CONTAINERFS" mount "$S" "$M" -f >"$TEST_TMP/fg.log" 2>&1 &
fg=$!
_wait_for 10 _is_mounted "$M" || _fail "foreground mount never became live: $(cat "$TEST_TMP/fg.log")"
sleep 0.3
_pid_running "$fg" || _fail "-f returned while mounted"
_ok "-f keeps running while mounted"
_assert_ok fusermount3 -u "$M"
rc=0
_wait_for 10 eval '! _pid_running $fg' || _fail "-f did not exit after unmount"
wait "$fg" || rc=$?
_assert_eq 0 "$rc" "exit status of -f after unmount"

# MARK: options
fs_mount -o ro
[[ ,$(flags_of "$M"), == *,ro,* ]] || _fail "ro not in the mount flags: $(flags_of "$M")"
_assert_errno EROFS fsop mkdir "$M/containers/com.example.ro"
_assert_errno EROFS touch "$M/x"
fs_umount

fs_mount -o fsname=myfs,subtype=containerfs
read -r type source superopts <<<"$(opts_of "$M")"
_assert_eq "fuse.containerfs myfs" "$type $source" "subtype and fsname"
fs_umount
# Another subtype is refused (DESIGN.md 13): ContainerFS mounts are known by their type, and
# with -o subtype=other `unmount` said "not a containerfs mount", `coordinate` and `watch`
# "not under a ContainerFS mount".
_assert_exit 2 containerfs mount "$S" "$M" -o subtype=other
_assert_eq "containerfs: -o subtype=other: refused: a ContainerFS mount is known by its type fuse.containerfs (unmount, coordinate, watch and the trash look for it)" "$_OUT" "message for -o subtype=other"
_assert_eq "" "$(_mount_fstype "$M")" "nothing mounted with another subtype"

# `unmount` takes down only a ContainerFS mount that is topmost: with a tmpfs over it, it
# removed the tmpfs and left the ContainerFS mount (exit 0).
fs_mount
mount -t tmpfs cfs-test-over "$M"
_assert_exit 1 containerfs unmount "$M"
_assert_eq "containerfs: $M: the topmost mount here is tmpfs, not ContainerFS (unmount it first)" "$_OUT" "unmount under a tmpfs: message"
_assert_eq "tmpfs" "$(_mount_fstype "$M")" "the tmpfs is still on top"
umount "$M"
_assert_eq "fuse.containerfs" "$(_mount_fstype "$M")" "the ContainerFS mount below"
_assert_ok containerfs unmount "$M"
_wait_daemon "$M"
_assert_eq "" "$(_mount_fstype "$M")" "after unmount"

fs_mount -o noallow_other
read -r type source superopts <<<"$(opts_of "$M")"
[[ ,$superopts, != *,allow_other,* ]] || _fail "noallow_other still has allow_other"
_assert_errno EACCES _as_user "$U1" fsop listdir "$M"
_assert_ok fsop listdir "$M"
fs_umount

fs_mount -o allow_other,default_permissions
_assert_ok mkdir "$M/containers/com.example.perm"
chmod 700 "$M/containers/com.example.perm"
# default_permissions: the kernel checks modes, so another user is refused by mode bits.
_assert_errno EACCES _as_user "$U1" fsop listdir "$M/containers/com.example.perm"
fs_umount

# In the background (no -f), `mount -o auto_unmount` returns once the mount is live: the
# fusermount3 that libfuse leaves behind for auto_unmount does not hold the readiness pipe.
_assert_ok timeout 20 containerfs mount "$S" "$M" -o auto_unmount
_assert_eq "fuse.containerfs" "$(_mount_fstype "$M")" "mounted in the background with auto_unmount"
_assert_ok containerfs unmount "$M"

# auto_unmount: the mount goes away even when the daemon is killed outright. (Only once the
# daemon serves: the mount shows in mountinfo before fusermount3 has handed the daemon its
# /dev/fuse descriptor, and a daemon killed in between takes the descriptor with it, in
# flight.) fusermount3 alone left the mount 2 times in 8: it looks when its socket to the
# dying daemon closes, which may be before the daemon's /dev/fuse descriptors are, finds
# the connection not aborted and exits; the daemon's own watcher does not look (DESIGN.md 31).
fs_mount -o auto_unmount
_assert_ok fsop listdir "$M"
pid=$(_daemon_pid "$M")
kill -KILL "$pid"
_wait_for 20 eval '! _is_mounted "$M"' ||
    _fail "auto_unmount: still mounted 20 s after the daemon was killed; fusermount3 processes: $(ps -eo pid,ppid,stat,args | grep '[f]usermount3')"
_ok "auto_unmount removed the mount after SIGKILL"
wait "$pid" 2>/dev/null || true
unset "_CFS_PID[$M]"

# MARK: bad arguments fail, naming what is wrong, and mount nothing
# The kernel's refusal is told with libfuse's own reason (it said "is it an existing
# directory, and is /dev/fuse usable?" for anything); in the background it comes from
# daemon.log. Mount options longer than a page are EINVAL.
long=$(printf 'x%.0s' {1..5000})
_assert_exit 1 containerfs mount "$S" "$M" -o "fsname=$long"
_assert_eq "containerfs: $M: cannot mount (fuse: mount failed: Invalid argument)" "$_OUT" "a refused mount's reason (background)"
_assert_exit 1 containerfs mount "$S" "$M" -f -o "fsname=$long"
_assert_eq $'fuse: mount failed: Invalid argument\ncontainerfs: '"$M"': cannot mount' "$_OUT" "a refused mount's reason (-f)"
_assert_exit 1 containerfs mount "$S" "$TEST_TMP/no-such-dir"
[[ $_OUT == *"$TEST_TMP/no-such-dir"* ]] || _fail "message does not name the mount point: $_OUT"
touch "$TEST_TMP/a-file"
_assert_exit 1 containerfs mount "$S" "$TEST_TMP/a-file"
[[ $_OUT == *"$TEST_TMP/a-file"* ]] || _fail "message does not name the mount point: $_OUT"
rc=0
out=$(containerfs mount "$S" "$M" -o no_such_option 2>&1) || rc=$?
((rc != 0)) || _fail "an unknown option was accepted"
[[ $out == *no_such_option* ]] || _fail "message does not name the bad option: $out"
_ok "unknown option refused (exit $rc): $out"
# Options that are not ContainerFS's (documented) ones are refused before anything starts:
# libfuse took max_read=1 and the mount then failed at INIT, after `mount` had said it was
# live (exit 0, nothing mounted, in the background and with -f).
for bad in max_read=1 blksize=4096 no_such_option; do
    _assert_exit 2 containerfs mount "$S" "$M" -o "$bad"
    _assert_eq "containerfs: -o $bad: not a ContainerFS mount option (see containerfs help mount)" "$_OUT" "message for -o $bad"
    _assert_exit 2 timeout 20 "$CONTAINERFS" mount "$S" "$M" -o "ro,$bad" -f
    _assert_eq "containerfs: -o $bad: not a ContainerFS mount option (see containerfs help mount)" "$_OUT" "message for -o ro,$bad -f"
done
# libfuse's and mount(8)'s own flags stay accepted.
_assert_ok containerfs mount "$S" "$M" -o nosuid,nodev,noexec,noatime,rw,async,dirsync
_assert_output $'containers\nsnapshots' fsop listdir "$M"
_assert_ok containerfs unmount "$M"
# Numbers that would overflow a conversion to milliseconds or nanoseconds are refused.
for bad in attr_timeout=inf claim_timeout=nan presenter_timeout=1e300 negative_timeout=-1; do
    rc=0
    out=$(containerfs mount "$S" "$M" -o "$bad" 2>&1) || rc=$?
    _assert_eq 2 "$rc" "exit status for -o $bad (a usage error)"
    _assert_eq "containerfs: -o $bad: expects a number of seconds from 0 to 1000000000" "$out" "message for -o $bad"
done
# Thread counts are whole numbers, and a pool needs a thread.
for bad in threads=0.5 threads=0 threads=1e300 threads=100001 idle_threads=-1 idle_threads=2.5; do
    rc=0
    out=$(containerfs mount "$S" "$M" -o "$bad" 2>&1) || rc=$?
    _assert_eq 2 "$rc" "exit status for -o $bad (a usage error)"
    low=0
    [[ $bad == threads=* ]] && low=1
    _assert_eq "containerfs: -o $bad: expects a whole number from $low to 100000" "$out" "message for -o $bad"
done
# The mount point may be neither the store nor inside it (the mount hid the store from the
# daemon: `ls` of the mount gave EIO, and every command then failed), nor above it (the
# mount hides the store's control socket from every command). Compared by device and
# inode, so that a symbolic link does not get round it.
_assert_exit 1 containerfs mount "$S" "$S"
_assert_eq "containerfs: $S: the mount point is in the store $S (it would hide the store)" "$_OUT" "mount onto the store: message"
_assert_exit 1 containerfs mount "$S" "$S/containers"
_assert_eq "containerfs: $S/containers: the mount point is in the store $S (it would hide the store)" "$_OUT" "mount inside the store: message"
ln -sfn "$S" "$TEST_TMP/store-link"
_assert_exit 1 containerfs mount "$S" "$TEST_TMP/store-link/containers"
_assert_eq "containerfs: $TEST_TMP/store-link/containers: the mount point is in the store $S (it would hide the store)" "$_OUT" "through a symbolic link: message"
mkdir -p "$TEST_TMP/outer"
_assert_exit 1 containerfs mount "$TEST_TMP/outer/store" "$TEST_TMP/outer"
_assert_eq "containerfs: $TEST_TMP/outer/store: the store is under the mount point $TEST_TMP/outer (the mount would hide it from every command)" "$_OUT" "store under the mount point: message"
_assert_missing "$TEST_TMP/outer/store"
_assert_exit 1 containerfs mount "$M" "$M" -f
_assert_eq "containerfs: $M: the mount point is in the store $M (it would hide the store)" "$_OUT" "-f onto the store: message"
# A new store is made only where nothing is (or an empty directory), never over a
# directory with someone's files in it (DESIGN.md 37); an empty path is a usage error.
mkdir -p "$TEST_TMP/full"
echo mine >"$TEST_TMP/full/notes"
_assert_exit 1 containerfs mount "$TEST_TMP/full" "$M"
_assert_eq "containerfs: $TEST_TMP/full: not a ContainerFS store, and not empty: a new store needs a missing or empty directory" "$_OUT" "mount of a full directory: message"
_assert_output "notes" fsop listdir "$TEST_TMP/full"
_assert_exit 2 containerfs mount "" "$M"
[[ $_OUT == *"an empty path names no store or mount point"* ]] || _fail "mount '': $_OUT"
_assert_eq "" "$(_mount_fstype "$M")" "nothing mounted after failures"
_assert_eq "" "$(_mount_fstype "$S")" "nothing mounted on the store"
_assert_eq "" "$(_mount_fstype "$S/containers")" "nothing mounted in the store"
_assert_eq "" "$(_mount_fstype "$TEST_TMP/outer")" "nothing mounted above a store"
# (usage errors and their exit status 2: cli-help-version-exit-codes)

# MARK: mount(8): -t fuse.containerfs and fstab-style options
# mount(8) runs its helper (mount.fuse3) with a fixed PATH (/usr/local/sbin:/usr/local/bin:
# /usr/sbin:/usr/bin:/sbin:/bin): the PATH of this script does not reach it. The binary
# under test must be what that PATH finds; when nothing runnable is there (a dangling link
# is replaced), it is linked into /usr/local/bin, as scripts/test.sh does, and left there.
helper=$(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin command -v containerfs || true)
if [[ -z $helper ]]; then
    ln -sf "$CONTAINERFS" /usr/local/bin/containerfs
    helper=/usr/local/bin/containerfs
fi
[[ $helper -ef $CONTAINERFS ]] || _fail "mount(8) would run $helper, not the binary under test $CONTAINERFS"
_assert_ok mount -t fuse.containerfs "$S" "$M"
_assert_eq "fuse.containerfs" "$(_mount_fstype "$M")" "type after mount -t"
_assert_output $'containers\nsnapshots' fsop listdir "$M"
_assert_ok umount "$M"
_wait_for 10 eval '! _is_mounted "$M"' || _fail "still mounted after umount"
# The finer access-time flags are taken and dropped: libfuse 3.14 refuses them, and an fstab
# line with `defaults,relatime` failed.
_assert_ok mount -t fuse.containerfs -o defaults,nofail,x-foo,x-systemd.automount,relatime,nodiratime,lazytime "$S" "$M"
_assert_eq "fuse.containerfs" "$(_mount_fstype "$M")" "type after mount -t with fstab options"
_assert_ok containerfs unmount "$M"
_assert_eq "" "$(_mount_fstype "$M")" "after unmount"

# MARK: mount -t containerfs: mount(8) runs /sbin/mount.containerfs (scripts/install.sh puts
# it beside the binary and links it there; scripts/test.sh links this checkout's), which runs
# the containerfs beside it
repo_helper=$(cd "$(dirname "$0")/../../.." && pwd)/scripts/mount.containerfs
if [[ ! -e /sbin/mount.containerfs ]]; then
    ln -sfn "$repo_helper" /usr/local/bin/mount.containerfs
    ln -sfn /usr/local/bin/mount.containerfs /sbin/mount.containerfs
fi
[[ /sbin/mount.containerfs -ef $repo_helper ]] || _fail "mount(8) would run $(readlink -f /sbin/mount.containerfs), not $repo_helper"
_assert_ok mount -t containerfs "$S" "$M"
_assert_eq "fuse.containerfs" "$(_mount_fstype "$M")" "type after mount -t containerfs"
_assert_output $'containers\nsnapshots' fsop listdir "$M"
_assert_ok umount "$M"
_wait_for 10 eval '! _is_mounted "$M"' || _fail "still mounted after umount"
printf '%s %s containerfs defaults,nofail,attr_timeout=5 0 0\n' "$S" "$M" >"$TEST_TMP/fstab"
_assert_ok mount -T "$TEST_TMP/fstab" "$M"
_assert_eq "fuse.containerfs" "$(_mount_fstype "$M")" "type after an fstab line of type containerfs"
_assert_eq "attr_timeout=5" "$(containerfs status --json "$M" | "$PY" -c 'import json,sys; print(",".join(json.load(sys.stdin)[0]["options"]))' | tr , '\n' | grep attr_timeout)" "the fstab line's options reach the daemon"
_assert_ok containerfs unmount "$M"
# -f (fake) does everything but mount
_assert_ok mount -f -t containerfs "$S" "$M"
_assert_eq "" "$(_mount_fstype "$M")" "nothing mounted by mount -f"
# a wrong option is refused, and nothing is mounted
_assert_exit 2 /sbin/mount.containerfs "$S" "$M" -o bogus
[[ $_OUT == *"-o bogus: not a ContainerFS mount option"* ]] || _fail "mount.containerfs -o bogus: $_OUT"
_assert_eq "" "$(_mount_fstype "$M")" "nothing mounted after -o bogus"
