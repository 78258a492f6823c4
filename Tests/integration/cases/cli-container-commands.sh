# `containerfs container create ID [--bundle DIR]`, `list [--json]`, `remove ID`,
# `path ID --directory X`: without a mount (on the store, under its lock) and through a
# live mount's daemon, whose kernel view changes at once; failures exit 1 with a message
# naming the container or path and the reason (docs/SEMANTICS.md §2).
. "$(dirname "$0")/../lib/common.sh"
S=$TEST_STORE M=$TEST_MNT

# MARK: without a mount
_assert_ok containerfs container create com.example.alpha --store "$S"
_assert_output $'Alpha.app\nDocuments\nLibrary\ntmp' fsop listdir "$S/containers/com.example.alpha"
mkdir -p "$TEST_TMP/bundle/Contents"
echo '<plist/>' >"$TEST_TMP/bundle/Contents/Info.plist"
printf '#!/bin/sh\necho run\n' >"$TEST_TMP/bundle/Contents/exe"
chmod 755 "$TEST_TMP/bundle/Contents/exe"
_assert_ok containerfs container create org.example.beta --bundle "$TEST_TMP/bundle" --store "$S"
_assert_output "<plist/>" cat "$S/containers/org.example.beta/Beta.app/Contents/Info.plist"
_assert_output "0755" fsop stat "$S/containers/org.example.beta/Beta.app/Contents/exe" perm
_assert_exit 1 containerfs container create com.example.alpha --store "$S"
[[ $_OUT == *com.example.alpha* ]] || _fail "duplicate create: message does not name the container: $_OUT"
_assert_exit 2 containerfs container create not_valid --store "$S"   # a usage error
[[ $_OUT == *not_valid* ]] || _fail "invalid id: message does not name it: $_OUT"
_assert_exit 1 containerfs container create com.example.gamma --bundle "$TEST_TMP/no-bundle" --store "$S"
[[ $_OUT == *"$TEST_TMP/no-bundle"* ]] || _fail "missing bundle: message does not name it: $_OUT"
_assert_missing "$S/containers/com.example.gamma"
_assert_output $'com.example.alpha\norg.example.beta' sh -c "containerfs container list --store '$S' | cut -f1"
_assert_output "com.example.alpha org.example.beta" sh -c "containerfs container list --json --store '$S' | '$PY' -c 'import json,sys; print(\" \".join(sorted(c[\"id\"] for c in json.load(sys.stdin))))'"
_assert_output "Alpha 0" sh -c "containerfs container list --json --store '$S' | '$PY' -c 'import json,sys; c=[c for c in json.load(sys.stdin) if c[\"id\"]==\"com.example.alpha\"][0]; print(c[\"displayName\"], c[\"ownerUID\"])'"
# `path` answers under the live mount only.
_assert_exit 1 containerfs container path com.example.alpha --directory documents --store "$S"
[[ $_OUT == *mount* ]] || _fail "path without a mount: message does not say why: $_OUT"

# MARK: through a live mount
fs_mount
_assert_ok containerfs container create io.example.live --store "$S"
_assert_output $'Documents\nLibrary\nLive.app\ntmp' fsop listdir "$M/containers/io.example.live"   # visible at once
declare -A expect=([documents]=Documents [inbox]=Documents/Inbox [library]=Library
    [application-support]="Library/Application Support" [caches]=Library/Caches
    [preferences]=Library/Preferences [tmp]=tmp [bundle]=Live.app)
for d in "${!expect[@]}"; do
    _assert_output "$M/containers/io.example.live/${expect[$d]}" containerfs container path io.example.live --directory "$d" --store "$S"
    _assert_output "dir" fsop stat "$(containerfs container path io.example.live --directory "$d" --store "$S")" type
done
_assert_output "$M/containers/io.example.live" containerfs container path io.example.live --store "$S"
_assert_exit 1 containerfs container path com.example.none --directory documents --store "$S"
[[ $_OUT == *com.example.none* ]] || _fail "path of a missing container: message does not name it: $_OUT"
_assert_output $'com.example.alpha\nio.example.live\norg.example.beta' sh -c "containerfs container list --store '$S' | cut -f1"

# remove through the daemon: gone from the mount at once, even after the kernel looked it up.
echo data >"$M/containers/io.example.live/Documents/f"
_assert_output "data" cat "$M/containers/io.example.live/Documents/f"
_assert_ok containerfs container remove io.example.live --store "$S"
_assert_errno ENOENT fsop stat "$M/containers/io.example.live"
_assert_output $'com.example.alpha\norg.example.beta' fsop listdir "$M/containers"
_assert_missing "$S/containers/io.example.live"
_assert_exit 1 containerfs container remove io.example.live --store "$S"
[[ $_OUT == *io.example.live* ]] || _fail "remove of a missing container: message does not name it: $_OUT"
_assert_output $'com.example.alpha\norg.example.beta' sh -c "containerfs container list --store '$S' | cut -f1"
# A container made with mkdir through the mount is listed by the CLI.
mkdir "$M/containers/net.example.mkdir"
_assert_output $'com.example.alpha\nnet.example.mkdir\norg.example.beta' sh -c "containerfs container list --store '$S' | cut -f1"
fs_umount

# MARK: remove without a mount
_assert_ok containerfs container remove org.example.beta --store "$S"
_assert_missing "$S/containers/org.example.beta"
_assert_output $'com.example.alpha\nnet.example.mkdir' sh -c "containerfs container list --store '$S' | cut -f1"
# A store path that is not a directory is named in the error.
touch "$TEST_TMP/not-a-store"
_assert_exit 1 containerfs container list --store "$TEST_TMP/not-a-store"
[[ $_OUT == *"$TEST_TMP/not-a-store"* ]] || _fail "bad store: message does not name it: $_OUT"

# MARK: only mount and create make a store; list, path and remove refuse what is not one
# (DESIGN.md 32, 37): a mistyped --store made a whole new store with mkdir -p, and one
# naming an existing directory turned it into a store (new directories, a database, mode
# 0711).
for cmd in list "remove com.example.alpha" "path com.example.alpha"; do
    # shellcheck disable=SC2086
    _assert_exit 1 containerfs container $cmd --store "$TEST_TMP/typo/store"
    _assert_eq "containerfs: $TEST_TMP/typo/store: not a ContainerFS store (no such directory)" "$_OUT" "container $cmd: message"
done
_assert_missing "$TEST_TMP/typo"
mkdir -m 755 "$TEST_TMP/home"
echo mine >"$TEST_TMP/home/notes"
for cmd in list "remove com.example.alpha" "path com.example.alpha"; do
    # shellcheck disable=SC2086
    _assert_exit 1 containerfs container $cmd --store "$TEST_TMP/home"
    _assert_eq "containerfs: $TEST_TMP/home: not a ContainerFS store (it has no containerfs.db)" "$_OUT" "container $cmd: message"
done
_assert_output "notes" fsop listdir "$TEST_TMP/home"
_assert_output "0755" fsop stat "$TEST_TMP/home" perm
_assert_exit 1 containerfs container list --store "$TEST_TMP/home/notes"
_assert_eq "containerfs: $TEST_TMP/home/notes: not a ContainerFS store (not a directory)" "$_OUT" "list of a file: message"
# A new store is made only in a missing or empty directory, never over someone's files.
_assert_exit 1 containerfs container create com.example.x --store "$TEST_TMP/home"
_assert_eq "containerfs: $TEST_TMP/home: not a ContainerFS store, and not empty: a new store needs a missing or empty directory" "$_OUT" "create in a full directory: message"
_assert_output "notes" fsop listdir "$TEST_TMP/home"
_assert_ok containerfs container create com.example.new --store "$TEST_TMP/new/store"
_assert_output "com.example.new" sh -c "containerfs container list --store '$TEST_TMP/new/store' | cut -f1"
# A store under a symbolic link works: SQLite's NOFOLLOW refused the database of
# `link/store` (a link anywhere in the path), and the half-made store it left then counted
# as "not empty" for good. What an interrupted making leaves is room for a store.
mkdir -p "$TEST_TMP/real"
ln -s real "$TEST_TMP/link"
_assert_output "$TEST_TMP/link/store/containers/com.example.linked" containerfs container create com.example.linked --store "$TEST_TMP/link/store"
_assert_output "com.example.linked" sh -c "containerfs container list --store '$TEST_TMP/link/store' | cut -f1"
mkdir -p "$TEST_TMP/half/containers" "$TEST_TMP/half/snapshots" "$TEST_TMP/half/trash" "$TEST_TMP/half/.staging"
: >"$TEST_TMP/half/.lock"
_assert_ok containerfs container create com.example.half --store "$TEST_TMP/half"
# Only empty directories of those names: another program's `containers/` is not a store's.
mkdir -p "$TEST_TMP/podman/containers/cfg"
: >"$TEST_TMP/podman/containers/cfg/storage.conf"
_assert_exit 1 containerfs container create com.example.x --store "$TEST_TMP/podman"
_assert_eq "containerfs: $TEST_TMP/podman: not a ContainerFS store, and not empty: a new store needs a missing or empty directory" "$_OUT" "create over another program's containers/"
_assert_output "cfg" fsop listdir "$TEST_TMP/podman/containers"
_assert_output "com.example.half" sh -c "containerfs container list --store '$TEST_TMP/half' | cut -f1"
# An empty --store names no store (it used to make one of the working directory).
cd "$TEST_TMP/home"
for cmd in list "remove com.example.alpha" "path com.example.alpha" "create com.example.alpha"; do
    # shellcheck disable=SC2086
    _assert_exit 2 containerfs container $cmd --store ""
    [[ $_OUT == *"--store: an empty path names no store"* ]] || _fail "container $cmd --store '': $_OUT"
done
cd /
_assert_output "notes" fsop listdir "$TEST_TMP/home"

# A user listing root's store without a mount is told whose it is, not SQLite's "attempt to
# write a readonly database: Input/output error".
_users
_assert_exit 1 _as_user "$U1" containerfs container list --store "$S"
_assert_eq "containerfs: $S/containerfs.db (it belongs to uid 0; without a live mount only its owner can use the store): Permission denied" "$_OUT" "list of root's store as a user"

# MARK: bundles: what is copied
# A store of their own, so the listings above stay as they are.
BS=$TEST_TMP/bundle-store
WHY="the bundle contains the store $BS and would be copied into itself: invalid argument"
# A bundle named through a symbolic link is the directory it leads to, copied (`cp -rH`:
# the link on the command line is followed); links inside the bundle stay links. Before,
# the bundle was the link itself, so the host directory was writable through the mount.
mkdir -p "$TEST_TMP/linked/Contents" "$TEST_TMP/victim"
echo '<plist/>' >"$TEST_TMP/linked/Contents/Info.plist"
ln -s Info.plist "$TEST_TMP/linked/Contents/plist-link"
ln -s "$TEST_TMP/victim" "$TEST_TMP/linked/Contents/victim-link"
ln -s linked "$TEST_TMP/via-link"
_assert_output "$BS/containers/org.example.linked" env -C "$TEST_TMP" containerfs container create org.example.linked --bundle via-link --store "$BS"
LA=$BS/containers/org.example.linked/Linked.app
_assert_output "dir" fsop lstat "$LA" type
_assert_output "<plist/>" cat "$LA/Contents/Info.plist"
_assert_output "lnk" fsop lstat "$LA/Contents/plist-link" type
_assert_output "lnk $TEST_TMP/victim" sh -c "echo \$(fsop lstat '$LA/Contents/victim-link' type) \$(fsop readlink '$LA/Contents/victim-link')"

# A bundle that contains the store would copy the container being built into itself without
# end (before: "Too many open files", or a crash, after ~500 levels, the copy left behind):
# refused before anything is copied, naming the bundle, the store and why; nothing is left.
H=$TEST_TMP/bundle-home
mkdir -p "$H/docs"
_assert_exit 1 env -C "$H" containerfs container create com.example.dot --bundle . --store "$H/s2"
_assert_eq "containerfs: $H: the bundle contains the store $H/s2 and would be copied into itself: invalid argument" "$_OUT" "--bundle . around the store"
_assert_missing "$H/s2/containers/com.example.dot"
_assert_output "" fsop listdir "$H/s2/.staging"
_assert_exit 1 containerfs container create com.example.slash --bundle / --store "$BS"
_assert_eq "containerfs: /: $WHY" "$_OUT" "--bundle /"
_assert_exit 1 containerfs container create com.example.stage --bundle "$BS/.staging" --store "$BS"
_assert_eq "containerfs: $BS/.staging: $WHY" "$_OUT" "--bundle STORE/.staging"
# Met inside the bundle too (a bind mount of the store's parent in it): the walk stops there.
mkdir -p "$TEST_TMP/nest/inner"
_assert_exit 1 unshare -m sh -c "mount --bind '$TEST_TMP' '$TEST_TMP/nest/inner' && exec containerfs container create com.example.nest --bundle '$TEST_TMP/nest' --store '$BS'"
_assert_eq "containerfs: $TEST_TMP/nest/inner: $WHY" "$_OUT" "the store met inside the bundle"
_assert_output "" fsop listdir "$BS/.staging"
_assert_output "org.example.linked" fsop listdir "$BS/containers"

# FIFOs, sockets and devices are skipped with a warning naming each (as for snapshots,
# docs/SEMANTICS.md §4); the bundle is made. Before, they were skipped in silence.
SP=$TEST_TMP/special
mkdir -p "$SP/sub"
echo data >"$SP/data"
fsop mkfifo "$SP/pipe" >/dev/null
fsop mknod "$SP/sock" sock 644 >/dev/null
fsop mknod "$SP/sub/null" chr 600 1 3 >/dev/null
err=$(containerfs container create org.example.special --bundle "$SP" --store "$BS" 2>&1 >/dev/null | sort) || _fail "create with special files failed: $err"
_assert_eq "containerfs: warning: $SP/pipe: not copied (a FIFO; a bundle holds only files, directories and symbolic links)
containerfs: warning: $SP/sock: not copied (a socket; a bundle holds only files, directories and symbolic links)
containerfs: warning: $SP/sub/null: not copied (a character device; a bundle holds only files, directories and symbolic links)" "$err" "warnings for skipped special files"
_assert_output $'data\nsub' fsop listdir "$BS/containers/org.example.special/Special.app"
_assert_output "" fsop listdir "$BS/containers/org.example.special/Special.app/sub"

# A file or directory the user cannot read is named itself, not the bundle (before:
# "BUNDLE: permission denied"); nothing is left.
_users
UD=$TEST_TMP/user
mkdir -p "$UD/b4/sub" "$UD/b5/locked"
echo x >"$UD/b4/sub/ok"
echo y >"$UD/b4/sub/secret"
chown -R "$U1:$U1" "$UD"
chmod 000 "$UD/b4/sub/secret" "$UD/b5/locked"
_assert_exit 1 _as_user "$U1" containerfs container create com.example.bfour --bundle "$UD/b4" --store "$UD/store"
_assert_eq "containerfs: $UD/b4/sub/secret: permission denied" "$_OUT" "unreadable file"
_assert_exit 1 _as_user "$U1" containerfs container create com.example.bfive --bundle "$UD/b5" --store "$UD/store"
_assert_eq "containerfs: $UD/b5/locked: permission denied" "$_OUT" "unreadable directory"
_assert_output "" fsop listdir "$UD/store/containers"
_assert_output "" fsop listdir "$UD/store/.staging"

# MARK: bundles through a live mount's daemon: the same copy, the same messages
fs_mount_at "$BS" "$M"
_assert_output "$M/containers/io.example.vialink" containerfs container create io.example.vialink --bundle "$TEST_TMP/via-link" --store "$BS"
_assert_output "dir" fsop lstat "$M/containers/io.example.vialink/Vialink.app" type
_assert_errno EROFS fsop open "$M/containers/io.example.vialink/Vialink.app/new" "O_WRONLY|O_CREAT"
_assert_errno EROFS fsop open "$M/containers/org.example.linked/Linked.app/new" "O_WRONLY|O_CREAT"
_assert_output "" fsop listdir "$TEST_TMP/victim"
_assert_exit 1 containerfs container create com.example.slash --bundle / --store "$BS"
_assert_eq "containerfs: /: $WHY" "$_OUT" "--bundle / through the daemon"
err=$(containerfs container create io.example.special --bundle "$SP" --store "$BS" 2>&1 >/dev/null | sort) || _fail "create with special files through the daemon failed: $err"
_assert_eq "containerfs: warning: $SP/pipe: not copied (a FIFO; a bundle holds only files, directories and symbolic links)
containerfs: warning: $SP/sock: not copied (a socket; a bundle holds only files, directories and symbolic links)
containerfs: warning: $SP/sub/null: not copied (a character device; a bundle holds only files, directories and symbolic links)" "$err" "warnings through the daemon"
_assert_exit 1 _as_user "$U1" containerfs container create com.example.bfour --bundle "$UD/b4" --store "$BS"
_assert_eq "containerfs: $UD/b4/sub/secret: permission denied" "$_OUT" "unreadable file through the daemon"
_assert_output $'io.example.special\nio.example.vialink\norg.example.linked\norg.example.special' fsop listdir "$M/containers"
_assert_output "" fsop listdir "$BS/.staging"
fs_umount "$M"
