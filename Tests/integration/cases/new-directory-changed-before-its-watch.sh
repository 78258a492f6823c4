# A directory made through the mount is marked once the store watcher reads its creation,
# and one made inside it before then once the watcher lists the first (DESIGN.md 59). What
# the store does in such a directory before its mark is heard by nobody: the kernel's
# entries of it must still come to show the store (the build before this was checked kept
# the old file under its name for good in 1 round of 5-20).
#
# Per mode, 200 rounds, each in a directory of its own made through the mount, with a
# subdirectory: the mount makes d0/f6, and at once the store moves it to f2 and renames a
# new file over d0/f6, then makes f4. Within 2 s the mount must show f2 and f4 as the
# store has them, and d0/f6 as the new file.
#
# Then 200 rounds of a name the mount makes in a new directory and removes: the kernel
# caches the name as missing; the store makes it at once, and the mount must show it
# within 2 s.
. "$(dirname "$0")/../lib/common.sh"

rounds() { # DIR_IN_MOUNT DIR_IN_STORE: prints the wrong rounds
    "$PY" - "$@" <<'PY'
import os, sys, time
mount, store = sys.argv[1], sys.argv[2]
wrong = []
def shows(path, want):
    got = None
    for _ in range(2000):
        try:
            with open(path) as f:
                got = f.read()
            if got == want:
                return None
        except OSError as e:
            got = e.strerror
        time.sleep(0.001)
    return got
for i in range(200):
    M, S = "%s/r%d" % (mount, i), "%s/r%d" % (store, i)
    os.makedirs(M + "/d0")
    with open(M + "/d0/f6", "w") as f:
        f.write("A %d" % i)
    os.rename(S + "/d0/f6", S + "/f2")
    with open(S + "/d0/f6.new", "w") as f:
        f.write("N %d" % i)
    os.rename(S + "/d0/f6.new", S + "/d0/f6")
    with open(S + "/f4", "w") as f:
        f.write("C %d" % i)
    for name, want in (("f2", "A %d" % i), ("f4", "C %d" % i), ("d0/f6", "N %d" % i)):
        got = shows(M + "/" + name, want)
        if got is not None:
            wrong.append((i, name, got))
print(len(wrong), wrong[:3])
PY
}

removed_rounds() { # DIR_IN_MOUNT DIR_IN_STORE: prints the wrong rounds
    "$PY" - "$@" <<'PY'
import os, sys, time
mount, store = sys.argv[1], sys.argv[2]
wrong = []
for i in range(200):
    M, S = "%s/n%d" % (mount, i), "%s/n%d" % (store, i)
    os.mkdir(M)
    with open(M + "/f", "w") as f:
        f.write("mount %d" % i)
    time.sleep(0.005)                        # the directory is watched by now
    os.unlink(M + "/f")
    try:
        os.stat(M + "/f")
    except FileNotFoundError:
        pass                                 # cached as missing
    with open(S + "/.f", "w") as f:
        f.write("store %d" % i)
    os.rename(S + "/.f", S + "/f")
    got = None
    for _ in range(2000):
        try:
            with open(M + "/f") as f:
                got = f.read()
            if got == "store %d" % i:
                break
        except OSError as e:
            got = e.strerror
        time.sleep(0.001)
    else:
        wrong.append((i, got))
print(len(wrong), wrong[:3])
PY
}

for mode in default writeback; do
    fs_mount_mode "$mode"
    C=$(_mkcontainer com.example.watched-late)
    D=$C/Documents
    SD=$MODE_STORE/containers/com.example.watched-late/Documents
    _assert_output "0 []" rounds "$D" "$SD"
    _assert_output "0 []" removed_rounds "$D" "$SD"
    _ok "$mode: entries of directories watched late show the store, 2 x 200 rounds"
    fs_umount
done
