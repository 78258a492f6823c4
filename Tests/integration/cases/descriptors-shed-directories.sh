# When descriptors run short, directories are let go of too, where the kernel can prune
# (FUSE_NOTIFY_PRUNE, protocol 7.45: an entry is dropped only while nobody uses it), and
# whatever is in use stays (DESIGN.md 28). The daemon starts with a limit of 2,048 (so the
# store watcher keeps 1,024 of them); then 3,000 directories are made through the mount,
# each retried on ENFILE, by a process working in the second of them and holding the third
# open. All 3,000 must be made, none stuck for 5 s, the working directory must still resolve
# (getcwd) and the open one still list. The build before never shed a directory: the
# ~1,000th mkdir and every one after it failed until the kernel dropped entries by itself
# ("still ENFILE after 5 s"). Skipped where the kernel cannot prune (FUSE protocol below
# 7.45, as the daemon logs it at INIT).
. "$(dirname "$0")/../lib/common.sh"
_require_cmd prlimit
_CFS_WRAP=(prlimit --nofile=2048:2048)
fs_mount
C=$(_mkcontainer com.example.sheddirs)
minor=$(sed -n 's/.*kernel FUSE protocol 7\.\([0-9]*\).*/\1/p' "$TEST_TMP/daemon.$_CFS_N.log" | head -1)
[[ -n $minor ]] || _fail "the daemon did not log the kernel's FUSE protocol"
(( minor >= 45 )) || _skip "the kernel speaks FUSE 7.$minor: no FUSE_NOTIFY_PRUNE before 7.45"
# A daemon with CAP_SYS_RESOURCE lifts its limit (descriptors-limit-lifted): cut it again.
_assert_ok prlimit --pid "$(_daemon_pid)" --nofile=2048:2048

_assert_output "3000 made; cwd: True; open dir lists: 0" "$PY" - "$C/Documents/many" <<'PY'
import errno, os, sys, time
top = sys.argv[1]
os.mkdir(top)
held = None
for i in range(3000):
    path = os.path.join(top, "d%d" % i)
    for attempt in range(500):
        try:
            os.mkdir(path)
            break
        except OSError as e:
            if e.errno != errno.ENFILE:
                raise
            time.sleep(0.01)
    else:
        print("still ENFILE after 5 s at", path)
        sys.exit(1)
    if i == 1:
        os.chdir(path)
    if i == 2:
        held = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
made = sum(1 for n in os.listdir(top) if n[0] == "d")
print("%d made; cwd: %s; open dir lists: %d" % (made, os.getcwd() == os.path.join(top, "d1"), len(os.listdir(held))))
PY
no_prune_refusal() { ! grep -q "refused FUSE_NOTIFY_PRUNE" "$TEST_TMP/daemon.$_CFS_N.log"; }
_assert_ok no_prune_refusal
