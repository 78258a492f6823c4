# flock(2), fcntl(2) record locks (F_SETLK/F_SETLKW/F_GETLK) and open file description
# locks through the mount behave as on a local disk between processes: conflicts give
# EAGAIN (EWOULDBLOCK), F_GETLK names the holder, locks go with close or exit, and a
# blocked F_SETLKW waits for the holder (issue 2). flock(1) works.
. "$(dirname "$0")/../lib/common.sh"
_require_cmd flock
fs_mount
C=$(_mkcontainer com.example.locks)
F=$C/Documents/locked
echo data >"$F"

"$PY" - "$F" <<'EOF'
import fcntl, os, struct, subprocess, sys, time
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
f = sys.argv[1]

def other(code):
    """Runs `code` in another process with fd 3 open on f; returns its stdout."""
    r = subprocess.run([sys.executable, "-c", "import fcntl, os, struct, errno, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n" + code, f],
                       capture_output=True, text=True, timeout=30)
    return (r.stdout + r.stderr).strip()

TRY_FLOCK = """
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print("got")
except OSError as e:
    print(errno.errorcode[e.errno])
"""
TRY_FLOCK_SH = TRY_FLOCK.replace("LOCK_EX", "LOCK_SH")
TRY_SETLK = """
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0); print("got")
except OSError as e:
    print(errno.errorcode[e.errno])
"""
GETLK = """
lk = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 10, 0)
r = fcntl.fcntl(fd, fcntl.F_GETLK, lk)
t, w, s, l, pid = struct.unpack("hhqqi", r)
print({fcntl.F_UNLCK: "unlocked", fcntl.F_WRLCK: "write", fcntl.F_RDLCK: "read"}[t], pid)
"""

# MARK: flock
fd = os.open(f, os.O_RDWR)
ok("flock LOCK_EX", fcntl.flock, fd, fcntl.LOCK_EX)
eq("another process: LOCK_EX|LOCK_NB", other(TRY_FLOCK), "EAGAIN")
eq("another process: LOCK_SH|LOCK_NB", other(TRY_FLOCK_SH), "EAGAIN")
ok("downgrade to LOCK_SH", fcntl.flock, fd, fcntl.LOCK_SH)
eq("shared with another process", other(TRY_FLOCK_SH), "got")
eq("exclusive still refused", other(TRY_FLOCK), "EAGAIN")
ok("LOCK_UN", fcntl.flock, fd, fcntl.LOCK_UN)
eq("free after unlock", other(TRY_FLOCK), "got")
ok("flock again", fcntl.flock, fd, fcntl.LOCK_EX)
os.close(fd)
eq("free after close", other(TRY_FLOCK), "got")
fd = os.open(f, os.O_RDWR)
fd2 = os.open(f, os.O_RDWR)
ok("flock on one open file description", fcntl.flock, fd, fcntl.LOCK_EX)
err("conflicts with another description in the same process", "EAGAIN", fcntl.flock, fd2, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.close(fd); os.close(fd2)

# MARK: fcntl record locks
fd = os.open(f, os.O_RDWR)
ok("F_SETLK write lock on bytes 0-9", fcntl.lockf, fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
eq("another process: conflicting F_SETLK", other(TRY_SETLK), "EAGAIN")
eq("another process: F_GETLK names the holder", other(GETLK), "write %d" % os.getpid())
eq("another process: a disjoint range is free", other("fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 20); print('got')"), "got")
fd_dup = os.open(f, os.O_RDONLY)
os.close(fd_dup)
eq("POSIX: closing any descriptor of the file drops the process's locks", other(TRY_SETLK), "got")
ok("lock again", fcntl.lockf, fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
# F_SETLKW: a waiter gets the lock once the holder lets go.
waiter = subprocess.Popen([sys.executable, "-c", """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
t = time.time()
fcntl.lockf(fd, fcntl.LOCK_EX, 10, 0)
print("waited %.1f" % (time.time() - t))
""", f], stdout=subprocess.PIPE, text=True)
time.sleep(0.5)
eq("the waiter is still blocked", waiter.poll(), None)
ok("unlock", fcntl.lockf, fd, fcntl.LOCK_UN, 10, 0)
out = waiter.communicate(timeout=20)[0].strip()
true("the waiter got the lock after the holder let go", out.startswith("waited ") and float(out.split()[1]) >= 0.4, out)
os.close(fd)

# MARK: open file description locks (F_OFD_SETLK)
F_OFD_GETLK, F_OFD_SETLK = 36, 37
fd1, fd2 = os.open(f, os.O_RDWR), os.open(f, os.O_RDWR)
ok("OFD write lock", fcntl.fcntl, fd1, F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
err("OFD lock conflicts within one process", "EAGAIN", fcntl.fcntl, fd2, F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
eq("another process sees it with F_GETLK", other(GETLK).split()[0], "write")
os.close(fd1)
ok("free once its description is closed", fcntl.fcntl, fd2, F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
os.close(fd2)
done()
EOF

# flock(1), as shell scripts use it.
flock "$F" sleep 2 &
holder=$!
sleep 0.5
_assert_exit 1 flock -n "$F" true
_assert_exit 0 flock -w 10 "$F" true
wait "$holder"
