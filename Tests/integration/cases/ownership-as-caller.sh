# Items are created as the calling uid/gid (issue 2), never as the daemon: files, O_CREAT
# modes under the caller's umask, directories, symlinks, FIFOs, sockets, mknod'ed files,
# containers and the caller's trash; a setgid directory passes its group on as on ext4;
# renames and hard links keep the owner; the store holds the same owners.
. "$(dirname "$0")/../lib/common.sh"
_users
fs_mount
C=$(_mkcontainer com.example.shared)
chmod 755 "$C"
W=$C/Documents/shared
mkdir -m 1777 "$W"
SW=$TEST_STORE/containers/com.example.shared/Documents/shared

make_all() {   # make_all RUNNER... : one of each kind, under names prefixed by $P
    local r=("$@")
    _assert_ok "${r[@]}" sh -c "umask 022; echo x >'$W/${P}file'"
    _assert_ok "${r[@]}" sh -c "umask 077; touch '$W/${P}private'"
    _assert_ok "${r[@]}" fsop open "$W/${P}excl" "O_WRONLY|O_CREAT|O_EXCL" 640
    _assert_ok "${r[@]}" sh -c "umask 002; mkdir '$W/${P}dir'"
    _assert_ok "${r[@]}" fsop symlink target "$W/${P}link"
    _assert_ok "${r[@]}" fsop mkfifo "$W/${P}fifo" 600
    _assert_ok "${r[@]}" fsop mknod "$W/${P}node" reg 644
    _assert_ok "${r[@]}" "$PY" -c 'import socket,os,sys; os.chdir(sys.argv[1]); socket.socket(socket.AF_UNIX).bind(sys.argv[2])' "$W" "${P}sock"
}
check_all() {   # check_all UID GID
    local u=$1 g=$2 where
    for where in "$W" "$SW"; do
        _assert_output "reg 0644 $u $g" fsop lstat "$where/${P}file" type perm uid gid
        _assert_output "reg 0600 $u $g" fsop lstat "$where/${P}private" type perm uid gid
        _assert_output "reg 0640 $u $g" fsop lstat "$where/${P}excl" type perm uid gid
        _assert_output "dir 0775 $u $g" fsop lstat "$where/${P}dir" type perm uid gid
        _assert_output "lnk $u $g" fsop lstat "$where/${P}link" type uid gid
        _assert_output "fifo 0600 $u $g" fsop lstat "$where/${P}fifo" type perm uid gid
        _assert_output "reg 0644 $u $g" fsop lstat "$where/${P}node" type perm uid gid
        _assert_output "sock $u $g" fsop lstat "$where/${P}sock" type uid gid
    done
}

P=root- make_all
P=root- check_all 0 0
P=u1- make_all _as_user "$U1"
P=u1- check_all "$U1_UID" "$U1_GID"
P=u2- make_all _as_user "$U2"
P=u2- check_all "$U2_UID" "$U2_GID"

# A supplementary group the caller has (runuser -u keeps the user's groups from /etc/group).
groupadd -f cfstestshared
usermod -a -G cfstestshared "$U1"
SG=$(getent group cfstestshared | cut -d: -f3)
_assert_ok runuser -u "$U1" -g cfstestshared -- sh -c "touch '$W/u1-as-shared'"
_assert_output "$U1_UID $SG" fsop lstat "$W/u1-as-shared" uid gid
_assert_ok runuser -u "$U1" -- sh -c "chgrp cfstestshared '$W/u1-file'"
_assert_output "$U1_UID $SG" fsop lstat "$SW/u1-file" uid gid

# A setgid directory passes its group (and, for directories, the bit) on, as on ext4.
mkdir "$W/sgid"
chgrp "$U2_GID" "$W/sgid"
chmod 2777 "$W/sgid"
_assert_ok _as_user "$U1" sh -c "umask 022; touch '$W/sgid/f'; mkdir '$W/sgid/d'"
_assert_output "$U1_UID $U2_GID 0644" fsop lstat "$W/sgid/f" uid gid perm
_assert_output "$U1_UID $U2_GID 2755" fsop lstat "$W/sgid/d" uid gid perm

# Renames and hard links keep the owner; root writing into a user's file keeps it the user's.
_assert_ok _as_user "$U1" fsop rename "$W/u1-file" "$W/u1-renamed"
_assert_output "$U1_UID" fsop lstat "$W/u1-renamed" uid
_assert_ok _as_user "$U1" fsop link "$W/u1-renamed" "$W/u1-hard"
_assert_output "$U1_UID 2" fsop lstat "$W/u1-hard" uid nlink
_assert_ok sh -c "echo more >>'$W/u1-renamed'"
_assert_output "$U1_UID $SG" fsop lstat "$W/u1-renamed" uid gid

# The caller's own container and trash.
_assert_ok _as_user "$U2" fsop mkdir "$TEST_MNT/containers/org.u2.app"
_assert_output "$U2_UID $U2_GID" fsop lstat "$TEST_STORE/containers/org.u2.app" uid gid
_assert_output "$U2_UID $U2_GID" fsop lstat "$TEST_STORE/containers/org.u2.app/Library/Caches" uid gid
_assert_ok _as_user "$U2" fsop mkdir "$TEST_MNT/.Trash-$U2_UID"
_assert_output "$U2_UID $U2_GID 0700" fsop lstat "$TEST_MNT/.Trash-$U2_UID" uid gid perm
_assert_ok _as_user "$U2" mkdir "$TEST_MNT/.Trash-$U2_UID/files"
_assert_output "$U2_UID" fsop lstat "$TEST_MNT/.Trash-$U2_UID/files" uid

# Nothing in the store belongs to an unexpected owner.
_assert_output "" sh -c "find '$TEST_STORE/containers' ! -uid 0 ! -uid $U1_UID ! -uid $U2_UID"
