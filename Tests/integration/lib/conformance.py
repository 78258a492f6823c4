#!/usr/bin/env python3
"""A pjdfstest-style POSIX system-call suite whose output is compared between file systems.

    conformance.py DIR --users UID1:GID1,UID2:GID2   # as root: root, u1 and u2 act
    conformance.py DIR --self                         # as anyone: single-identity tests only

Runs every test in a fresh subdirectory of DIR and prints one line per step:

    GROUP/TEST: STEP: RESULT

RESULT is ``OK``, a value, or the errno's symbolic name: exactly what the call gave. The
suite has no expectations of its own; the conformance case runs it on a plain ext4
directory and on a container's Documents through the mount, and requires identical output
(pjdfstest is not available here; its test groups are the model: chmod, chown, ftruncate,
truncate, link, mkdir, mkfifo, mknod, open, rename, rmdir, symlink, unlink, utimensat).

Actors: ``root``; ``u1`` and ``u2``, unprivileged, without supplementary groups; ``me``:
the identity a single-identity test runs as (root and u1 in --users mode, the caller in
--self mode). Each step runs in a forked child that switches with setresgid/setresuid,
which is what ``setpriv --reuid --regid --clear-groups`` does, with umask 022. Stat
results name owners by actor, never by number, and times only by how they changed.
"""
import ctypes
import errno
import os
import stat
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _ctypes_check(rc):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# MARK: - Operations (each returns a string or raises OSError)

def creat(path, mode=0o644, flags=0):
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | flags, mode))
    return "OK"


def open_(path, flags, mode=0o644):
    os.close(os.open(path, flags, mode))
    return "OK"


def open_write(path, flags, data, mode=0o644):
    fd = os.open(path, flags, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return "OK"


def read_all(path):
    with open(path, "rb") as f:
        return repr(f.read())


def chmod(path, mode):
    os.chmod(path, mode)
    return "OK"


def lchmod(path, mode):
    _ctypes_check(libc.fchmodat(AT_FDCWD, os.fsencode(path), ctypes.c_uint(mode), AT_SYMLINK_NOFOLLOW))
    return "OK"


def fchmod_(path, mode):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return "OK"


def chown(path, uid, gid):
    os.chown(path, uid, gid)
    return "OK"


def lchown(path, uid, gid):
    os.lchown(path, uid, gid)
    return "OK"


def truncate(path, length):
    os.truncate(path, length)
    return "OK"


def ftruncate(path, length, flags=os.O_WRONLY):
    fd = os.open(path, flags)
    try:
        os.ftruncate(fd, length)
    finally:
        os.close(fd)
    return "OK"


def link(src, dst, follow=False):
    # linkat(2) itself: Python's os.link(follow_symlinks=True) calls link(2), which on
    # Linux never follows a symlink.
    flags = 0x400 if follow else 0   # AT_SYMLINK_FOLLOW
    _ctypes_check(libc.linkat(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), flags))
    return "OK"


def mkdir(path, mode=0o755):
    os.mkdir(path, mode)
    return "OK"


def mkfifo(path, mode=0o644):
    os.mkfifo(path, mode)
    return "OK"


def mknod(path, mode, dev=0):
    os.mknod(path, mode, dev)
    return "OK"


def rename(src, dst):
    os.rename(src, dst)
    return "OK"


def renameat2(src, dst, flags):
    _ctypes_check(libc.renameat2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), ctypes.c_uint(flags)))
    return "OK"


def rmdir(path):
    os.rmdir(path)
    return "OK"


def symlink(target, path):
    os.symlink(target, path)
    return "OK"


def readlink(path):
    return os.readlink(path)


def unlink(path):
    os.unlink(path)
    return "OK"


def utimens(path, atime, mtime, nofollow=False):
    def ts(v):
        if v == "now":
            return Timespec(0, UTIME_NOW)
        if v == "omit":
            return Timespec(0, UTIME_OMIT)
        return Timespec(v[0], v[1])
    times = (Timespec * 2)(ts(atime), ts(mtime))
    _ctypes_check(libc.utimensat(AT_FDCWD, os.fsencode(path), times, AT_SYMLINK_NOFOLLOW if nofollow else 0))
    return "OK"


def utimens_null(path):
    _ctypes_check(libc.utimensat(AT_FDCWD, os.fsencode(path), None, 0))
    return "OK"


class _StatxTimestamp(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_uint32), ("reserved", ctypes.c_int32)]


class _Statx(ctypes.Structure):
    _fields_ = [("stx_mask", ctypes.c_uint32), ("stx_blksize", ctypes.c_uint32), ("stx_attributes", ctypes.c_uint64),
                ("stx_nlink", ctypes.c_uint32), ("stx_uid", ctypes.c_uint32), ("stx_gid", ctypes.c_uint32),
                ("stx_mode", ctypes.c_uint16), ("spare0", ctypes.c_uint16), ("stx_ino", ctypes.c_uint64),
                ("stx_size", ctypes.c_uint64), ("stx_blocks", ctypes.c_uint64), ("stx_attributes_mask", ctypes.c_uint64),
                ("stx_atime", _StatxTimestamp), ("stx_btime", _StatxTimestamp), ("stx_ctime", _StatxTimestamp),
                ("stx_mtime", _StatxTimestamp), ("pad", ctypes.c_uint64 * 20)]


def statx_times(path):
    """(atime, mtime) in ns from statx(AT_STATX_FORCE_SYNC | AT_SYMLINK_NOFOLLOW): the file
    system is asked, whatever attributes a cache holds."""
    buf = _Statx()
    _ctypes_check(libc.statx(AT_FDCWD, os.fsencode(path), 0x2000 | AT_SYMLINK_NOFOLLOW, 0x7ff, ctypes.byref(buf)))
    ts = lambda t: t.tv_sec * 1_000_000_000 + t.tv_nsec
    return ts(buf.stx_atime), ts(buf.stx_mtime)


def bind_socket(path):
    import socket
    # sun_path holds 108 bytes: bind a relative name from inside the directory.
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.chdir(os.path.dirname(path))
        s.bind(os.path.basename(path))
    finally:
        s.close()
        os.fchdir(here)
        os.close(here)
    return "OK"


def fifo_open_nonblock(path, flags):
    return open_(path, flags | os.O_NONBLOCK)


# MARK: - The harness

class Actors:
    def __init__(self, users, self_mode):
        self.self_mode = self_mode
        if self_mode:
            me = (os.getuid(), os.getgid())
            self.ids = {"me": me}
            self.names = {me[0]: "me"}
            self.gnames = {me[1]: "me"}
        else:
            (u1, g1), (u2, g2) = users
            self.ids = {"root": (0, 0), "u1": (u1, g1), "u2": (u2, g2)}
            self.names = {0: "root", u1: "u1", u2: "u2"}
            self.gnames = {0: "root", g1: "g1", g2: "g2"}

    def uid(self, actor):
        return self.ids[actor][0]

    def gid(self, actor):
        return self.ids[actor][1]


class Test:
    def __init__(self, name, base, actors, me):
        self.name = name
        self.base = os.path.join(base, name.replace("/", "-").replace("(", "-").replace(")", ""))
        self.actors = actors
        self.me = me
        self.lines = []
        self.run_as(self.setup_actor(), mkdir, self.base, 0o755)
        if not actors.self_mode:
            self.run_as("root", chmod, self.base, 0o755)

    def setup_actor(self):
        return "me" if self.actors.self_mode else "root"

    def who(self, actor):
        if actor == "me" and not self.actors.self_mode:
            return self.me
        return actor

    def p(self, *parts):
        return os.path.join(self.base, *parts)

    def run_as(self, actor, fn, *args):
        actor = self.who(actor)
        uid, gid = self.actors.ids[actor]
        if (uid, gid) == (os.geteuid(), os.getegid()):
            try:
                return str(fn(*args))
            except OSError as e:
                return errno.errorcode.get(e.errno, "E%d" % e.errno)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                os.setgroups([])
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
                try:
                    out = str(fn(*args))
                except OSError as e:
                    out = errno.errorcode.get(e.errno, "E%d" % e.errno)
                os.write(w, out.encode("utf-8", "surrogateescape"))
            except BaseException as e:  # noqa: a harness failure must show, not hang
                os.write(w, ("HARNESS-ERROR %r" % e).encode())
            os._exit(0)
        os.close(w)
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(r)
        os.waitpid(pid, 0)
        return b"".join(chunks).decode("utf-8", "surrogateescape")

    def do(self, step, actor, fn, *args):
        result = self.run_as(actor, fn, *args)
        self.lines.append("%s: %s [%s]: %s" % (self.name, step, actor, result))
        return result

    # Setup helpers (as root, or as me in --self mode), recorded so a failed setup shows.
    def dir(self, rel, mode=0o755, owner=None, group=None):
        path = self.p(rel)
        self.do("setup mkdir " + rel, self.setup_actor(), mkdir, path, 0o700)
        self.own(rel, mode, owner, group)
        return path

    def file(self, rel, mode=0o644, owner=None, group=None, data=b""):
        path = self.p(rel)
        self.do("setup create " + rel, self.setup_actor(), open_write, path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, data, 0o600)
        self.own(rel, mode, owner, group)
        return path

    def own(self, rel, mode, owner, group):
        path = self.p(rel)
        if owner is not None or group is not None:
            uid = self.actors.uid(self.who(owner)) if owner else -1
            gid = self.actors.gid(self.who(group)) if group else -1
            self.do("setup chown " + rel, self.setup_actor(), chown, path, uid, gid)
        self.do("setup chmod " + rel, self.setup_actor(), chmod, path, mode)

    def stat_text(self, path, follow=False):
        try:
            st = os.stat(path) if follow else os.lstat(path)
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno))
        kind = filetype(st.st_mode)
        owner = self.actors.names.get(st.st_uid, "uid%d" % st.st_uid)
        group = self.actors.gnames.get(st.st_gid, "gid%d" % st.st_gid)
        text = "%s %04o %s:%s nlink=%d" % (kind, stat.S_IMODE(st.st_mode), owner, group, st.st_nlink)
        if kind in ("reg", "lnk"):
            text += " size=%d" % st.st_size
        if kind in ("chr", "blk"):
            text += " rdev=%d,%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        return text

    def st(self, step, rel_or_path, follow=False):
        path = rel_or_path if rel_or_path.startswith("/") else self.p(rel_or_path)
        self.lines.append("%s: stat %s: %s" % (self.name, step, self.stat_text(path, follow)))

    def times(self, path):
        st = os.lstat(path)
        return st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns

    def changes(self, step, actor, paths, fn, *args, settle=0.0):
        """Runs fn and records which of atime/mtime/ctime of each path changed. `settle`
        waits before the first look (whatever else reads a new directory has done so)."""
        # A (before, after) pair follows an item that the call renames.
        pairs = [p if isinstance(p, tuple) else (p, p) for p in paths]
        time.sleep(settle)
        before = [self.times(b) for b, _ in pairs]
        time.sleep(0.012)   # beyond any coarse clock tick
        result = self.run_as(actor, fn, *args)
        after = [self.times(a) if os.path.lexists(a) else None for _, a in pairs]
        parts = []
        for (_, p), b, a in zip(pairs, before, after):
            label = os.path.relpath(p, self.base)
            if a is None:
                parts.append("%s gone" % label)
                continue
            changed = [n for n, x, y in zip(("atime", "mtime", "ctime"), b, a) if x != y]
            parts.append("%s %s" % (label, "+".join(changed) if changed else "unchanged"))
        self.lines.append("%s: %s [%s]: %s; %s" % (self.name, step, actor, result, ", ".join(parts)))


def filetype(mode):
    for name, test in (("reg", stat.S_ISREG), ("dir", stat.S_ISDIR), ("lnk", stat.S_ISLNK),
                       ("fifo", stat.S_ISFIFO), ("sock", stat.S_ISSOCK), ("chr", stat.S_ISCHR),
                       ("blk", stat.S_ISBLK)):
        if test(mode):
            return name
    return "?"


TESTS = []


def test(name, single=False):
    def register(fn):
        TESTS.append((name, single, fn))
        return fn
    return register


LONG_NAME = "n" * 256
OK_NAME = "n" * 255


def long_path(t):
    # A path over PATH_MAX (4096) made of existing-looking components.
    return t.p(*(["d" * 200] * 21))


def set_id_after(t, name, mode, actor, label, fn, *args):
    """chmod `name` to `mode` as root, let `actor` run fn(*args), record the mode after."""
    t.do("chmod %04o before %s" % (mode, label), "root", chmod, t.p(name), mode)
    t.do(label, actor, fn, *args)
    t.st("mode after " + label, name)


# MARK: - chmod

@test("chmod/basic", single=True)
def _(t):
    f = t.file("f", 0o644, owner="me")
    for mode in (0o600, 0o755, 0o4755, 0o2755, 0o1755, 0o7777, 0o0):
        t.do("chmod %04o" % mode, "me", chmod, f, mode)
        t.st("after %04o" % mode, "f")
    d = t.dir("d", 0o755, owner="me")
    t.do("chmod dir 01777", "me", chmod, d, 0o1777)
    t.st("dir", "d")
    t.do("fchmod 0640", "me", fchmod_, f, 0o640)
    t.do("enoent", "me", chmod, t.p("missing"), 0o644)
    t.do("enotdir", "me", chmod, t.p("f", "x"), 0o644)
    t.do("enametoolong", "me", chmod, t.p(LONG_NAME), 0o644)
    t.do("path too long", "me", chmod, long_path(t), 0o644)
    t.do("symlink", "me", symlink, "f", t.p("l"))
    t.do("via symlink", "me", chmod, t.p("l"), 0o604)
    t.st("target", "f")
    t.st("link", "l")
    t.do("lchmod symlink", "me", lchmod, t.p("l"), 0o600)
    t.do("loop a", "me", symlink, "b", t.p("a"))
    t.do("loop b", "me", symlink, "a", t.p("b"))
    t.do("eloop", "me", chmod, t.p("a"), 0o644)
    t.changes("ctime", "me", [f], chmod, f, 0o644)


@test("chmod/permissions")
def _(t):
    t.dir("d", 0o755, owner="u1")
    f = t.file("d/f", 0o644, owner="u1")
    t.do("non-owner", "u2", chmod, f, 0o600)
    t.do("owner", "u1", chmod, f, 0o640)
    t.do("root on foreign", "root", chmod, f, 0o600)
    t.st("f", "d/f")
    # Setting S_ISGID on a file whose group the owner is not in: silently dropped.
    t.do("chgrp to g2", "root", chown, f, -1, t.actors.gid("u2"))
    t.do("owner sets 02755 (not in group)", "u1", chmod, f, 0o2755)
    t.st("sgid dropped", "d/f")
    t.do("root sets 02755", "root", chmod, f, 0o2755)
    t.st("sgid kept for root", "d/f")
    t.do("owner sets 01644 on file", "u1", chmod, f, 0o1644)
    t.st("sticky on file", "d/f")
    # No search permission on a component.
    t.dir("noexec", 0o600, owner="u1")
    t.do("setup file in noexec", "root", creat, t.p("noexec", "g"))
    t.do("eacces search", "u1", chmod, t.p("noexec", "g"), 0o600)
    t.do("root ignores search bits", "root", chmod, t.p("noexec", "g"), 0o600)


# MARK: - chown

@test("chown/root")
def _(t):
    f = t.file("f", 0o644)
    t.do("to u1:g1", "root", chown, f, t.actors.uid("u1"), t.actors.gid("u1"))
    t.st("f", "f")
    t.do("uid only", "root", chown, f, t.actors.uid("u2"), -1)
    t.st("uid only", "f")
    t.do("gid only", "root", chown, f, -1, 0)
    t.st("gid only", "f")
    t.do("-1 -1", "root", chown, f, -1, -1)
    t.st("unchanged", "f")
    t.do("chmod 06755", "root", chmod, f, 0o6755)
    t.do("chown clears set-id", "root", chown, f, t.actors.uid("u1"), -1)
    t.st("set-id after root chown", "f")
    t.do("chmod 06745", "root", chmod, f, 0o6745)
    t.do("chown clears suid, sgid without g+x stays", "root", chown, f, 0, -1)
    t.st("after", "f")
    d = t.dir("d", 0o2755)
    t.do("chown dir keeps sgid", "root", chown, d, t.actors.uid("u1"), t.actors.gid("u1"))
    t.st("dir", "d")
    t.do("symlink", "root", symlink, "f", t.p("l"))
    t.do("lchown link", "root", lchown, t.p("l"), t.actors.uid("u2"), t.actors.gid("u2"))
    t.st("link", "l")
    t.st("target untouched", "f")
    t.do("chown via link", "root", chown, t.p("l"), 0, 0)
    t.st("target", "f")
    t.do("enoent", "root", chown, t.p("missing"), 0, 0)
    t.do("enotdir", "root", chown, t.p("f", "x"), 0, 0)
    t.do("enametoolong", "root", chown, t.p(LONG_NAME), 0, 0)
    t.changes("ctime", "root", [f], chown, f, t.actors.uid("u1"), -1)


@test("chown/users")
def _(t):
    f = t.file("f", 0o644, owner="u1", group="u1")
    t.do("owner gives away", "u1", chown, f, t.actors.uid("u2"), -1)
    t.do("owner to foreign group", "u1", chown, f, -1, t.actors.gid("u2"))
    t.do("owner to own group", "u1", chown, f, -1, t.actors.gid("u1"))
    t.do("owner to own uid", "u1", chown, f, t.actors.uid("u1"), -1)
    t.do("non-owner -1 -1", "u2", chown, f, -1, -1)
    t.do("non-owner takes", "u2", chown, f, t.actors.uid("u2"), -1)
    t.do("non-owner group", "u2", chown, f, -1, t.actors.gid("u2"))
    t.st("f", "f")
    t.do("chmod 06755", "u1", chmod, f, 0o6755)
    t.do("owner chgrp own group clears set-id", "u1", chown, f, -1, t.actors.gid("u1"))
    t.st("after", "f")
    t.do("symlink", "u1", symlink, "f", t.p("l"))
    t.do("lchown by non-owner", "u2", lchown, t.p("l"), t.actors.uid("u2"), -1)
    t.dir("noexec", 0o600, owner="u1")
    t.file("noexec/g", 0o644, owner="u1")
    t.do("eacces search", "u1", chown, t.p("noexec", "g"), -1, t.actors.gid("u1"))


# MARK: - truncate and ftruncate

@test("truncate/basic", single=True)
def _(t):
    f = t.file("f", 0o644, owner="me", data=b"0123456789")
    t.do("shrink", "me", truncate, f, 4)
    t.st("4", "f")
    t.do("read", "me", read_all, f)
    t.do("grow", "me", truncate, f, 1 << 20)
    t.st("1M", "f")
    t.do("zero", "me", truncate, f, 0)
    t.st("0", "f")
    t.do("negative", "me", truncate, f, -1)
    t.do("enoent", "me", truncate, t.p("missing"), 0)
    t.do("enotdir", "me", truncate, t.p("f", "x"), 0)
    t.do("eisdir", "me", truncate, t.dir("d", owner="me"), 0)
    t.do("fifo", "me", mkfifo, t.p("fifo"))
    t.do("einval fifo", "me", truncate, t.p("fifo"), 0)
    t.do("enametoolong", "me", truncate, t.p(LONG_NAME), 0)
    t.do("readonly mode", "me", chmod, f, 0o444)
    t.do("no write permission", "me", truncate, f, 1)
    t.do("restore", "me", chmod, f, 0o644)
    t.do("symlink", "me", symlink, "f", t.p("l"))
    t.do("via symlink", "me", truncate, t.p("l"), 7)
    t.st("target 7", "f")
    t.changes("times", "me", [f], truncate, f, 3)
    t.changes("same size", "me", [f], truncate, f, 3)


@test("ftruncate/basic", single=True)
def _(t):
    f = t.file("f", 0o644, owner="me", data=b"0123456789")
    t.do("shrink", "me", ftruncate, f, 2)
    t.st("2", "f")
    t.do("grow", "me", ftruncate, f, 100000)
    t.st("100000", "f")
    t.do("read-only fd", "me", ftruncate, f, 0, os.O_RDONLY)
    t.do("rdwr fd", "me", ftruncate, f, 5, os.O_RDWR)
    t.do("negative", "me", ftruncate, f, -1)
    t.do("dir fd", "me", ftruncate, t.dir("d", owner="me"), 0, os.O_RDONLY)
    t.changes("times", "me", [f], ftruncate, f, 1)

    # ftruncate on a descriptor opened before the mode dropped write permission still works.
    def after_chmod(path):
        fd = os.open(path, os.O_WRONLY)
        try:
            os.chmod(path, 0o444)
            os.ftruncate(fd, 9)
        finally:
            os.close(fd)
        return "OK"
    t.do("after chmod 0444", "me", after_chmod, f)
    t.st("9", "f")


@test("truncate/permissions")
def _(t):
    f = t.file("f", 0o644, owner="u1", data=b"abc")
    t.do("non-owner, no write", "u2", truncate, f, 0)
    t.do("non-owner ftruncate open", "u2", ftruncate, f, 0)
    t.do("root", "root", truncate, f, 1)
    set_id_after(t, "f", 0o6777, "u2", "another user's truncate", truncate, f, 0)
    set_id_after(t, "f", 0o4777, "u2", "another user's ftruncate", ftruncate, f, 2)
    t.dir("noexec", 0o600, owner="u1")
    t.file("noexec/g", 0o666, owner="u1")
    t.do("eacces search", "u1", truncate, t.p("noexec", "g"), 0)


# MARK: - link

@test("link/basic", single=True)
def _(t):
    f = t.file("f", 0o644, owner="me", data=b"x")
    t.do("link", "me", link, f, t.p("g"))
    t.st("f", "f")
    t.st("g", "g")
    t.do("same inode", "me", lambda a, b: str(os.lstat(a).st_ino == os.lstat(b).st_ino), f, t.p("g"))
    t.do("eexist", "me", link, f, t.p("g"))
    t.do("eexist onto dir", "me", link, f, t.dir("d", owner="me"))
    t.do("dir source", "me", link, t.p("d"), t.p("d2"))
    t.do("enoent source", "me", link, t.p("missing"), t.p("h"))
    t.do("enoent target dir", "me", link, f, t.p("nodir", "h"))
    t.do("enotdir", "me", link, f, t.p("f", "h"))
    t.do("enametoolong", "me", link, f, t.p(LONG_NAME))
    t.do("symlink", "me", symlink, "f", t.p("l"))
    t.do("link symlink itself", "me", link, t.p("l"), t.p("l2"))
    t.st("l", "l")
    t.st("f after", "f")
    t.do("link following symlink", "me", link, t.p("l"), t.p("l3"), True)
    t.st("f after follow", "f")
    t.do("fifo", "me", mkfifo, t.p("fifo"))
    t.do("link fifo", "me", link, t.p("fifo"), t.p("fifo2"))
    t.st("fifo", "fifo")
    t.do("unlink g", "me", unlink, t.p("g"))
    t.st("f after unlink", "f")
    t.changes("times", "me", [f, t.base], link, f, t.p("k"))


@test("link/permissions")
def _(t):
    t.dir("d", 0o755, owner="u1")
    f = t.file("d/f", 0o644, owner="u1")
    t.dir("w", 0o777, owner="u1")
    t.do("no write on target dir", "u2", link, f, t.p("d", "g"))
    t.do("readable foreign file (protected_hardlinks)", "u2", link, f, t.p("w", "g"))
    t.do("chmod 0600", "root", chmod, f, 0o600)
    t.do("unreadable foreign file", "u2", link, f, t.p("w", "h"))
    t.do("owner", "u1", link, f, t.p("w", "h"))
    t.do("root", "root", link, f, t.p("w", "r"))
    t.st("f", "d/f")
    t.dir("noexec", 0o600, owner="u1")
    t.file("noexec/g", 0o644, owner="u1")
    t.do("eacces search", "u1", link, t.p("noexec", "g"), t.p("w", "x"))


# MARK: - mkdir

@test("mkdir/basic", single=True)
def _(t):
    for mode in (0o755, 0o700, 0o777, 0o1777, 0o2755, 0o4755, 0o0):
        name = "d%04o" % mode
        t.do("mkdir %04o" % mode, "me", mkdir, t.p(name), mode)
        t.st(name, name)
    t.st("parent nlink", t.base)
    t.do("eexist dir", "me", mkdir, t.p("d0755"))
    t.file("f", owner="me")
    t.do("eexist file", "me", mkdir, t.p("f"))
    t.do("symlink", "me", symlink, "nowhere", t.p("dangling"))
    t.do("eexist dangling symlink", "me", mkdir, t.p("dangling"))
    t.do("enoent", "me", mkdir, t.p("missing", "x"))
    t.do("enotdir", "me", mkdir, t.p("f", "x"))
    t.do("enametoolong", "me", mkdir, t.p(LONG_NAME))
    t.do("255 bytes", "me", mkdir, t.p(OK_NAME))
    t.do("path too long", "me", mkdir, long_path(t))
    t.do("trailing slash", "me", mkdir, t.p("slash") + "/")
    t.do("loop a", "me", symlink, "b", t.p("a"))
    t.do("loop b", "me", symlink, "a", t.p("b"))
    t.do("eloop", "me", mkdir, t.p("a", "x"))
    t.do("no write permission", "me", chmod, t.p("d0755"), 0o555)
    t.do("eacces", "me", mkdir, t.p("d0755", "x"))
    t.changes("times", "me", [t.base], mkdir, t.p("new"))

    # Nobody reads a directory just made: with relatime its atime stays its birth time
    # (a daemon that lists new directories behind the caller's back changes it).
    def untouched_atime(path):
        os.mkdir(path)
        time.sleep(0.2)
        a, m = statx_times(path)   # AT_STATX_FORCE_SYNC: no cached attributes
        return "atime==mtime" if a == m else "atime moved"
    t.do("new directory left alone", "me", untouched_atime, t.p("quiet"))


@test("mkdir/ownership")
def _(t):
    t.dir("w", 0o777)
    for actor in ("root", "u1", "u2"):
        t.do("mkdir as " + actor, actor, mkdir, t.p("w", actor), 0o777)
        t.st(actor, "w/" + actor)
    t.dir("sgid", 0o2777, group="u2")
    t.do("u1 in setgid dir of g2", "u1", mkdir, t.p("sgid", "sub"), 0o755)
    t.st("inherits group and sgid", "sgid/sub")
    t.do("u1 file in setgid dir", "u1", creat, t.p("sgid", "file"), 0o2755)
    t.st("file in setgid dir", "sgid/file")
    t.dir("ro", 0o755, owner="u1")
    t.do("no write", "u2", mkdir, t.p("ro", "x"))
    t.dir("noexec", 0o666, owner="u1")
    t.do("no search", "u1", mkdir, t.p("noexec", "x"))


# MARK: - mkfifo and mknod

@test("mkfifo/basic", single=True)
def _(t):
    t.do("mkfifo 0644", "me", mkfifo, t.p("p"), 0o644)
    t.st("p", "p")
    t.do("mkfifo 0777", "me", mkfifo, t.p("q"), 0o777)
    t.st("q (umask)", "q")
    t.do("eexist", "me", mkfifo, t.p("p"))
    t.do("enoent", "me", mkfifo, t.p("missing", "p"))
    t.file("f", owner="me")
    t.do("enotdir", "me", mkfifo, t.p("f", "p"))
    t.do("enametoolong", "me", mkfifo, t.p(LONG_NAME))
    t.do("open wronly nonblock, no reader", "me", fifo_open_nonblock, t.p("p"), os.O_WRONLY)
    t.do("open rdonly nonblock", "me", fifo_open_nonblock, t.p("p"), os.O_RDONLY)
    t.do("no write permission", "me", chmod, t.base, 0o555)
    t.do("eacces", "me", mkfifo, t.p("r"))
    t.do("restore", "me", chmod, t.base, 0o755)


@test("mknod/root")
def _(t):
    t.do("regular", "root", mknod, t.p("reg"), stat.S_IFREG | 0o644)
    t.st("reg", "reg")
    t.do("mode 0 type", "root", mknod, t.p("reg0"), 0o600)
    t.st("reg0", "reg0")
    t.do("fifo", "root", mknod, t.p("fifo"), stat.S_IFIFO | 0o644)
    t.st("fifo", "fifo")
    t.do("socket", "root", mknod, t.p("sock"), stat.S_IFSOCK | 0o644)
    t.st("sock", "sock")
    t.do("char device", "root", mknod, t.p("chr"), stat.S_IFCHR | 0o644, os.makedev(1, 3))
    t.st("chr", "chr")
    t.do("block device", "root", mknod, t.p("blk"), stat.S_IFBLK | 0o600, os.makedev(7, 200))
    t.st("blk", "blk")
    t.do("directory type", "root", mknod, t.p("dir"), stat.S_IFDIR | 0o755)
    t.do("symlink type", "root", mknod, t.p("lnk"), stat.S_IFLNK | 0o777)
    t.do("eexist", "root", mknod, t.p("fifo"), stat.S_IFIFO | 0o644)
    t.do("enoent", "root", mknod, t.p("missing", "x"), stat.S_IFIFO | 0o644)
    t.do("enotdir", "root", mknod, t.p("reg", "x"), stat.S_IFIFO | 0o644)
    t.do("enametoolong", "root", mknod, t.p(LONG_NAME), stat.S_IFIFO | 0o644)
    t.do("bind unix socket", "root", bind_socket, t.p("bound"))
    t.st("bound", "bound")
    t.do("unlink device", "root", unlink, t.p("chr"))


@test("mknod/users")
def _(t):
    t.dir("w", 0o777)
    t.do("u1 fifo", "u1", mknod, t.p("w", "fifo"), stat.S_IFIFO | 0o666)
    t.st("u1 fifo", "w/fifo")
    t.do("u1 regular", "u1", mknod, t.p("w", "reg"), stat.S_IFREG | 0o600)
    t.st("u1 reg", "w/reg")
    t.do("u1 char device", "u1", mknod, t.p("w", "chr"), stat.S_IFCHR | 0o644, os.makedev(1, 3))
    t.do("u1 block device", "u1", mknod, t.p("w", "blk"), stat.S_IFBLK | 0o644, os.makedev(7, 200))
    t.do("u1 socket", "u1", bind_socket, t.p("w", "sock"))
    t.st("u1 sock", "w/sock")
    t.dir("ro", 0o755, owner="u1")
    t.do("no write", "u2", mknod, t.p("ro", "x"), stat.S_IFIFO | 0o644)


# MARK: - open

@test("open/basic", single=True)
def _(t):
    f = t.p("f")
    t.do("creat 0644", "me", creat, f, 0o644)
    t.st("f", "f")
    t.do("creat 0777 (umask)", "me", creat, t.p("g"), 0o777)
    t.st("g", "g")
    t.do("creat 04755", "me", creat, t.p("s"), 0o4755)
    t.st("s", "s")
    t.do("O_EXCL existing", "me", creat, f, 0o644, os.O_EXCL)
    t.do("O_EXCL new", "me", creat, t.p("x"), 0o600, os.O_EXCL)
    t.do("symlink dangling", "me", symlink, "target", t.p("dl"))
    t.do("O_EXCL on dangling symlink", "me", creat, t.p("dl"), 0o644, os.O_EXCL)
    t.do("O_CREAT through dangling symlink", "me", creat, t.p("dl"), 0o644)
    t.st("created target", "target")
    t.do("enoent", "me", open_, t.p("missing"), os.O_RDONLY)
    t.do("enoent dir", "me", creat, t.p("missing", "f"))
    t.do("enotdir", "me", open_, t.p("f", "x"), os.O_RDONLY)
    t.do("enotdir creat", "me", creat, t.p("f", "x"))
    d = t.dir("d", owner="me")
    t.do("dir O_RDONLY", "me", open_, d, os.O_RDONLY)
    t.do("dir O_WRONLY", "me", open_, d, os.O_WRONLY)
    t.do("dir O_RDWR", "me", open_, d, os.O_RDWR)
    t.do("dir O_CREAT", "me", open_, d, os.O_CREAT | os.O_RDONLY)
    t.do("dir O_TRUNC", "me", open_, d, os.O_RDONLY | os.O_TRUNC)
    t.do("O_DIRECTORY file", "me", open_, f, os.O_RDONLY | os.O_DIRECTORY)
    t.do("O_DIRECTORY|O_CREAT", "me", open_, t.p("dc"), os.O_RDONLY | os.O_DIRECTORY | os.O_CREAT)
    t.do("symlink", "me", symlink, "f", t.p("l"))
    t.do("O_NOFOLLOW symlink", "me", open_, t.p("l"), os.O_RDONLY | os.O_NOFOLLOW)
    t.do("follows symlink", "me", open_, t.p("l"), os.O_RDONLY)
    t.do("loop a", "me", symlink, "b", t.p("a"))
    t.do("loop b", "me", symlink, "a", t.p("b"))
    t.do("eloop", "me", open_, t.p("a"), os.O_RDONLY)
    t.do("eloop creat", "me", creat, t.p("a"))
    t.do("enametoolong", "me", creat, t.p(LONG_NAME))
    t.do("255 bytes", "me", creat, t.p(OK_NAME))
    t.do("path too long", "me", creat, long_path(t))
    t.do("write data", "me", open_write, f, os.O_WRONLY, b"hello world")
    t.do("O_TRUNC", "me", open_, f, os.O_WRONLY | os.O_TRUNC)
    t.st("truncated", "f")
    t.do("write data", "me", open_write, f, os.O_WRONLY, b"hello")
    t.do("O_APPEND", "me", open_write, f, os.O_WRONLY | os.O_APPEND, b" world")
    t.do("read", "me", read_all, f)
    t.do("O_RDONLY|O_TRUNC", "me", open_, f, os.O_RDONLY | os.O_TRUNC)
    t.st("after O_RDONLY|O_TRUNC", "f")
    t.do("chmod 0444", "me", chmod, f, 0o444)
    t.do("O_WRONLY on 0444", "me", open_, f, os.O_WRONLY)
    t.do("O_RDONLY|O_TRUNC on 0444", "me", open_, f, os.O_RDONLY | os.O_TRUNC)
    t.do("chmod 0222", "me", chmod, f, 0o222)
    t.do("O_RDONLY on 0222", "me", open_, f, os.O_RDONLY)
    t.do("O_WRONLY on 0222", "me", open_, f, os.O_WRONLY)
    t.do("chmod 0", "me", chmod, f, 0)
    t.do("O_RDWR on 0000", "me", open_, f, os.O_RDWR)
    t.do("creat existing 0000", "me", creat, f)
    t.do("fifo", "me", mkfifo, t.p("fifo"))
    t.do("fifo O_WRONLY|O_NONBLOCK", "me", fifo_open_nonblock, t.p("fifo"), os.O_WRONLY)
    t.do("no write permission", "me", chmod, d, 0o555)
    t.do("eacces creat", "me", creat, t.p("d", "x"))
    t.changes("creat times", "me", [t.base], creat, t.p("new"))
    t.changes("O_TRUNC times", "me", [t.p("new")], open_write, t.p("new"), os.O_WRONLY | os.O_TRUNC, b"")


@test("open/permissions")
def _(t):
    t.dir("d", 0o755, owner="u1")
    f = t.file("d/f", 0o600, owner="u1", data=b"secret")
    g = t.file("d/g", 0o644, owner="u1", data=b"public")
    t.do("foreign 0600 read", "u2", open_, f, os.O_RDONLY)
    t.do("foreign 0644 read", "u2", open_, g, os.O_RDONLY)
    t.do("foreign 0644 write", "u2", open_, g, os.O_WRONLY)
    t.do("foreign 0644 O_TRUNC", "u2", open_, g, os.O_RDONLY | os.O_TRUNC)
    t.do("creat in foreign 0755 dir", "u2", creat, t.p("d", "x"))
    t.do("O_CREAT on existing foreign file", "u2", open_, g, os.O_CREAT | os.O_RDONLY)
    t.do("root 0600 read", "root", open_, f, os.O_RDWR)
    t.do("root 0000", "root", chmod, f, 0)
    t.do("root opens 0000", "root", open_, f, os.O_RDWR)
    t.dir("noexec", 0o600, owner="u1")
    t.file("noexec/h", 0o644, owner="u1")
    t.do("eacces search", "u1", open_, t.p("noexec", "h"), os.O_RDONLY)
    t.dir("sticky", 0o1777)
    t.do("u1 creates in sticky", "u1", creat, t.p("sticky", "mine"), 0o666)
    t.do("u2 writes u1's 0666 in sticky", "u2", open_, t.p("sticky", "mine"), os.O_WRONLY)
    t.do("u2 O_CREAT u1's 0644 in sticky", "u1", chmod, t.p("sticky", "mine"), 0o644)
    t.do("u2 O_CREAT existing", "u2", open_, t.p("sticky", "mine"), os.O_CREAT | os.O_RDONLY)
    t.do("u2 writes", "u2", open_write, g, os.O_WRONLY, b"x")


# MARK: - write (set-ID bits: what FUSE_HANDLE_KILLPRIV_V2 hands to the file system)

def pwrite_(path, data, offset=0):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)
    return "OK"


def copy_range_(src, dst):
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_WRONLY)
    try:
        return str(os.copy_file_range(fi, fo, 2, 0, 0))
    finally:
        os.close(fi)
        os.close(fo)


def fallocate_(path, length):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.posix_fallocate(fd, 0, length)
    finally:
        os.close(fd)
    return "OK"


@test("write/set-id")
def _(t):
    f = t.file("f", 0o644, owner="u1", data=b"0123456789")
    set_id_after(t, "f", 0o6777, "u2", "another user's write", pwrite_, f, b"a")
    set_id_after(t, "f", 0o6777, "u1", "the owner's write", pwrite_, f, b"b", 4)
    set_id_after(t, "f", 0o6767, "u2", "a write to sgid without g+x", pwrite_, f, b"c", 8)
    set_id_after(t, "f", 0o6777, "root", "root's write", pwrite_, f, b"d")
    t.do("second write keeps cleared bits", "u2", pwrite_, f, b"e", 2)
    t.do("read back", "root", read_all, f)
    g = t.file("g", 0o644, owner="u1", data=b"abc")
    set_id_after(t, "g", 0o4777, "u2", "another user's O_TRUNC", open_, g, os.O_WRONLY | os.O_TRUNC)
    set_id_after(t, "g", 0o4777, "root", "root's O_TRUNC", open_, g, os.O_WRONLY | os.O_TRUNC)
    set_id_after(t, "g", 0o2777, "u2", "another user's append", open_write, g, os.O_WRONLY | os.O_APPEND, b"tail")
    h = t.file("h", 0o666, owner="u1", data=b"0123456789")
    set_id_after(t, "h", 0o6777, "u2", "another user's copy_file_range", copy_range_, g, h)
    set_id_after(t, "h", 0o6777, "u2", "another user's fallocate", fallocate_, h, 64)
    set_id_after(t, "h", 0o6777, "root", "root's fallocate", fallocate_, h, 128)


# MARK: - rename

@test("rename/basic", single=True)
def _(t):
    f = t.file("f", owner="me", data=b"f")
    ino = os.lstat(f).st_ino
    t.do("rename", "me", rename, f, t.p("g"))
    t.do("keeps inode", "me", lambda p: str(os.lstat(p).st_ino == ino), t.p("g"))
    t.do("old gone", "me", open_, f, os.O_RDONLY)
    t.file("h", owner="me", data=b"h")
    t.do("over file", "me", rename, t.p("g"), t.p("h"))
    t.do("content", "me", read_all, t.p("h"))
    t.do("enoent", "me", rename, t.p("missing"), t.p("x"))
    t.do("enoent target dir", "me", rename, t.p("h"), t.p("nodir", "x"))
    t.dir("d", owner="me")
    t.dir("e", owner="me")
    t.do("dir over empty dir", "me", rename, t.p("d"), t.p("e"))
    t.dir("d", owner="me")
    t.file("e/child", owner="me")
    t.do("dir over non-empty dir", "me", rename, t.p("d"), t.p("e"))
    t.do("file over dir", "me", rename, t.p("h"), t.p("d"))
    t.do("dir over file", "me", rename, t.p("d"), t.p("h"))
    t.do("dir into itself", "me", rename, t.p("d"), t.p("d", "sub"))
    t.do("dir into own subdir", "me", rename, t.p("e"), t.p("e", "child2"))
    t.do("dot", "me", rename, t.p("d", "."), t.p("x"))
    t.do("dotdot", "me", rename, t.p("d", ".."), t.p("x"))
    t.do("onto dot", "me", rename, t.p("h"), t.p("d", "."))
    t.do("same name", "me", rename, t.p("h"), t.p("h"))
    t.do("hard link pair", "me", link, t.p("h"), t.p("h2"))
    t.do("onto own hard link", "me", rename, t.p("h"), t.p("h2"))
    t.st("h", "h")
    t.st("h2", "h2")
    t.do("enotdir", "me", rename, t.p("h", "x"), t.p("y"))
    t.do("enametoolong", "me", rename, t.p("h"), t.p(LONG_NAME))
    t.do("symlink", "me", symlink, "h", t.p("l"))
    t.do("rename symlink", "me", rename, t.p("l"), t.p("l2"))
    t.st("l2", "l2")
    t.st("h untouched", "h")
    t.st("parent before dir move", t.base)
    t.do("move dir down", "me", rename, t.p("d"), t.p("e", "d"))
    t.st("parent after dir move", t.base)
    t.st("e after", "e")
    t.do("noreplace existing", "me", renameat2, t.p("h"), t.p("h2"), RENAME_NOREPLACE)
    t.do("noreplace new", "me", renameat2, t.p("h2"), t.p("h3"), RENAME_NOREPLACE)
    t.do("exchange file and dir", "me", renameat2, t.p("h3"), t.p("e"), RENAME_EXCHANGE)
    t.st("e is file", "e")
    t.st("h3 is dir", "h3")
    t.do("exchange with missing", "me", renameat2, t.p("h3"), t.p("nothing"), RENAME_EXCHANGE)
    t.do("both flags", "me", renameat2, t.p("h3"), t.p("e"), RENAME_EXCHANGE | RENAME_NOREPLACE)
    t.file("m", owner="me")
    t.changes("times", "me", [(t.p("m"), t.p("m2")), t.base], rename, t.p("m"), t.p("m2"))
    t.dir("md", owner="me")
    t.dir("target", owner="me")
    t.changes("dir times", "me", [(t.p("md"), t.p("target", "md")), t.base, t.p("target")],
              rename, t.p("md"), t.p("target", "md"), settle=0.5)


@test("rename/permissions")
def _(t):
    t.dir("a", 0o755, owner="u1")
    t.dir("b", 0o777, owner="u1")
    t.file("a/f", 0o644, owner="u1")
    t.do("no write on source dir", "u2", rename, t.p("a", "f"), t.p("b", "f"))
    t.file("b/g", 0o644, owner="u1")
    t.do("no write on target dir", "u2", rename, t.p("b", "g"), t.p("a", "g"))
    t.do("within writable dir", "u2", rename, t.p("b", "g"), t.p("b", "g2"))
    t.dir("s", 0o1777)
    t.file("s/u1file", 0o644, owner="u1")
    t.do("sticky: foreign file", "u2", rename, t.p("s", "u1file"), t.p("s", "x"))
    t.do("sticky: own file", "u1", rename, t.p("s", "u1file"), t.p("s", "mine"))
    t.file("s/u2file", 0o644, owner="u2")
    t.do("sticky: over foreign file", "u2", rename, t.p("s", "u2file"), t.p("s", "mine"))
    t.do("sticky: root", "root", rename, t.p("s", "mine"), t.p("s", "root"))
    # Moving a directory to another parent needs write permission on it (its ..).
    t.dir("b/sub", 0o755, owner="u2")
    t.dir("c", 0o777, owner="u1")
    t.do("foreign dir to other parent", "u1", rename, t.p("b", "sub"), t.p("c", "sub"))
    t.do("foreign dir same parent", "u1", rename, t.p("b", "sub"), t.p("b", "sub2"))
    t.dir("noexec", 0o600, owner="u1")
    t.file("noexec/h", 0o644, owner="u1")
    t.do("eacces search", "u1", rename, t.p("noexec", "h"), t.p("c", "h"))


# MARK: - rmdir

@test("rmdir/basic", single=True)
def _(t):
    t.dir("d", owner="me")
    t.st("parent before", t.base)
    t.do("rmdir", "me", rmdir, t.p("d"))
    t.st("parent after", t.base)
    t.do("enoent", "me", rmdir, t.p("d"))
    t.dir("e", owner="me")
    t.file("e/f", owner="me")
    t.do("enotempty", "me", rmdir, t.p("e"))
    t.do("enotdir file", "me", rmdir, t.p("e", "f"))
    t.do("enotdir component", "me", rmdir, t.p("e", "f", "x"))
    t.do("dot", "me", rmdir, t.p("e", "."))
    t.do("dotdot", "me", rmdir, t.p("e", ".."))
    t.do("symlink", "me", symlink, "e", t.p("l"))
    t.do("symlink to dir", "me", rmdir, t.p("l"))
    t.do("enametoolong", "me", rmdir, t.p(LONG_NAME))
    t.dir("ro", 0o755, owner="me")
    t.dir("ro/x", owner="me")
    t.do("no write", "me", chmod, t.p("ro"), 0o555)
    t.do("eacces", "me", rmdir, t.p("ro", "x"))
    t.dir("y", owner="me")
    t.changes("times", "me", [t.base], rmdir, t.p("y"))


@test("rmdir/permissions")
def _(t):
    t.dir("s", 0o1777)
    t.dir("s/u1dir", 0o777, owner="u1")
    t.do("sticky: foreign dir", "u2", rmdir, t.p("s", "u1dir"))
    t.do("sticky: own dir", "u1", rmdir, t.p("s", "u1dir"))
    t.dir("o", 0o1777, owner="u2")
    t.dir("o/u1dir", 0o755, owner="u1")
    t.do("sticky: dir owner removes", "u2", rmdir, t.p("o", "u1dir"))
    t.dir("p", 0o755, owner="u1")
    t.dir("p/x", 0o777, owner="u2")
    t.do("no write on parent", "u2", rmdir, t.p("p", "x"))


# MARK: - symlink

@test("symlink/basic", single=True)
def _(t):
    t.do("symlink", "me", symlink, "target", t.p("l"))
    t.st("l", "l")
    t.do("readlink", "me", readlink, t.p("l"))
    t.do("absolute", "me", symlink, "/etc/hostname", t.p("abs"))
    t.do("readlink absolute", "me", readlink, t.p("abs"))
    t.do("eexist symlink", "me", symlink, "x", t.p("l"))
    t.file("f", owner="me")
    t.do("eexist file", "me", symlink, "x", t.p("f"))
    t.do("enoent", "me", symlink, "x", t.p("missing", "l"))
    t.do("enotdir", "me", symlink, "x", t.p("f", "l"))
    t.do("enametoolong name", "me", symlink, "x", t.p(LONG_NAME))
    t.do("4095-byte target", "me", symlink, "t" * 4095, t.p("long"))
    t.st("long", "long")
    t.do("4096-byte target", "me", symlink, "t" * 4096, t.p("toolong"))
    t.do("empty target", "me", symlink, "", t.p("empty"))
    t.do("readlink file", "me", readlink, t.p("f"))
    t.dir("ro", 0o555, owner="me")
    t.do("eacces", "me", symlink, "x", t.p("ro", "l"))
    t.changes("times", "me", [t.base], symlink, "x", t.p("new"))


@test("symlink/ownership")
def _(t):
    t.dir("w", 0o777)
    for actor in ("root", "u1", "u2"):
        t.do("as " + actor, actor, symlink, "target", t.p("w", actor))
        t.st(actor, "w/" + actor)
    t.dir("ro", 0o755, owner="u1")
    t.do("no write", "u2", symlink, "x", t.p("ro", "l"))


# MARK: - unlink

@test("unlink/basic", single=True)
def _(t):
    f = t.file("f", owner="me")
    t.do("unlink", "me", unlink, f)
    t.do("enoent", "me", unlink, f)
    t.dir("d", owner="me")
    t.do("eisdir", "me", unlink, t.p("d"))
    t.file("g", owner="me")
    t.do("enotdir", "me", unlink, t.p("g", "x"))
    t.do("enametoolong", "me", unlink, t.p(LONG_NAME))
    t.do("symlink", "me", symlink, "g", t.p("l"))
    t.do("unlink symlink", "me", unlink, t.p("l"))
    t.st("target stays", "g")
    t.do("fifo", "me", mkfifo, t.p("p"))
    t.do("unlink fifo", "me", unlink, t.p("p"))
    t.do("socket", "me", bind_socket, t.p("s"))
    t.do("unlink socket", "me", unlink, t.p("s"))
    t.do("link", "me", link, t.p("g"), t.p("g2"))
    t.changes("other link", "me", [t.p("g"), t.base], unlink, t.p("g2"))
    t.st("nlink back to 1", "g")
    t.dir("ro", 0o755, owner="me")
    t.file("ro/x", owner="me")
    t.do("no write", "me", chmod, t.p("ro"), 0o555)
    t.do("eacces", "me", unlink, t.p("ro", "x"))


@test("unlink/permissions")
def _(t):
    t.dir("s", 0o1777)
    t.file("s/u1file", 0o666, owner="u1")
    t.do("sticky: foreign file", "u2", unlink, t.p("s", "u1file"))
    t.do("sticky: root", "root", unlink, t.p("s", "u1file"))
    t.file("s/u1b", 0o644, owner="u1")
    t.do("sticky: own file", "u1", unlink, t.p("s", "u1b"))
    t.dir("o", 0o1777, owner="u2")
    t.file("o/u1file", 0o644, owner="u1")
    t.do("sticky: dir owner", "u2", unlink, t.p("o", "u1file"))
    t.dir("p", 0o755, owner="u1")
    t.file("p/x", 0o666, owner="u2")
    t.do("no write on parent", "u2", unlink, t.p("p", "x"))
    t.dir("w", 0o777, owner="u1")
    t.file("w/x", 0o600, owner="u1")
    t.do("writable parent, foreign file", "u2", unlink, t.p("w", "x"))


# MARK: - utimensat

@test("utimensat/basic", single=True)
def _(t):
    f = t.file("f", owner="me")

    def get(path):
        st = os.lstat(path)
        return "%d %d" % (st.st_atime_ns, st.st_mtime_ns)
    t.do("set both", "me", utimens, f, (1000000000, 123456789), (1200000000, 987654321))
    t.do("values", "me", get, f)
    t.do("ns 0", "me", utimens, f, (5, 0), (7, 0))
    t.do("values", "me", get, f)
    t.do("atime only", "me", utimens, f, (42, 1), "omit")
    t.do("values", "me", get, f)
    t.do("mtime only", "me", utimens, f, "omit", (43, 2))
    t.do("values", "me", get, f)
    t.changes("omit omit", "me", [f], utimens, f, "omit", "omit")
    t.changes("now now", "me", [f], utimens, f, "now", "now")
    t.changes("now omit", "me", [f], utimens, f, "now", "omit")
    t.changes("omit now", "me", [f], utimens, f, "omit", "now")
    t.changes("NULL", "me", [f], utimens_null, f)
    t.do("large", "me", utimens, f, (2 ** 33, 0), (2 ** 33 + 1, 0))
    t.do("values", "me", get, f)
    t.do("negative", "me", utimens, f, (-1, 0), (-100, 500))
    t.do("values", "me", get, f)
    t.do("bad nsec", "me", utimens, f, (1, 1000000000), (1, 0))
    t.do("negative nsec", "me", utimens, f, (1, -5), (1, 0))
    t.do("enoent", "me", utimens, t.p("missing"), "now", "now")
    t.do("enotdir", "me", utimens, t.p("f", "x"), "now", "now")
    t.do("enametoolong", "me", utimens, t.p(LONG_NAME), "now", "now")
    t.do("symlink", "me", symlink, "f", t.p("l"))
    t.do("nofollow", "me", utimens, t.p("l"), (50, 0), (60, 0), True)
    t.do("link values", "me", get, t.p("l"))
    t.do("target untouched", "me", get, f)
    t.do("follow", "me", utimens, t.p("l"), (70, 0), (80, 0))
    t.do("target values", "me", get, f)
    t.do("dir", "me", utimens, t.dir("d", owner="me"), (90, 0), (91, 0))
    t.do("dir values", "me", get, t.p("d"))


@test("utimensat/permissions")
def _(t):
    t.dir("d", 0o755)
    w = t.file("d/w", 0o666, owner="u1")
    r = t.file("d/r", 0o644, owner="u1")
    t.do("writer, not owner, now", "u2", utimens, w, "now", "now")
    t.do("writer, not owner, explicit", "u2", utimens, w, (1, 0), (2, 0))
    t.do("writer, not owner, now+omit", "u2", utimens, w, "now", "omit")
    t.do("writer, not owner, omit omit", "u2", utimens, w, "omit", "omit")
    t.do("non-writer, now", "u2", utimens, r, "now", "now")
    t.do("non-writer, NULL", "u2", utimens_null, r)
    t.do("non-writer, explicit", "u2", utimens, r, (1, 0), (2, 0))
    t.do("non-writer, omit omit", "u2", utimens, r, "omit", "omit")
    t.do("owner, explicit", "u1", utimens, r, (3, 0), (4, 0))
    t.do("owner of 0000, now", "u1", chmod, r, 0)
    t.do("owner of 0000 file, now", "u1", utimens, r, "now", "now")
    t.do("root, explicit", "root", utimens, r, (5, 0), (6, 0))


def main():
    args = sys.argv[1:]
    if not args:
        raise SystemExit(__doc__)
    base = os.path.abspath(args[0])
    self_mode = "--self" in args
    users = None
    if not self_mode:
        if os.geteuid() != 0:
            raise SystemExit("conformance.py: --users mode runs as root")
        spec = args[args.index("--users") + 1]
        users = [tuple(int(x) for x in part.split(":")) for part in spec.split(",")]
    os.umask(0o022)
    actors = Actors(users, self_mode)
    only = os.environ.get("CONFORMANCE_ONLY")
    for name, single, fn in TESTS:
        if only and only not in name:
            continue
        if self_mode and not single:
            continue
        runs = [None] if self_mode or not single else ["root", "u1"]
        for me in runs:
            t = Test(name if me is None else "%s(%s)" % (name, me), base, actors, me)
            # single tests: the test directory belongs to `me`
            if me not in (None, "root"):
                t.run_as("root", chown, t.base, actors.uid(me), actors.gid(me))
            fn(t)
            for line in t.lines:
                print(line)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
