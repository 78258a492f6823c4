# When the daemon runs out of descriptors (each item the kernel holds keeps one), it asks
# the kernel to let go of cached entries, and a failed call leaves nothing behind
# (issue 3: "a policy for when descriptors run short"; DESIGN.md 28). The daemon's limit is
# cut to 300 with prlimit(1); then 1,000 files and 100 directories are made through the
# mount. A call may fail with EMFILE while the kernel lets go; it must then not have made
# its entry, and a retry a moment later must succeed. Before this policy the 300th call
# and every one after it failed until memory pressure made the kernel drop entries.
. "$(dirname "$0")/../lib/common.sh"
_require_cmd prlimit
fs_mount
C=$(_mkcontainer com.example.fds)
_assert_ok prlimit --pid "$(_daemon_pid)" --nofile=300:300

make_many() { # DIR_IN_MOUNT DIR_IN_STORE
    "$PY" - "$@" <<'PY'
import errno, os, sys, time
mount, store = sys.argv[1], sys.argv[2]
emfile = 0
left_behind = []
for i in range(1100):
    name = "d%d" % i if i % 11 == 0 else "f%d" % i
    for attempt in range(500):
        try:
            if name[0] == "d":
                os.mkdir("%s/%s" % (mount, name))
            else:
                os.close(os.open("%s/%s" % (mount, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            break
        except OSError as e:
            if e.errno != errno.EMFILE:
                raise
            emfile += 1
            if os.path.lexists("%s/%s" % (store, name)):
                left_behind.append(name)
            time.sleep(0.01)
    else:
        print("still EMFILE after 5 s at", name)
        sys.exit(1)
files = [n for n in os.listdir(store) if n[0] in "fd" and n[1:].isdigit()]
print(len(files), "made;", "left behind:", left_behind[:3])
PY
}

_assert_output "1100 made; left behind: []" make_many "$C/Documents" "$TEST_STORE/containers/com.example.fds/Documents"
_assert_output "reg" fsop stat "$C/Documents/f1099" type
_assert_output "dir" fsop stat "$C/Documents/d1089" type
fs_umount
