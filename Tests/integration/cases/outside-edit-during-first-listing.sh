# Files edited in the store while the mount lists their directory for the first time show
# timeout: 300 (hundreds of rounds in both modes: 75-100 s on 2 vCPUs, near the default 120)
# their new size once the listing is done (DESIGN.md 14). `ls -l` reads the directory with
# READDIRPLUS, whose answer names each entry's item with its attributes; the daemon looks
# every entry of a buffer up before it sends the buffer, and the kernel makes the inodes
# only when the buffer arrives. An edit the store watcher handled in between was told to a
# kernel that did not know the item yet (ENOENT), and the inode was made with the size of
# before, kept for the attribute timeout (9 to 30 stale sizes a round on the default mount
# with the build before, still stale 2 s later). The notifier now sends such an
# invalidation again until the kernel knows the item.
#
# 5 rounds per mode: 2,000 files of 10 bytes made in the store, then `ls -l` of their
# directory through the mount while a thread rewrites each file in the store with 30 bytes;
# once the watcher has caught up (a marker made in the store after the edits shows
# through the mount), every size must be 30.
. "$(dirname "$0")/../lib/common.sh"

rounds() { # DIR_IN_MOUNT DIR_IN_STORE
    "$PY" - "$@" <<'PY'
import os, sys, time, subprocess, threading
mount, store = sys.argv[1], sys.argv[2]

def caught_up(d, r):
    # The watcher handles events in order: once a marker made in the store after the
    # edits shows through the mount (the kernel had it cached as missing), every edit
    # before it has been handled.
    m = "%s/marker%d" % (d, r)
    try:
        os.stat(mount + m)
    except FileNotFoundError:
        pass
    open(store + m, "w").close()
    for _ in range(10000):
        try:
            return os.stat(mount + m)
        except FileNotFoundError:
            time.sleep(0.001)
    raise SystemExit("the marker never showed through the mount")

stale = []
for r in range(5):
    d = "/r%d" % r
    os.mkdir(store + d)
    for i in range(2000):
        with open("%s%s/f%d" % (store, d, i), "w") as f:
            f.write("a" * 10)
    time.sleep(0.05)                        # the watcher has the new directory's entries
    def edit():
        for i in range(2000):
            with open("%s%s/f%d" % (store, d, i), "r+") as f:
                f.write("b" * 30)
    t = threading.Thread(target=edit)
    t.start()
    subprocess.run(["ls", "-l", mount + d], stdout=subprocess.DEVNULL, check=True)
    t.join()
    caught_up(d, r)
    time.sleep(0.2)                         # an invalidation sent again lands within this
    stale += [(r, i) for i in range(2000) if os.stat("%s%s/f%d" % (mount, d, i)).st_size != 30]
print(len(stale), stale[:3])
PY
}

for mode in default writeback; do
    fs_mount_mode "$mode"
    C=$(_mkcontainer com.example.first-listing)
    _assert_output "0 []" rounds "$C/Documents" "$MODE_STORE/containers/com.example.first-listing/Documents"
    fs_umount
done
