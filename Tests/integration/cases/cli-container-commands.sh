# `containerfs container create ID [--bundle DIR]`, `list [--json]`, `remove ID`,
# `path ID --directory X`: without a mount (on the store, under its lock) and through a
# live mount's daemon, whose kernel view changes at once; failures exit 1 with a message
# naming the container or path and the reason (SPEC §2).
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
_assert_exit 1 containerfs container create not_valid --store "$S"
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
