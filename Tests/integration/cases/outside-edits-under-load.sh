# Programs keep working through the mount while another keeps changing the same directory
# in the store (DESIGN.md 27): for 4 s per cache mode, an editor rewrites, atomically
# replaces and deletes 50 files in the store; four readers open and read them through the
# mount; a writer creates, appends to, renames and unlinks files there. The only error a
# reader or the writer may see is ENOENT (a file deleted in the store): never ESTALE (the
# kernel's retry of a replaced name, which the daemon must serve), EBADF, EIO or a hang.
# This found two bugs: a name replaced again between the kernel's retry lookup and its open
# handed ESTALE to a reader, and under -o writeback an O_CREAT open of a name the store had
# just made got a write-only backing descriptor (the kernel's page read then failed EBADF).
. "$(dirname "$0")/../lib/common.sh"

load() { # DIR_IN_MOUNT DIR_IN_STORE SECONDS
    timeout 60 "$PY" - "$@" <<'PY'
import os, random, sys, time, multiprocessing as mp
mount, store, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])

def repeat(end, step):
    """Runs `step` until `end`; ENOENT is the one error allowed (a file deleted in the store)."""
    n = 0
    while time.time() < end:
        try:
            step()
        except FileNotFoundError:
            pass
        n += 1
    return n

def edit():
    p = "%s/f%d" % (store, random.randrange(50))
    k = random.randrange(3)
    if k == 0:
        with open(p, "w") as f: f.write("x" * random.randrange(1, 5000))
    elif k == 1:
        with open(p + ".new", "w") as f: f.write("y" * random.randrange(1, 5000))
        os.rename(p + ".new", p)
    else:
        os.unlink(p)

def read():
    with open("%s/f%d" % (mount, random.randrange(50))) as f: f.read()

def write():
    i = random.randrange(50)
    with open("%s/w%d" % (mount, i), "w") as f: f.write("z" * random.randrange(1, 9000))
    if random.random() < 0.3: os.rename("%s/w%d" % (mount, i), "%s/w%d" % (mount, random.randrange(50)))
    if random.random() < 0.2: os.unlink("%s/w%d" % (mount, i))
    with open("%s/f%d" % (mount, i), "a") as f: f.write("a")

if __name__ == "__main__":
    end = time.time() + seconds
    with mp.Pool(6) as pool:
        jobs = [pool.apply_async(repeat, (end, step)) for step in [edit, write] + [read] * 4]
        counts = [j.get() for j in jobs]          # re-raises a worker's error
    print("ok" if all(c > 0 for c in counts) else "idle: %s" % counts)
PY
}

for mode in default writeback; do
    fs_mount_mode "$mode"
    C=$(_mkcontainer com.example.load)
    _assert_output "ok" load "$C/Documents" "$MODE_STORE/containers/com.example.load/Documents" 4
    _assert_ok timeout 10 ls "$C/Documents"       # still answering
    fs_umount                                     # and exits 0
done
