# A process that makes a directory and a subdirectory through the mount and goes to work in
# it keeps a working directory that resolves (getcwd), however late the store watcher sees
# the new directory (DESIGN.md 14, 59). The watcher reports what a new directory already
# held when its mark began (made before the mark existed); it used to invalidate those
# entries, which unhashes them even in use, and `mkdir -p a/b; cd a/b` then found getcwd
# failing with ENOENT (about 1 round in 10 here). Now it only expires them
# (FUSE_EXPIRE_ONLY, protocol 7.38): the next use looks the name up again. 300 rounds of
# mkdir a, five subdirectories, chdir into the last, 2 ms, getcwd: none may fail. And a
# name made in the store under a directory the kernel had looked up as missing is found.
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.cwd)
_assert_output "getcwd failed in 0 of 300 rounds" "$PY" - "$C/Documents" <<'PY'
import os, sys, time
top = sys.argv[1]
failed = 0
for i in range(300):
    d = os.path.join(top, "x%d" % i)
    os.mkdir(d)
    for j in range(5):
        os.mkdir(os.path.join(d, "s%d" % j))
    os.chdir(os.path.join(d, "s4"))
    time.sleep(0.002)
    try:
        os.getcwd()
    except FileNotFoundError:
        failed += 1
    os.chdir(top)
print("getcwd failed in %d of 300 rounds" % failed)
PY

# The negative entry still goes: `late/` made in the store, looked up through the mount,
# its `child` looked up as missing, then made in the store: the mount shows it.
SD=$TEST_STORE/containers/com.example.cwd/Documents
mkdir "$SD/late"
_assert_output "dir" fsop stat "$C/Documents/late" type
_assert_errno ENOENT fsop stat "$C/Documents/late/child"
mkdir "$SD/late/child"
_assert_output "dir" fsop stat "$C/Documents/late/child" type
