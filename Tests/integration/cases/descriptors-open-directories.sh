# A directory held open through the mount costs the daemon one descriptor, its item's, not
# two (DESIGN.md 28): the getdents64 stream of an OPENDIR is opened at its first READDIR or
# FSYNCDIR. stress-ng's chdir stressor holds 8,192 directories open for fchdir and never
# lists them; with a hard limit of 20,000 and no CAP_SYS_RESOURCE to lift it, the 7,486th
# mkdir failed with ENFILE (two descriptors per open directory, plus the watcher's).
# The daemon runs with a limit of 4,096 (the store watcher keeps 1,024 of them); 2,500
# directories are made and each held open through the mount, one is made the working
# directory, ten are listed while all are held, one is fsync'ed. With the build before,
# about the 1,500th open failed with ENFILE.
. "$(dirname "$0")/../lib/common.sh"
_require_cmd prlimit
_CFS_WRAP=(prlimit --nofile=4096:4096)
fs_mount
C=$(_mkcontainer com.example.opendirs)
# A daemon with CAP_SYS_RESOURCE lifts its limit (descriptors-limit-lifted): cut it again.
_assert_ok prlimit --pid "$(_daemon_pid)" --nofile=4096:4096

_assert_output "2500 held; cwd: True; listed: 10 x ['f']; fsync: ok" "$PY" - "$C/Documents/many" <<'PY'
import os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (3000, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
top = sys.argv[1]
os.mkdir(top)
held = []
for i in range(2500):
    path = os.path.join(top, "d%d" % i)
    try:
        os.mkdir(path)
        held.append(os.open(path, os.O_RDONLY | os.O_DIRECTORY))
    except OSError as e:
        print("directory %d: %s" % (i, e)); sys.exit(0)
with open(os.path.join(top, "d7", "f"), "w"): pass
os.fchdir(held[7])
cwd = os.getcwd() == os.path.join(top, "d7")
listed = [sorted(os.listdir(held[7])) for _ in range(10)]
os.fsync(held[8])
print("%d held; cwd: %s; listed: %d x %s; fsync: ok" % (len(held), cwd, len(listed), listed[0]))
PY
# Nothing was shed: every held directory was in use, and none was needed.
_assert_exit 1 grep -q "descriptors ran short" "$TEST_TMP/daemon.$_CFS_N.log"
fs_umount
