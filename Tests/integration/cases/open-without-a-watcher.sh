# Without a store watcher (`-o watcher=none`, or where fanotify cannot run: DESIGN.md 59)
# the mount uses short cache timeouts, and an open still finds a name the store replaced
# or removed since the kernel cached it: every open looks at its name then, not only after
# a change the watcher heard (DESIGN.md 27, 28). Before opens looked at their names without
# a complete watcher, every open of a replaced name within the entry timeout opened the old
# file (100 of 100 rounds read "old"). In-place edits are read right too (no pages are
# kept without a watcher).
. "$(dirname "$0")/../lib/common.sh"
fs_mount -o watcher=none
_assert_ok _wait_for 5 grep -q "store watcher: none" "$TEST_TMP/daemon.$_CFS_N.log"   # logged once the mount serves
_assert_output "none" "$PY" -c 'import json, subprocess, sys
print(json.loads(subprocess.run([sys.argv[1], "status", "--json", sys.argv[2]], capture_output=True, check=True).stdout)[0]["watcher"])' \
    "$CONTAINERFS" "$TEST_MNT"
C=$(_mkcontainer com.example.unwatched)
SD=$TEST_STORE/containers/com.example.unwatched/Documents
mkdir "$SD/sub"

rounds() { # KIND DIR_IN_MOUNT DIR_IN_STORE: rounds of 100 that went wrong, and the first three
    "$PY" - "$@" <<'PY'
import os, sys
kind, mount, store = sys.argv[1], sys.argv[2], sys.argv[3]
wrong = []
for i in range(100):
    m, s = "%s/%s%d" % (mount, kind, i), "%s/%s%d" % (store, kind, i)
    with open(s, "w") as f:
        f.write("old")
    with open(m) as f:                       # the kernel holds the name now
        f.read()
    if kind == "delete":
        os.unlink(s)
        try:
            with open(m) as f:
                wrong.append((i, "opened: " + f.read()))
        except FileNotFoundError:
            pass
        continue
    want = "%s %d" % ("new" if kind == "replace" else "edited", i)
    if kind == "replace":                    # an editor's save
        with open(s + ".new", "w") as f:
            f.write(want)
        os.rename(s + ".new", s)
    else:                                    # in place, longer
        with open(s, "r+") as f:
            f.write(want)
    with open(m) as f:
        got = f.read()
    if got != want:
        wrong.append((i, got))
print(len(wrong), wrong[:3])
PY
}

for dir in "" /sub; do
    _assert_output "0 []" rounds replace "$C/Documents$dir" "$SD$dir"
    _assert_output "0 []" rounds delete "$C/Documents$dir" "$SD$dir"
    _assert_output "0 []" rounds edit "$C/Documents$dir" "$SD$dir"
done
fs_umount
