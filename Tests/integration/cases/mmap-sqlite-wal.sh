# Shared writable mmap through the mount: stores through one mapping are seen by read(2),
# by a second mapping in another process and in the store after msync; and the test that
# matters to apps: an SQLite database in WAL mode (which maps its -shm file shared and
# locks with fcntl) works with a writer and concurrent readers, survives a remount and
# passes integrity_check (issue 2).
. "$(dirname "$0")/../lib/common.sh"
_require_cmd sqlite3
fs_mount
C=$(_mkcontainer com.example.sqlite)
D=$C/Library/Application\ Support
S="$TEST_STORE/containers/com.example.sqlite/Library/Application Support"

"$PY" - "$D" "$S" <<'EOF'
import mmap, os, subprocess, sys
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
D, S = sys.argv[1], sys.argv[2]
f = os.path.join(D, "mapped")
write_file(f, b"\0" * 16384)
fd = os.open(f, os.O_RDWR)
m = mmap.mmap(fd, 16384, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:5] = b"hello"
m[8192:8197] = b"world"
eq("read(2) sees stores through the mapping", os.pread(fd, 5, 0), b"hello")
child = subprocess.run([sys.executable, "-c", """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 16384, mmap.MAP_SHARED)
print(m[8192:8197].decode(), end="")
m[100:103] = b"abc"
m.flush()
""", f], capture_output=True, text=True)
eq("another process's mapping sees them", child.stdout, "world")
eq("and its stores come back", m[100:103], b"abc")
m.flush()
eq("msync reaches the store", read_file(os.path.join(S, "mapped"))[8192:8197], b"world")
m.resize(16384)
os.ftruncate(fd, 32768)
m2 = mmap.mmap(fd, 32768, mmap.MAP_SHARED)
m2[20000:20004] = b"grow"
m2.flush()
eq("mapping past the old end after ftruncate", os.pread(fd, 4, 20000), b"grow")
m.close(); m2.close(); os.close(fd)
# A private mapping's stores stay private.
fd = os.open(f, os.O_RDONLY)
p = mmap.mmap(fd, 16384, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
p[0:5] = b"priv!"
eq("MAP_PRIVATE stores are not written", read_file(f)[:5], b"hello")
p.close(); os.close(fd)
done()
EOF

DB=$D/app.sqlite
_assert_output "wal" sqlite3 "$DB" "PRAGMA journal_mode=WAL;"
_assert_ok sqlite3 "$DB" "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); CREATE INDEX tv ON t(v);"
# One writer (many small transactions) and two readers at once, in separate processes.
"$PY" - "$DB" <<'EOF'
import os, sqlite3, sys, time, multiprocessing
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
db = sys.argv[1]

def writer():
    c = sqlite3.connect(db, timeout=30)
    for i in range(400):
        with c:
            c.execute("INSERT INTO t(v) VALUES (?)", ("row %d %s" % (i, "x" * (i % 50)),))
    c.close()

def reader(q):
    c = sqlite3.connect(db, timeout=30)
    seen, last = 0, 0
    deadline = time.time() + 60
    while time.time() < deadline:
        n = c.execute("SELECT count(*) FROM t").fetchone()[0]
        if n < last:
            q.put("went backwards %d -> %d" % (last, n)); return
        last = n; seen += 1
        if n == 400:
            break
    q.put("ok %d" % last)

q = multiprocessing.Queue()
procs = [multiprocessing.Process(target=writer)] + [multiprocessing.Process(target=reader, args=(q,)) for _ in range(2)]
for p in procs: p.start()
for p in procs: p.join(90)
eq("writer exit", procs[0].exitcode, 0)
for _ in range(2):
    eq("reader", q.get(timeout=5), "ok 400")
c = sqlite3.connect(db)
eq("journal mode", c.execute("PRAGMA journal_mode").fetchone()[0], "wal")
eq("rows", c.execute("SELECT count(*) FROM t").fetchone()[0], 400)
eq("integrity", c.execute("PRAGMA integrity_check").fetchone()[0], "ok")
true("-wal exists while open", os.path.exists(db + "-wal"))
true("-shm exists while open", os.path.exists(db + "-shm"))
eq("checkpoint", c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0], 0)
c.close()
done()
EOF
_assert_output "400" sqlite3 "$DB" "SELECT count(*) FROM t;"
fs_umount
fs_mount
_assert_output "400|ok" sqlite3 "$DB" "SELECT count(*), (SELECT integrity_check FROM pragma_integrity_check) FROM t;"
_assert_output "wal" sqlite3 "$DB" "PRAGMA journal_mode;"
_assert_ok sqlite3 "$DB" "INSERT INTO t(v) VALUES ('after remount');"
_assert_output "401" sqlite3 "$S/app.sqlite" "SELECT count(*) FROM t;"
