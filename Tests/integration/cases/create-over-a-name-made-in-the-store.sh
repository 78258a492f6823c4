# open(O_CREAT|O_TRUNC) of a name the kernel believes missing, which the store has just
# made (DESIGN.md 38). The daemon meets the file (its create is O_EXCL) and opens it as
# POSIX would. Under -o writeback the kernel takes the CREATE's answer for a new file's:
# - "held": the store linked the name to a file the kernel holds under another name. The
#   kernel kept that inode's old size and applied no O_TRUNC: the name showed the old size
#   after 3,947 bytes were written, and the page written back past the new end left 4,096
#   in the store. A coherence fuzzer found it; with the build before, 100 of
#   100 rounds were wrong under -o writeback, none on the default mount.
# - "new": the store wrote the file itself, so the kernel makes a new inode from the
#   answer, which carried the size from before the O_TRUNC: 1 round in 200–600 of "held"
#   went this way (the kernel had let go of the old inode meanwhile).
#
# 60 rounds of each per mount: the kernel keeps a negative entry for the name, the store
# makes the file, and at once the name is created through the mount, before the watcher's
# news can reach the kernel. The mount and the store must both show exactly what was written.
. "$(dirname "$0")/../lib/common.sh"

rounds() {
    "$PY" - "$1" "$2" <<'PY'
import os, sys
mount, store = sys.argv[1], sys.argv[2]
wrong = []
for kind in ("held", "new"):
    for r in range(60):
        a, b = "%s-a%d" % (kind, r), "%s-b%d" % (kind, r)
        if kind == "held":
            with open(os.path.join(mount, a), "wb") as f:
                f.write(b"x" * 31079)
        try:
            os.stat(os.path.join(mount, b))
        except FileNotFoundError:
            pass
        if kind == "held":
            os.link(os.path.join(store, a), os.path.join(store, b))
        else:
            with open(os.path.join(store, b), "wb") as f:
                f.write(b"x" * 31079)
        fd = os.open(os.path.join(mount, b), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, b"y" * 3947)
        os.close(fd)
        with open(os.path.join(mount, b), "rb") as f:
            seen = f.read()
        size = os.stat(os.path.join(mount, b)).st_size
        if seen != b"y" * 3947 or size != 3947:
            wrong.append((b, len(seen), size))
# What was written back, once every handle is closed and the pages are flushed.
os.sync()
for kind in ("held", "new"):
    for r in range(60):
        size = os.stat(os.path.join(store, "%s-b%d" % (kind, r))).st_size
        if size != 3947:
            wrong.append(("%s-b%d" % (kind, r), "store", size))
print(len(wrong), wrong[:3])
PY
}

for mode in default writeback; do
    if [[ $mode == writeback ]]; then fs_mount -o writeback; else fs_mount; fi
    C=$(_mkcontainer "com.example.create-over-$mode")
    _assert_output "0 []" rounds "$C/Documents" "$TEST_STORE/containers/com.example.create-over-$mode/Documents"
    fs_umount
done
