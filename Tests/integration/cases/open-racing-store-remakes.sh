# An open through the mount of a name the store keeps replacing, deleting and making again
# (DESIGN.md 27): three writers open f0..f2 with O_CREAT|O_APPEND through the mount for
# 10 s per cache mode while an editor in the store renames new files over those names,
# deletes them and makes them again. The only error a writer may see is ENOENT (the name
# deleted between the kernel's look-up and its create): never ESTALE. An open answered
# ESTALE is retried by the kernel, whose revalidation of the name may find it gone and its
# look-up afresh find it made again; the daemon took the failed look-up for the end of the
# retry and answered its open ESTALE a second time, which the writer saw (3 to 6 times in
# 30 s before).
. "$(dirname "$0")/../lib/common.sh"

race() { # DIR_IN_MOUNT DIR_IN_STORE SECONDS
    timeout 60 "$PY" - "$@" <<'PY'
import errno, os, random, sys, time, multiprocessing as mp
mount, store, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])

def editor(end):
    n = 0
    while time.time() < end:
        p = "%s/f%d" % (store, random.randrange(3))
        k = random.randrange(3)
        try:
            if k == 0:
                with open(p + ".new", "w") as f: f.write("y")
                os.rename(p + ".new", p)
            elif k == 1:
                os.unlink(p)
            else:
                with open(p, "w") as f: f.write("x")
        except FileNotFoundError:
            pass
        n += 1
        time.sleep(0.0002)
    return n, {}

def writer(end):
    n, errors = 0, {}
    while time.time() < end:
        try:
            with open("%s/f%d" % (mount, random.randrange(3)), "a") as f: f.write("a")
        except FileNotFoundError:
            pass
        except OSError as e:
            name = errno.errorcode.get(e.errno, str(e.errno))
            errors[name] = errors.get(name, 0) + 1
        n += 1
    return n, errors

if __name__ == "__main__":
    end = time.time() + seconds
    with mp.Pool(4) as pool:
        jobs = [pool.apply_async(editor, (end,))] + [pool.apply_async(writer, (end,)) for _ in range(3)]
        results = [j.get() for j in jobs]
    errors = {}
    for _, e in results:
        for k, v in e.items(): errors[k] = errors.get(k, 0) + v
    if errors: print("errors: %s" % errors)
    elif not all(n > 0 for n, _ in results): print("idle: %s" % [n for n, _ in results])
    else: print("ok")
PY
}

for mode in default writeback; do
    fs_mount_mode "$mode"
    C=$(_mkcontainer com.example.remakes)
    _assert_output "ok" race "$C/Documents" "$MODE_STORE/containers/com.example.remakes/Documents" 10
    fs_umount
done
