# `containerfs snapshot import` refuses hostile archives whole (docs/DESIGN.md 54): absolute
# paths, '..', a link leading outside (directly and through another link), a path through a
# link, devices, FIFOs, duplicate members, hard links to unknown members, a bad header
# checksum, truncated archives (mid-member and at a header's place) - each with the member
# and the reason, exit 1, nothing published, `.staging/` empty. Through the daemon and on
# the store without a mount.
. "$(dirname "$0")/../lib/common.sh"
_require_root
S=$TEST_STORE M=$TEST_MNT
fs_mount
H=$TEST_TMP/h
mkdir "$H"
$PY - "$H" <<'PY'
import io, sys, tarfile
out = sys.argv[1]
def member(t, name, kind="file", data=b"x", target=None):
    i = tarfile.TarInfo(name)
    i.mtime = 1600000000
    if kind == "file":
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
        return
    i.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
              "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[kind]
    if target is not None:
        i.linkname = target
    t.addfile(i)
def archive(name, *members):
    with tarfile.open(f"{out}/{name}", "w", format=tarfile.PAX_FORMAT) as t:
        for m in members:
            member(t, *m)
archive("absolute.tar", ("x/", "dir"), ("/etc/evil", "file"))
archive("dotdot.tar", ("x/", "dir"), ("x/../../evil", "file"))
archive("symlink-escape.tar", ("x/", "dir"), ("x/etc", "sym", b"", "../../etc"))
archive("through-symlink.tar", ("x/", "dir"), ("x/etc", "sym", b"", "../../etc"), ("x/etc/passwd", "file"))
archive("through-inner-symlink.tar", ("x/", "dir"), ("x/sub/", "dir"), ("x/l", "sym", b"", "sub"), ("x/l/f", "file"))
archive("absolute-symlink.tar", ("x/", "dir"), ("x/l", "sym", b"", "/etc/passwd"))
archive("symlink-chain.tar", ("x/", "dir"), ("x/d", "sym", b"", "."), ("x/e", "sym", b"", "d/d/d/../.."))
archive("top-escape.tar", ("x/", "dir"), ("x/up", "sym", b"", "../y"))
archive("chardev.tar", ("x/", "dir"), ("x/null", "chr"))
archive("fifo.tar", ("x/", "dir"), ("x/p", "fifo"))
archive("duplicate.tar", ("x/", "dir"), ("x/a", "file"), ("x/a", "file"))
archive("hardlink-unknown.tar", ("x/", "dir"), ("x/h", "hard", b"", "x/nowhere"))
archive("good.tar", ("x/", "dir"), ("x/a", "file", b"a" * 100000), ("x/b", "file"))
good = open(f"{out}/good.tar", "rb").read()
second = good.index(b"x/a\0")
bad = bytearray(good)
bad[second + 148] = ord("7") if bad[second + 148] != ord("7") else ord("6")   # a checksum digit
open(f"{out}/checksum.tar", "wb").write(bad)
open(f"{out}/truncated.tar", "wb").write(good[:second + 512 + 1000])          # inside x/a's data
open(f"{out}/truncated-at-header.tar", "wb").write(good[:second + 512 + 512 * 196])  # x/b's header gone
open(f"{out}/garbage.tar", "wb").write(b"not a tar archive\n" * 100)
PY
_assert_output "$M/snapshots/ok" containerfs snapshot import "$H/good.tar" --name ok --store "$S"

# refused NAME MESSAGE [MODE]: the archive is refused with exactly MESSAGE, nothing stays.
refused() {
    _assert_exit 1 containerfs snapshot import "$H/$1" --name bad --store "$S"
    _assert_eq "containerfs: $H/$1: $2: invalid argument" "$_OUT" "$1"
    _assert_output "ok" ls "$S/snapshots"
    _assert_output "" ls -A "$S/.staging"
    _assert_output "ok" sh -c "containerfs snapshot list --store '$S' | cut -f1"
}
check_all() {
    refused absolute.tar "/etc/evil: refused, an absolute path"
    refused dotdot.tar "x/../../evil: refused, a '..' component in its path"
    refused symlink-escape.tar "x/etc: refused, a symbolic link leading outside the snapshot (../../etc)"
    refused through-symlink.tar "x/etc: refused, a symbolic link leading outside the snapshot (../../etc)"
    refused through-inner-symlink.tar "x/l/f: refused, its path goes through the symbolic link x/l"
    refused absolute-symlink.tar "x/l: refused, a symbolic link to an absolute path (/etc/passwd)"
    refused symlink-chain.tar "x/e: refused, a symbolic link leading outside the snapshot (d/d/d/../..)"
    refused top-escape.tar "x/up: refused, a symbolic link leading outside the snapshot (../y)"
    refused chardev.tar "x/null: refused, a character device"
    refused fifo.tar "x/p: refused, a FIFO"
    refused duplicate.tar "x/a: refused, a duplicate member"
    refused hardlink-unknown.tar "x/h: refused, a hard link to x/nowhere, which is not an earlier file member"
    refused checksum.tar "the member after x/: refused, a damaged or truncated archive (Damaged tar archive)"
    refused truncated.tar "x/a: refused, a damaged or truncated archive (Truncated tar archive)"
    refused truncated-at-header.tar "the end after x/a: refused, a truncated archive (no end-of-archive blocks)"
    refused garbage.tar "the first member: refused, not a tar archive, or a damaged header (Unrecognized archive format)"
}

# MARK: through the daemon
check_all
_assert_exit 1 containerfs snapshot import /dev/null --name bad --store "$S"
_assert_eq "containerfs: /dev/null: not a regular file (the daemon reads archives from files; the CLI copies standard input into one): invalid argument" "$_OUT" "a device as the archive"
_assert_exit 1 sh -c "head -c 10240 /dev/zero | containerfs snapshot import - --name bad --store '$S'"
_assert_eq "containerfs: -: refused, an archive without members: invalid argument" "$_OUT" "an empty archive"
_assert_exit 1 sh -c "containerfs snapshot import - --name bad --store '$S' <'$H/truncated.tar'"
_assert_eq "containerfs: -: x/a: refused, a damaged or truncated archive (Truncated tar archive): invalid argument" "$_OUT" "truncated on standard input"
_assert_output "ok" ls "$M/snapshots"

# MARK: on the store without a mount
fs_umount
check_all
_assert_output "ok: intact" containerfs snapshot verify --store "$S"
