# timeout: 240
# The kernel keeps a directory's listing while the daemon can vouch for it (DESIGN.md 34):
# a second listing of an unchanged directory sends no READDIR at all, and a listing is never
# stale. Counted with the fuse:fuse_request_send tracepoint; no sleeps between a change and
# the listing that must show it.
# - kept: listings 2..5 of an unchanged directory send no OPENDIR-time READDIR(PLUS);
# - an entry made, removed, renamed or replaced (a new d_ino) in the store outside the mount
#   shows in the very next listing, in both mount modes;
# - changes through the mount, and a container made by the CLI, show at once;
# - a directory moved elsewhere lists its new `..`;
# - once the kernel forgot the entries (drop_caches), `ls -l` gets READDIRPLUS again rather
#   than one LOOKUP per entry;
# - 300 rounds of listings racing changes in the store: once the changes stop, the next
#   listing is the store's.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/fusetrace.sh"

listing() {   # listing DIR: "name d_ino" of every entry (`.` and `..` included), sorted
    fsop dents "$1"
}

for mode in default writeback; do
    fs_mount_mode "$mode"
    C=$(_mkcontainer com.example.listing)
    D=$C/Documents/dir
    SD=$MODE_STORE/containers/com.example.listing/Documents/dir
    mkdir "$D"
    for i in $(seq 1 200); do : >"$D/f$i"; done

    # MARK: kept while unchanged
    listing "$D" >/dev/null                       # fills the kernel's cache
    _trace_begin "$TEST_MNT"
    for _ in 1 2 3 4; do listing "$D" >/dev/null; done
    _trace_end
    _assert_eq 0 "$(( $(_trace_count FUSE_READDIR) + $(_trace_count FUSE_READDIRPLUS) ))" \
        "$mode: READDIR requests for 4 listings of an unchanged directory"
    _assert_eq 4 "$(_trace_count FUSE_OPENDIR)" "$mode: OPENDIR requests for 4 listings"

    # MARK: changes made in the store show in the next listing
    # d_ino is the store's inode number, `.` and `..` included.
    _assert_eq "$(listing "$SD")" "$(listing "$D")" "$mode: cached listing"
    : >"$SD/made-outside"
    _assert_eq "$(listing "$SD")" "$(listing "$D")" "$mode: listing after a file was made in the store"
    _assert_output "made-outside" sh -c "ls '$D' | grep -x made-outside"
    rm "$SD/f1"
    _assert_output "" sh -c "ls '$D' | grep -x f1 || true"
    mv "$SD/f2" "$SD/f2-renamed"
    _assert_output "f2-renamed" sh -c "ls '$D' | grep -x 'f2\(-renamed\)\?'"
    # Replaced by another file under the same name: the listing names the new inode.
    : >"$SD/replacement"; mv "$SD/replacement" "$SD/f3"
    _assert_eq "$(stat -c %i "$SD/f3")" "$(listing "$D" | awk '$1 == "f3" { print $2 }')" "$mode: d_ino of a name replaced in the store"
    mkdir "$SD/subdir-outside"
    _assert_output "subdir-outside" sh -c "ls '$D' | grep -x subdir-outside"
    _assert_eq "$(ls "$SD")" "$(ls "$D")" "$mode: listing after changes in the store"

    # MARK: changes through the mount
    : >"$D/made-inside"; rm "$D/f4"; mv "$D/f5" "$D/f5-renamed"; ln "$D/f6" "$D/f6-link"
    _assert_eq "$(ls "$SD")" "$(ls "$D")" "$mode: listing after changes through the mount"
    ls "$TEST_MNT/containers" >/dev/null; ls "$TEST_MNT/containers" >/dev/null
    _assert_ok containerfs container create com.example.listing-cli --store "$MODE_STORE"
    _assert_output "com.example.listing-cli" sh -c "ls '$TEST_MNT/containers' | grep -x com.example.listing-cli"

    # MARK: a moved directory lists its new `..`
    mkdir -p "$D/a/inner" "$D/b"
    listing "$D/a/inner" >/dev/null; listing "$D/a/inner" >/dev/null
    mv "$D/a/inner" "$D/b/inner"
    _assert_eq "$(stat -c %i "$D/b")" "$(listing "$D/b/inner" | awk '$1 == ".." { print $2 }')" "$mode: .. of a directory moved through the mount"
    listing "$D/b/inner" >/dev/null
    mv "$SD/b/inner" "$SD/a/inner"
    _assert_eq "$(stat -c %i "$D/a")" "$(listing "$D/a/inner" | awk '$1 == ".." { print $2 }')" "$mode: .. of a directory moved in the store"
    fs_umount
done

# MARK: after the kernel forgot the entries, `ls -l` is primed by READDIRPLUS again
fs_mount
C=$(_mkcontainer com.example.listing-forgotten)
D=$C/Documents
for i in $(seq 1 1000); do : >"$D/g$i"; done
listing "$D" >/dev/null; listing "$D" >/dev/null
# The directory is held open (as metabench does), so the kernel keeps it, and its cached
# listing, while it forgets the entries.
exec 8<"$D"
sync; echo 2 >/proc/sys/vm/drop_caches; sleep 0.3
_trace_begin "$TEST_MNT"
ls -l "$D" >/dev/null
_trace_end
exec 8<&-
lookups=$(_trace_count FUSE_LOOKUP)
plus=$(_trace_count FUSE_READDIRPLUS)
((plus >= 1)) || _fail "no READDIRPLUS for ls -l after the entries were forgotten"
((lookups < 100)) || _fail "ls -l of 1000 forgotten entries sent $lookups LOOKUP requests (READDIRPLUS: $plus)"
_ok "ls -l after a drop: $plus READDIRPLUS, $lookups LOOKUP"

# MARK: listings racing changes made in the store
SD=$TEST_STORE/containers/com.example.listing-forgotten/Documents
mkdir "$D/race"
"$PY" - "$D/race" "$SD/race" <<'EOF'
import os, sys, threading
mnt, store = sys.argv[1], sys.argv[2]
stop = threading.Event()
def lister():
    while not stop.is_set():
        os.listdir(mnt)
threads = [threading.Thread(target=lister) for _ in range(2)]
for t in threads: t.start()
bad = 0
for r in range(300):
    # Change the store while listings run, then compare once the changes stop.
    for i in range(r % 7 + 1):
        name = os.path.join(store, "r%d-%d" % (r, i))
        open(name, "w").close()
        if i % 3 == 0:
            os.rename(name, name + "-moved")
        if i % 4 == 1:
            os.unlink(name)
    if sorted(os.listdir(mnt)) != sorted(os.listdir(store)):
        bad += 1
stop.set()
for t in threads: t.join()
if bad:
    raise SystemExit("%d of 300 listings right after a change in the store differed from the store's" % bad)
print("300 of 300 listings matched the store")
EOF
_ok "listings racing changes in the store"
