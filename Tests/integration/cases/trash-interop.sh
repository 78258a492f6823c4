# timeout: 90
# The trash of the mount is the FreeDesktop.org trash other programs use (docs/DESIGN.md
# 48-51), both ways, as root and as an unprivileged user in their own container: what
# Debian's trash-cli 0.17 (trash-put) and GLib's `gio trash` put in, `containerfs trash
# list` shows with its exact original path and `containerfs trash restore` puts back, same
# bytes; what `containerfs trash` puts in (info files Path= relative to the mount,
# percent-encoded as trash-cli's quote() and GLib write them), trash-list shows,
# trash-restore restores, trash-rm and trash-empty remove. Names with a newline, a byte
# that is not UTF-8, spaces and percent signs round-trip; collisions are named a.txt,
# a.2.txt, a.3.txt by containerfs and GLib alike.
#
# What the other tools cannot do, asserted as they do it (a change of theirs shows here):
# - trash-put 0.17 fails on a name that is not UTF-8 (a UnicodeEncodeError in quote()),
#   and trash-restore 0.17 decodes Path= as UTF-8 with replacement: such an item comes back
#   under U+FFFD instead of its byte. `gio trash` and `containerfs trash restore` keep it.
# - `containerfs trash PATH` takes UTF-8 paths only (as every containerfs command).
# - `gio trash FILE` works on the mount: it is GLib itself (GLocalFile's trash: the mount
#   found in /proc/self/mountinfo must not be "system internal", or GLib says "Trashing on
#   system internal mounts is not supported"; fuse.containerfs is no system file system
#   type; then $top/.Trash-$UID, made 0700; no x-gvfs-show needed). But `gio trash --list`, `--restore` and
#   `--empty` go through the trash:// URI, which GLib does not implement: it is gvfs's
#   (gvfsd-trash, Debian's gvfs-backends with a D-Bus session), not installed here. So
#   --list and --restore fail with "Operation not supported" and --empty does nothing.
. "$(dirname "$0")/../lib/common.sh"
_require_cmd trash-put trash-list trash-restore trash-empty trash-rm gio
_users
S=$TEST_STORE M=$TEST_MNT
# trash-cli and GLib must never touch the home trash of whoever runs the suite.
mkdir -p "$TEST_TMP/root-home"
export HOME=$TEST_TMP/root-home XDG_DATA_HOME=$TEST_TMP/root-home/.local/share
UH=$TEST_TMP/u1-home
mkdir -p "$UH"
chown "$U1:$U1" "$UH"
fs_mount

NAMES=("100% sure" "a b.txt" $'caf\xe9' "g 50%.txt" $'new\nline')
SHOWN=("100% sure" "a b.txt" 'caf\xE9' "g 50%.txt" $'new\nline')
ENC=("100%25%20sure" "a%20b.txt" "caf%E9" "g%2050%25.txt" "new%0Aline")
mkdir -p "$TEST_TMP/orig"
for i in 0 1 2 3 4; do head -c $((1001 + i)) /dev/urandom >"$TEST_TMP/orig/$i"; done
chmod -R a+rX "$TEST_TMP/orig"
DATE='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}'

# The expected `containerfs trash list` of items 0-4 trashed from DIR (dates as DATE).
listing() {
    local i out=""
    for i in 0 1 2 3 4; do out+="${SHOWN[$i]}	DATE	$((1001 + i))	$1/${SHOWN[$i]}"$'\n'; done
    printf '%s' "${out%$'\n'}"
}
# `containerfs trash list`, dates replaced by DATE (each must have the specification's form).
cfs_list() {
    "${RUN[@]}" containerfs trash list --store "$S" | sed -E "s/\t$DATE\t/\tDATE\t/"
}
# The JSON fields of the item whose encoded name is $1.
cfs_json() {
    "${RUN[@]}" containerfs trash list --json --store "$S" | "$PY" -c '
import json, sys
for r in json.load(sys.stdin):
    if r["encoded"] == sys.argv[1]:
        print(r["name"], r["encoded"], r["size"], r["originalPath"], r["type"], r.get("problem", "-"), sep="|")' "$1"
}
# trash-list's entries under the mount (other volumes' trashes are not ours), sorted, dates
# dropped, a newline in a path shown as \n.
tl() {
    "${RUN[@]}" trash-list | "$PY" -c '
import re, sys
out = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
items = re.split(r"(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", out)
mine = sorted(i[:-1] if i.endswith("\n") else i for i in items if i.startswith(sys.argv[1] + "/"))
print("\n".join(i.replace("\n", "\\n") for i in mine))' "$M"
}
# Every item back: the same bytes, nothing left in the trash.
all_back() {
    local i
    for i in 0 1 2 3 4; do
        cmp "$TEST_TMP/orig/$i" "$D/${NAMES[$i]}" || _fail "$D/${SHOWN[$i]}: not the bytes trashed"
    done
    _ok "5 items back in $D, same bytes"
    _assert_output "" cfs_list
    _assert_output "" fsop listdir "$T/files"
    _assert_output "" fsop listdir "$T/info"
}

# roundtrip DIR TRASH: as "${RUN[@]}" (root, or U1), every way in and out of DIR.
roundtrip() {
    D=$1 T=$2
    local i
    for i in 0 1 2 3 4; do "${RUN[@]}" cp "$TEST_TMP/orig/$i" "$D/${NAMES[$i]}"; done
    # trash-put and gio in, containerfs out.
    _assert_ok "${RUN[@]}" trash-put "$D/${NAMES[0]}" "$D/${NAMES[1]}" "$D/${NAMES[4]}"
    _assert_exit 1 "${RUN[@]}" trash-put "$D/${NAMES[2]}"
    [[ $_OUT == *"UnicodeEncodeError: 'utf-8' codec can't encode character '\udce9'"* ]] || _fail "trash-put of a non-UTF-8 name: $_OUT"
    cmp "$TEST_TMP/orig/2" "$D/${NAMES[2]}" || _fail "trash-put moved what it failed on"
    _assert_ok "${RUN[@]}" gio trash "$D/${NAMES[2]}" "$D/${NAMES[3]}"
    _assert_output "Inbox" fsop listdir "$D"
    _assert_output "dir 0700 $WHO" fsop stat "$T" type perm uid
    for i in 0 1 2 3 4; do
        _assert_output "[Trash Info]
Path=${D#"$M/"}/${ENC[$i]}" head -2 "$T/info/${NAMES[$i]}.trashinfo"
        grep -Eqx "DeletionDate=$DATE" "$T/info/${NAMES[$i]}.trashinfo" || _fail "${SHOWN[$i]}: $(cat "$T/info/${NAMES[$i]}.trashinfo")"
    done
    _assert_output "$(listing "$D")" cfs_list
    _assert_output "${SHOWN[2]}|${ENC[2]}|1003|$D/${SHOWN[2]}|file|-" cfs_json caf%E9
    # Restored by the name shown (\xHH for the byte that is not UTF-8) or its encoded form.
    _assert_output "$D/${SHOWN[0]}
$D/${SHOWN[1]}
$D/${SHOWN[2]}" "${RUN[@]}" containerfs trash restore "${SHOWN[0]}" "${SHOWN[1]}" "${SHOWN[2]}" --store "$S"
    _assert_output "$D/${SHOWN[3]}" "${RUN[@]}" containerfs trash restore "${ENC[3]}" --store "$S"
    _assert_output "$D/${SHOWN[4]}" "${RUN[@]}" containerfs trash restore "${SHOWN[4]}" --store "$S"
    all_back

    # containerfs in (gio for the name containerfs cannot take), trash-cli out.
    _assert_exit 1 "${RUN[@]}" containerfs trash "$D/${NAMES[2]}"
    _assert_eq "containerfs: $D/${SHOWN[2]}: not valid UTF-8 (ContainerFS takes paths and names in UTF-8 only: use a name that is)" "$_OUT" "containerfs trash of a non-UTF-8 name"
    _assert_output "$T/files/${SHOWN[0]}
$T/files/${SHOWN[1]}
$T/files/${SHOWN[3]}
$T/files/${SHOWN[4]}" "${RUN[@]}" containerfs trash "$D/${NAMES[0]}" "$D/${NAMES[1]}" "$D/${NAMES[3]}" "$D/${NAMES[4]}"
    _assert_ok "${RUN[@]}" gio trash "$D/${NAMES[2]}"
    for i in 0 1 3 4; do
        _assert_output "[Trash Info]
Path=${D#"$M/"}/${ENC[$i]}" head -2 "$T/info/${NAMES[$i]}.trashinfo"
        grep -Eqx "DeletionDate=$DATE" "$T/info/${NAMES[$i]}.trashinfo" || _fail "${SHOWN[$i]}: $(cat "$T/info/${NAMES[$i]}.trashinfo")"
        _assert_output "-rw------- $WHO" stat -c '%A %u' "$T/info/${NAMES[$i]}.trashinfo"
    done
    _assert_output "$(listing "$D")" cfs_list
    _assert_output "$D/${NAMES[0]}
$D/${NAMES[1]}
$D/caf"$'\xef\xbf\xbd'"
$D/${NAMES[3]}
$D/new\\nline" tl
    for i in 0 1 3 4; do
        _assert_exit 0 sh -c "echo 0 | $(printf '%q ' "${RUN[@]}") trash-restore \"\$1\"" _ "$D/${NAMES[$i]}"
        _assert_eq "   0 DATE $D/${NAMES[$i]}
What file to restore [0..0]: " "$(sed -E 's/^   0 [0-9-]{10} [0-9:]{8} /   0 DATE /' <<<"$_OUT")" "trash-restore ${SHOWN[$i]}"
        cmp "$TEST_TMP/orig/$i" "$D/${NAMES[$i]}" || _fail "trash-restore ${SHOWN[$i]}: not the bytes trashed"
    done
    # trash-restore 0.17 brings the non-UTF-8 name back as caf + U+FFFD (see the top).
    _assert_exit 0 sh -c "cd '$D' && echo 0 | $(printf '%q ' "${RUN[@]}") trash-restore"
    _assert_output $'100% sure\nInbox\na b.txt\ncaf\\xef\\xbf\\xbd\ng 50%.txt\nnew\\x0aline' fsop listdir "$D"
    cmp "$TEST_TMP/orig/2" "$D/caf"$'\xef\xbf\xbd' || _fail "trash-restore of caf\\xE9: not the bytes trashed"
    _assert_ok "${RUN[@]}" mv "$D/caf"$'\xef\xbf\xbd' "$D/${NAMES[2]}"
    all_back

    # trash-rm (by the exact original path) and trash-empty remove what containerfs put in.
    _assert_output "$T/files/${SHOWN[1]}
$T/files/${SHOWN[4]}" "${RUN[@]}" containerfs trash "$D/${NAMES[1]}" "$D/${NAMES[4]}"
    _assert_ok "${RUN[@]}" trash-rm "$D/${NAMES[1]}"
    _assert_output "${SHOWN[4]}	DATE	1005	$D/${SHOWN[4]}" cfs_list
    _assert_output 'new\x0aline' fsop listdir "$T/files"
    # Collisions: every tool picks a free name, containerfs and GLib as a.2.txt, a.3.txt.
    for tool in trash-put "containerfs trash" "gio trash" trash-put; do
        "${RUN[@]}" sh -c 'echo "$1" >"$2"' _ "$tool" "$D/c.txt"
        # shellcheck disable=SC2086
        _assert_ok "${RUN[@]}" $tool "$D/c.txt"
    done
    _assert_output "c.2.txt	DATE	18	$D/c.txt
c.3.txt	DATE	10	$D/c.txt
c.txt	DATE	10	$D/c.txt
c.txt_1	DATE	10	$D/c.txt
${SHOWN[4]}	DATE	1005	$D/${SHOWN[4]}" cfs_list
    _assert_output "containerfs trash" cat "$T/files/c.2.txt"
    _assert_output "gio trash" cat "$T/files/c.3.txt"
    _assert_output "$D/c.txt" "${RUN[@]}" containerfs trash restore c.3.txt --store "$S"
    _assert_output "gio trash" cat "$D/c.txt"
    _assert_ok "${RUN[@]}" trash-empty --trash-dir="$T"
    _assert_output "" cfs_list
    _assert_output "" fsop listdir "$T/files"
    _assert_output "" fsop listdir "$T/info"
    _assert_output "" tl

    # gio without gvfs: trash:// is not there (see the top); --empty does nothing.
    "${RUN[@]}" cp "$TEST_TMP/orig/0" "$D/g.bin"
    _assert_ok "${RUN[@]}" gio trash "$D/g.bin"
    _assert_exit 1 "${RUN[@]}" gio trash --list
    _assert_eq "gio: trash:: Operation not supported" "$_OUT" "gio trash --list"
    _assert_exit 1 "${RUN[@]}" gio trash --restore trash:///g.bin
    _assert_eq "gio: trash:///g.bin: Operation not supported" "$_OUT" "gio trash --restore"
    _assert_exit 0 "${RUN[@]}" gio trash --empty
    _assert_output "g.bin	DATE	1001	$D/g.bin" cfs_list
    _assert_output "$D/g.bin" "${RUN[@]}" containerfs trash restore g.bin --store "$S"
    cmp "$TEST_TMP/orig/0" "$D/g.bin" || _fail "g.bin: not the bytes trashed"
    _assert_ok "${RUN[@]}" rm "$D/g.bin" "$D/c.txt"
}

# MARK: root, in a container of root's
RUN=(env) WHO=0
_mkcontainer com.example.notes >/dev/null
roundtrip "$M/containers/com.example.notes/Documents" "$M/.Trash-0"
[[ ,$(_mount_line "$M" | awk '{ print $NF }'), == *,allow_other,* ]] || _fail "the mount lacks allow_other: users cannot reach it"
_ok "allow_other (root's mount, by default): users reach the mount"

# A removed container is one trashed directory: trash-list shows it and trash-restore
# brings it back as a container, by the rename the mount allows for a directory from the
# trash to containers/ under a valid id (never over one, DESIGN.md 48); anything else
# moves into containers/ only by mkdir.
R=$M/containers/com.example.removed
_mkcontainer com.example.removed >/dev/null
mkdir -p "$R/Documents/dir/sub"
echo 12345 >"$R/Documents/dir/sub/f"
echo abc >"$R/Documents/dir/g"
_assert_output "$M/.Trash-0/files/com.example.removed" containerfs container remove com.example.removed --store "$S"
_assert_output "com.example.removed	DATE	10	$R" cfs_list
_assert_output "com.example.removed|com.example.removed|10|$R|directory|-" cfs_json com.example.removed
_assert_output "$R" tl
mkdir "$M/.Trash-0/files/not-an-id"
_assert_errno EACCES fsop rename "$M/.Trash-0/files/not-an-id" "$M/containers/not-an-id"
rmdir "$M/.Trash-0/files/not-an-id"
_assert_ok sh -c "echo 0 | trash-restore '$R'"
_assert_output "12345 abc" sh -c "echo \$(cat '$R/Documents/dir/sub/f' '$R/Documents/dir/g')"
_assert_output "com.example.removed" sh -c "containerfs container list --store '$S' | cut -f1 | grep removed"
_assert_output "" cfs_list
# Over an existing container it is refused (EEXIST), both ways.
_assert_output "$M/.Trash-0/files/com.example.removed" containerfs container remove com.example.removed --store "$S"
_mkcontainer com.example.removed >/dev/null
_assert_errno EEXIST fsop rename "$M/.Trash-0/files/com.example.removed" "$R"
_assert_exit 1 containerfs trash restore com.example.removed --store "$S"
_assert_eq "containerfs: $R (a container with this id exists: restore never overwrites): an item with that name already exists" "$_OUT" "restore over a container"
_assert_ok containerfs container remove com.example.removed --permanently --store "$S"
_assert_output "$R" containerfs trash restore com.example.removed --store "$S"
_assert_output "12345 abc" sh -c "echo \$(cat '$R/Documents/dir/sub/f' '$R/Documents/dir/g')"
_assert_output "" cfs_list

# MARK: an unprivileged user in a container of their own (the mount allows other users)
# _as_user's command, spelled out: it also runs inside `sh -c`.
AS_U1=(setpriv --reuid="$U1_UID" --regid="$U1_GID" --clear-groups --inh-caps=-all --
    env HOME="$UH" XDG_DATA_HOME="$UH/.local/share" PATH="$_CFS_USER_PATH")
RUN=("${AS_U1[@]}") WHO=$U1_UID
_assert_ok "${RUN[@]}" mkdir "$M/containers/org.example.userapp"
_assert_output "$U1_UID" stat -c %u "$M/containers/org.example.userapp/Documents"
roundtrip "$M/containers/org.example.userapp/Documents" "$M/.Trash-$U1_UID"
# Each user's trash is their own: root's list does not show U1's, nor the reverse.
_assert_output "$M/.Trash-$U1_UID/files/u.txt" "${RUN[@]}" sh -c "echo u >'$M/containers/org.example.userapp/Documents/u.txt' && exec containerfs trash '$M/containers/org.example.userapp/Documents/u.txt'"
echo r >"$M/containers/com.example.notes/Documents/r.txt"
_assert_output "$M/.Trash-0/files/r.txt" containerfs trash "$M/containers/com.example.notes/Documents/r.txt"
RUN=(env)
_assert_output "r.txt	DATE	2	$M/containers/com.example.notes/Documents/r.txt" cfs_list
RUN=("${AS_U1[@]}")
_assert_output "u.txt	DATE	2	$M/containers/org.example.userapp/Documents/u.txt" cfs_list
_assert_errno EACCES "${RUN[@]}" fsop listdir "$M/.Trash-0"
# Nor can a user trash what is in another's container (root's is 0700).
echo r2 >"$M/containers/com.example.notes/Documents/r2.txt"
_assert_exit 1 "${RUN[@]}" containerfs trash "$M/containers/com.example.notes/Documents/r2.txt"
_assert_eq "containerfs: $M/containers/com.example.notes/Documents/r2.txt: permission denied" "$_OUT" "a user trashing root's item"
_assert_output "r2" cat "$M/containers/com.example.notes/Documents/r2.txt"
fs_umount
