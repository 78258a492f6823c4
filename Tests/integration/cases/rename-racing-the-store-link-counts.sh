# The store renames a file over one name of a file with two (a hard link), and the mount at
# once renames that name on: the file's other name shows the link count the store now has
# (DESIGN.md 59, "What directory marks do not hear": a name replaced in the store makes the watcher look at the
# link counts of the files the kernel holds under several names).
#
# The store's IN_MOVED_TO of the name was queued just before the mount's rename of it, and
# was taken for that rename's echo: the watcher never looked at the counts, and under
# -o writeback, where the kernel takes no attribute from the ctime the rename moved, the
# other name showed 2 links for good (a coherence fuzzer; 185 of 200 rounds
# wrong with the build before). An echo now comes after the queue position its change
# took before the system call (`EntryExpectation.after`).
#
# Per round, in Documents/rN: Z is d0/f5 and g, X is f4, W is f3, all cached; the store
# renames f4 over d0/f5; the mount renames d0/f5 over f3. The count g shows and the content
# of g and f3 are polled for up to 1 s (the kernel's entry of f3 may lead to Z until the
# daemon's invalidation of it arrives: DESIGN.md 14, a stale entry renamed), then compared.
. "$(dirname "$0")/../lib/common.sh"

rounds() { # DIR_IN_MOUNT DIR_IN_STORE
    "$PY" - "$@" <<'PY'
import os, sys, time
m, s = sys.argv[1], sys.argv[2]
wrong = []
for i in range(200):
    r, rm = "%s/r%d" % (s, i), "%s/r%d" % (m, i)
    os.makedirs(r + "/d0")
    for n, t in (("d0/f5", "z"), ("f4", "x"), ("f3", "w")):
        with open(r + "/" + n, "w") as f:
            f.write(t)
    os.link(r + "/d0/f5", r + "/g")
    for n in ("d0/f5", "f4", "f3", "g"):     # the kernel holds every name
        for _ in range(1000):
            try:
                os.stat(rm + "/" + n)
                break
            except FileNotFoundError:
                time.sleep(0.001)
    os.rename(r + "/f4", r + "/d0/f5")
    try:
        os.rename(rm + "/d0/f5", rm + "/f3")
    except OSError as e:
        wrong.append((i, "rename", str(e)))
        continue
    for _ in range(100):
        got = (os.stat(rm + "/g").st_nlink, open(rm + "/g").read(), open(rm + "/f3").read())
        if got == (1, "z", "x"):
            break
        time.sleep(0.01)
    if got != (1, "z", "x"):
        wrong.append((i, got))
print(len(wrong), wrong[:3])
PY
}

for mode in default writeback; do
    fs_mount_mode "$mode"
    C=$(_mkcontainer com.example.rename-race)
    _assert_output "0 []" rounds "$C/Documents" "$MODE_STORE/containers/com.example.rename-race/Documents"
    fs_umount
done
