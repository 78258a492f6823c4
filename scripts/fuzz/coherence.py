#!/usr/bin/env python3
"""Randomized coherence fuzzer for ContainerFS: the mount against its store.

Interleaves changes made through the mount ("M") and directly in the store ("S") on a few
names (files f0..f4, d0/f5, d0/f6, d1/f7, directories d0, d1), holds files open on either
side (plain, O_APPEND, shared mmap), and after each burst checks that the mount shows what
the store holds: an open and read now (strict), then `stat`, listings and xattrs, polled
for a settle window (DESIGN.md 14, 22, 27 say what may lag and by how much). A difference
is a FINDING, logged with the burst that preceded it.

Every operation is logged (JSON lines) with all its parameters, so a run can be replayed
exactly (timing aside) and shrunk:

  coherence.py run    --seed N --steps K [--writeback] [--log FILE]
  coherence.py replay LOG [--writeback] [--upto N] [--repeat R]
  coherence.py shrink LOG [--writeback] [--kind KIND]   (delta-debugs LOG's operations)

`--no-ptruncate` leaves out truncate(2) by path in the store (left before opens compared
the content, DESIGN.md 14). `--lenient-held` does not check the content of a file a program
in the store holds open and wrote (seen only at its close before opens compared the
content), nor, while the mount holds a file open for writing, a change no event tells of yet
(a held writer's write, a truncate(2) by path: missed before each WRITE checked the state;
under --writeback, where the WRITEs check nothing, such files are never checked). `--skip-known-nlink` leaves out the link counts of
hard-linked files, which early builds did not show changed in the store; for comparing
with runs of that time.
`$FUZZ_OPTIONS`: more mount options for every mount, comma-separated (`passthrough`,
`uring`: the opt-in modes of DESIGN.md 29 and 31, whose checks are the default mount's).
Root, a built binary ($CONTAINERFS, default .build/debug/containerfs) and a scratch
directory ($FUZZ_DIR, default /var/tmp/containerfs-fuzz) are needed. Not part of the test
suite: its races depend on timing, so a finding is replayed and made a test of its own.
"""
import errno, json, mmap, os, random, shutil, subprocess, sys, time, argparse

BASE = os.environ.get('FUZZ_DIR', '/var/tmp/containerfs-fuzz')
B = os.environ.get('CONTAINERFS', os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../.build/debug/containerfs'))
STORE = BASE + '/store'
MNT = BASE + '/mnt'
APP = 'com.example.fz'
MDOC = MNT + '/containers/' + APP + '/Documents'
SDOC = STORE + '/containers/' + APP + '/Documents'
FILES = ['f0', 'f1', 'f2', 'f3', 'f4', 'd0/f5', 'd0/f6', 'd1/f7']
DIRS = ['d0', 'd1']
ALL = DIRS + FILES
MODES = [0o644, 0o600, 0o755, 0o444, 0o640, 0o4755, 0o2750]
XK = ['user.a', 'user.b']
SETTLE = 0.5       # stat/ls/xattr settle window
EVENTUAL = 3.0     # how long to keep looking after the settle window

WB = False
PTRUNC = True
KNOWN_NLINK = False
LENIENT_HELD = False
QUIET = False


def sh(cmd, t=30, check=True):
    r = subprocess.run(['timeout', str(t)] + cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError('%s -> %d %s %s' % (cmd, r.returncode, r.stdout, r.stderr))
    return r


def is_mounted():
    return subprocess.run(['mountpoint', '-q', MNT]).returncode == 0


def unmount():
    if not is_mounted():
        return
    r = sh(['fusermount3', '-u', MNT], t=20, check=False)
    if r.returncode != 0 and is_mounted():
        dev = subprocess.run(['mountpoint', '-d', MNT], capture_output=True, text=True).stdout.strip()
        minor = dev.split(':')[1]
        try:
            open('/sys/fs/fuse/connections/%s/abort' % minor, 'w').write('1')
        except OSError:
            pass
        sh(['umount', '-l', MNT], check=False)
    for _ in range(100):
        if not is_mounted():
            break
        time.sleep(0.05)


def fresh_mount(writeback):
    unmount()
    # wait for the previous daemon to go (it holds the store lock)
    time.sleep(0.1)
    for _ in range(50):
        shutil.rmtree(STORE, ignore_errors=True)
        if not os.path.exists(STORE):
            break
        time.sleep(0.05)
    os.makedirs(STORE)
    os.makedirs(MNT, exist_ok=True)
    extra = [o for o in os.environ.get('FUZZ_OPTIONS', '').split(',') if o]
    opts = ['-o', ','.join((['writeback'] if writeback else []) + extra)] if writeback or extra else []
    for attempt in range(20):
        r = sh([B, 'mount', STORE, MNT] + opts, check=False)
        if r.returncode == 0:
            break
        time.sleep(0.25)
    else:
        raise RuntimeError('mount failed: %s' % r.stderr)
    sh([B, 'container', 'create', APP, '--store', STORE])
    assert os.path.isdir(MDOC) and os.path.isdir(SDOC)


def payload(tag, n):
    s = (tag + '|').encode()
    return (s * (n // len(s) + 1))[:n]


# ---------------------------------------------------------------- generator

class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.n = 0

    def size(self):
        r = self.r.random()
        if r < 0.5:
            return self.r.randint(0, 300)
        if r < 0.85:
            return self.r.randint(300, 5000)
        return self.r.randint(5000, 70000)

    def next_ops(self, st):
        """A burst: 1..4 ops, then a check.  st: Runner (to look at held slots)."""
        r = self.r
        ops = []
        k = r.choice([1, 1, 1, 2, 3, 4])
        for _ in range(k):
            self.n += 1
            side = 'S' if r.random() < 0.5 else 'M'
            op = self.gen_op(side, st)
            op['tag'] = 's%d' % self.n
            # keep mount-side dirty pages out of the way of outside edits of that file
            if side == 'S':
                for slot in st.dirty_slots_for(op):
                    ops.append({'side': 'M', 'op': 'hsync', 'slot': slot, 'tag': 's%da' % self.n})
            ops.append(op)
            if r.random() < 0.3:
                ops.append({'op': 'sleep', 'ms': r.choice([0, 0.2, 1, 2, 5])})
        ops.append({'op': 'check'})
        return ops

    def gen_op(self, side, st):
        r = self.r
        f = r.choice(FILES)
        g = r.choice(FILES)
        kinds = ['create', 'write', 'append', 'truncate', 'chmod', 'rename', 'unlink',
                 'mkdir', 'rmdir', 'link', 'setxattr', 'rmxattr', 'utime', 'renamedir']
        w = [8, 10, 6, 5, 4, 7, 5, 2, 2, 3, 3, 1, 3, 1]
        if side == 'S':
            kinds += ['replace', 'shold', 'shwrite', 'shclose']
            w += [8, 2, 4, 3]
        else:
            kinds += ['hold', 'hwrite', 'hread', 'hsync', 'htrunc', 'hclose']
            w += [3, 5, 2, 2, 1, 3]
        k = r.choices(kinds, w)[0]
        op = {'side': side, 'op': k}
        if k in ('create', 'replace'):
            op.update(path=f, n=self.size(), mode=r.choice([0o644, 0o644, 0o600]))
        elif k == 'write':
            op.update(path=f, off=r.randint(0, 6000), n=self.size())
        elif k == 'append':
            op.update(path=f, n=self.size())
        elif k == 'truncate':
            op.update(path=f, len=r.choice([0, r.randint(0, 8000), r.randint(0, 100000)]))
            # store side: by path (truncate(2), no close) or through a descriptor
            if side == 'S':
                op['how'] = 'path' if (PTRUNC and r.random() < 0.5) else 'fd'
        elif k == 'chmod':
            op.update(path=r.choice(ALL + FILES), mode=r.choice(MODES))
        elif k == 'rename':
            op.update(src=f, dst=g)
        elif k == 'unlink':
            op.update(path=f)
        elif k in ('mkdir', 'rmdir'):
            op.update(path=r.choice(DIRS))
        elif k == 'renamedir':
            op.update(src=r.choice(DIRS), dst=r.choice(DIRS + ['d0/x', 'dz']))
            if op['dst'] == 'dz':
                op['dst'] = op['src']  # no-op candidates avoided below
                op['dst'] = 'd1' if op['src'] == 'd0' else 'd0'
        elif k == 'link':
            op.update(src=f, dst=g)
        elif k == 'setxattr':
            op.update(path=r.choice(ALL + FILES), key=r.choice(XK), n=r.randint(0, 40))
        elif k == 'rmxattr':
            op.update(path=r.choice(ALL + FILES), key=r.choice(XK))
        elif k == 'utime':
            op.update(path=r.choice(ALL + FILES),
                      mt=r.randint(1_000_000_000, 1_700_000_000) * 10**9 + r.randint(0, 10**9 - 1))
        elif k == 'hold':
            op.update(slot=r.randint(0, 2), path=f, how=r.choice(['r', 'rw', 'a', 'mm', 'mmr']))
        elif k in ('hwrite', 'hread', 'hsync', 'htrunc', 'hclose'):
            op.update(slot=r.choice(sorted(st.mh)) if st.mh and r.random() < 0.9 else r.randint(0, 2), off=r.randint(0, 6000), n=self.size(),
                      len=r.randint(0, 9000))
        elif k == 'shold':
            op.update(slot=r.randint(0, 1), path=f)
        elif k in ('shwrite', 'shclose'):
            op.update(slot=r.choice(sorted(st.sh)) if st.sh and r.random() < 0.9 else r.randint(0, 1), off=r.randint(0, 6000), n=self.size())
        return op


# ---------------------------------------------------------------- runner

def sstat(p):
    try:
        return os.lstat(p)
    except OSError:
        return None


def read_all(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        out = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            out.append(b)
        return b''.join(out)
    finally:
        os.close(fd)


def xattrs(p):
    try:
        ks = sorted(k for k in os.listxattr(p, follow_symlinks=False) if k.startswith('user.'))
        return tuple((k, os.getxattr(p, k, follow_symlinks=False)) for k in ks)
    except OSError as e:
        return ('ERR', e.errno)


class Fail(Exception):
    pass


class Runner:
    def __init__(self, writeback, log):
        self.wb = writeback
        self.log = log
        self.mh = {}   # slot -> dict(fd, mm, how, ino, dirty)
        self.sh = {}   # slot -> dict(fd, ino, wrote)
        self.findings = []
        self.burst = []
        self.stepno = 0
        self.wb_mount_written = set()  # inodes whose times the kernel keeps (writeback)
        self.wb_unheard = set()  # changed unheard while the mount wrote them (writeback)
        self.linked_before = set()     # inodes that had nlink > 1 at some point
        self.last_ino = {}             # path -> store inode at the last check

    def emit(self, rec):
        if self.log:
            self.log.write(json.dumps(rec) + '\n')
            self.log.flush()

    # --- helpers
    def root(self, side):
        return MDOC if side == 'M' else SDOC

    def ino_of_store(self, path):
        s = sstat(os.path.join(SDOC, path))
        return s.st_ino if s else None

    def dirty_slots_for(self, op):
        paths = [op.get(k) for k in ('path', 'src', 'dst') if op.get(k)]
        inos = {self.ino_of_store(p) for p in paths} - {None}
        return [s for s, h in self.mh.items() if h['dirty'] and h['ino'] in inos]

    def held_inos(self):
        return {h['ino'] for h in self.mh.values()}

    # --- ops
    def do(self, op):
        k = op['op']
        if k == 'sleep':
            time.sleep(op['ms'] / 1000.0)
            return 'ok'
        if k == 'check':
            self.check()
            self.burst = []
            return 'ok'
        self.stepno += 1
        self.burst.append(op)
        try:
            res = self._do(op)
        except OSError as e:
            res = 'E' + errno.errorcode.get(e.errno, str(e.errno))
        op['res'] = res
        return res

    def _do(self, op):
        side, k = op['side'], op['op']
        R = self.root(side)
        P = lambda p: os.path.join(R, p)
        tag = op.get('tag', '')
        if k in ('create', 'replace'):
            target = P(op['path'])
            if k == 'replace':
                d = os.path.dirname(target)
                tmp = os.path.join(d, '.tmp-' + tag)
                fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, op['mode'])
            else:
                fd = os.open(target, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, op['mode'])
            try:
                os.write(fd, payload(tag, op['n']))
            finally:
                os.close(fd)
            if k == 'replace':
                try:
                    os.rename(tmp, target)
                except OSError:
                    os.unlink(tmp)
                    raise
            self.note_written(side, op['path'])
        elif k == 'write':
            fd = os.open(P(op['path']), os.O_WRONLY)
            try:
                os.pwrite(fd, payload(tag, op['n']), op['off'])
            finally:
                os.close(fd)
            self.note_written(side, op['path'])
        elif k == 'append':
            fd = os.open(P(op['path']), os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, payload(tag, op['n']))
            finally:
                os.close(fd)
            self.note_written(side, op['path'])
        elif k == 'truncate':
            if op.get('how') == 'fd':
                fd = os.open(P(op['path']), os.O_WRONLY)
                try:
                    os.ftruncate(fd, op['len'])
                finally:
                    os.close(fd)
            else:
                if side == 'S':
                    self.unheard(os.stat(P(op['path'])).st_ino)
                os.truncate(P(op['path']), op['len'])
            self.note_written(side, op['path'])
        elif k == 'chmod':
            os.chmod(P(op['path']), op['mode'])
        elif k in ('rename', 'renamedir'):
            os.rename(P(op['src']), P(op['dst']))
        elif k == 'unlink':
            os.unlink(P(op['path']))
        elif k == 'mkdir':
            os.mkdir(P(op['path']), 0o755)
        elif k == 'rmdir':
            os.rmdir(P(op['path']))
        elif k == 'link':
            os.link(P(op['src']), P(op['dst']))
            s = sstat(P(op['src']))
            if s:
                self.linked_before.add(s.st_ino)
        elif k == 'setxattr':
            os.setxattr(P(op['path']), op['key'], payload(tag, op['n']), follow_symlinks=False)
        elif k == 'rmxattr':
            os.removexattr(P(op['path']), op['key'], follow_symlinks=False)
        elif k == 'utime':
            os.utime(P(op['path']), ns=(op['mt'], op['mt']), follow_symlinks=False)
        # ---- held through the mount
        elif k == 'hold':
            s = op['slot']
            if s in self.mh:
                return 'skip'
            how = op['how']
            fl = {'r': os.O_RDONLY, 'rw': os.O_RDWR, 'a': os.O_WRONLY | os.O_APPEND,
                  'mm': os.O_RDWR, 'mmr': os.O_RDONLY}[how]
            fd = os.open(P(op['path']), fl)
            st = os.fstat(fd)
            mm = None
            if how in ('mm', 'mmr'):
                if st.st_size == 0:
                    os.close(fd)
                    return 'skip-empty'
                mm = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED,
                               mmap.PROT_READ | (mmap.PROT_WRITE if how == 'mm' else 0))
            spath = os.path.join(SDOC, op['path'])
            sfd = os.open(spath, os.O_PATH)  # to learn the true size of the inode
            self.mh[s] = dict(fd=fd, mm=mm, how=how, ino=st.st_ino, dirty=False, sfd=sfd)
        elif k in ('hwrite', 'hread', 'hsync', 'htrunc', 'hclose'):
            h = self.mh.get(op['slot'])
            if h is None:
                return 'skip'
            if k == 'hclose':
                if h['mm'] is not None:
                    h['mm'].close()
                os.close(h['fd'])
                os.close(h['sfd'])
                del self.mh[op['slot']]
                return 'ok'
            if k == 'hsync':
                if h['mm'] is not None:
                    h['mm'].flush()
                os.fsync(h['fd'])
                h['dirty'] = False
                return 'ok'
            if k == 'hread':
                os.pread(h['fd'], 1 << 20, 0)
                if h['mm'] is not None:
                    true = os.fstat(h['sfd']).st_size
                    ksz = os.fstat(h['fd']).st_size
                    lim = min(len(h['mm']), true, ksz)
                    h['mm'][:lim]
                return 'ok'
            if h['how'] in ('r', 'mmr'):
                return 'skip-ro'
            if k == 'htrunc':
                if h['mm'] is not None:
                    return 'skip-mm'
                os.ftruncate(h['fd'], op['len'])
                self.mark_wb(h['ino'])
                return 'ok'
            # hwrite
            data = payload(tag, op['n'])
            if h['how'] == 'mm':
                true = os.fstat(h['sfd']).st_size
                ksz = os.fstat(h['fd']).st_size
                lim = min(len(h['mm']), true, ksz)
                off = min(op['off'], lim)
                n = min(len(data), lim - off)
                if n <= 0:
                    return 'skip-nospace'
                h['mm'][off:off + n] = data[:n]
                h['dirty'] = True
            elif h['how'] == 'a':
                os.write(h['fd'], data)
                h['dirty'] = self.wb
            else:
                os.pwrite(h['fd'], data, op['off'])
                h['dirty'] = self.wb
            self.mark_wb(h['ino'])
        # ---- held in the store (an outside writer keeping the file open)
        elif k == 'shold':
            s = op['slot']
            if s in self.sh:
                return 'skip'
            fd = os.open(P(op['path']), os.O_RDWR)
            self.sh[s] = dict(fd=fd, ino=os.fstat(fd).st_ino, wrote=False)
        elif k == 'shwrite':
            h = self.sh.get(op['slot'])
            if h is None:
                return 'skip'
            os.pwrite(h['fd'], payload(tag, op['n']), op['off'])
            h['wrote'] = True
            self.unheard(h['ino'])
        elif k == 'shclose':
            h = self.sh.pop(op['slot'], None)
            if h is None:
                return 'skip'
            os.close(h['fd'])
        return 'ok'

    def unheard(self, ino):
        if self.wb and any(h['ino'] == ino and h['how'] not in ('r', 'mmr') for h in self.mh.values()):
            self.wb_unheard.add(ino)  # left to the kernel, for as long as it holds the inode
        self.mark_unheard(ino)

    def mark_unheard(self, ino):
        """A change in the store no event tells of yet (a held writer's write, a
        truncate(2) by path) while the mount has the file open for writing: not checked
        with --lenient-held (DESIGN.md 14)."""
        for h in self.mh.values():
            if h['ino'] == ino and h['how'] not in ('r', 'mmr'):
                h['unheard'] = True

    def mark_wb(self, ino):
        if self.wb:
            self.wb_mount_written.add(ino)

    def note_written(self, side, path):
        if side == 'M':
            s = sstat(os.path.join(SDOC, path))
            if s:
                self.mark_wb(s.st_ino)

    # --- checks
    def finding(self, kind, detail):
        rec = {'FINDING': kind, 'step': self.stepno, 'wb': self.wb, 'burst': self.burst, **detail}
        self.findings.append(rec)
        self.emit(rec)
        if not QUIET:
            print('FINDING', json.dumps(rec)[:1500], flush=True)

    def lenient_content(self):
        """Inodes whose content a fresh open need not show exactly (documented or
        not yet complete outside changes, or the mount's own unflushed pages)."""
        s = set(self.wb_unheard)
        for h in self.sh.values():
            if h['wrote'] and LENIENT_HELD:
                s.add(h['ino'])
        for h in self.mh.values():
            # Under writeback the daemon's writes check nothing (DESIGN.md 14).
            if h['dirty'] or ((LENIENT_HELD or self.wb) and h.get('unheard')):
                s.add(h['ino'])
        return s

    def check(self):
        outside = any(o.get('side') == 'S' for o in self.burst)
        dir_moved = any(o.get('side') == 'S' and o['op'] in ('renamedir', 'rmdir', 'mkdir')
                        for o in self.burst)
        if not self.burst:
            return
        # 1. strict: open+read through the mount equals the store, now.
        skip = self.lenient_content()
        for p in FILES:
            sp, mp = os.path.join(SDOC, p), os.path.join(MDOC, p)
            st = sstat(sp)
            if st is not None and not os.path.isfile(sp):
                continue
            if st is not None and st.st_ino in skip:
                continue
            res = self.content_pair(mp, sp)
            if res[0] == res[1]:
                continue
            m, s = res
            # classify: a name made in the store behind a cached negative entry is
            # documented as found "a wake-up late"; a directory renamed in the store too.
            lenient = (m == 'ENOENT' and isinstance(s, bytes)) or dir_moved
            # DESIGN 27: only the name an item was last seen under is checked for
            # replacement; a hard link's other names are not.
            old = self.last_ino.get(p)
            if old is not None and old in self.linked_before:
                lenient = True
            # replaced name of a hard-linked item (documented: only last-seen name checked)
            t0 = time.monotonic()
            ok_after = self.poll(lambda: self.content_pair(mp, sp), EVENTUAL)
            det = {'path': p, 'mount': summ(m), 'store': summ(s),
                   'ok_after_ms': ok_after, 'lenient': lenient,
                   'store_ino': st.st_ino if st else None}
            if lenient and ok_after is not None and ok_after <= SETTLE * 1000:
                self.emit({'note': 'late-negative-or-dir', **det})
                continue
            self.finding('open-read-stale' if not lenient else 'open-read-slow', det)
            if ok_after is None:
                self.heal()
        # 2. settled: stat / listing / xattrs
        t0 = time.monotonic()
        diff = self.snapdiff()
        if diff:
            first = diff
            ok_after = self.poll(lambda: (self.snapdiff() or None, None), EVENTUAL)
            if ok_after is None or ok_after > SETTLE * 1000:
                self.finding('settled-mismatch', {'diff': first, 'ok_after_ms': ok_after,
                                                  'still': self.snapdiff()})
                if ok_after is None:
                    self.heal()
            else:
                self.emit({'note': 'settled', 'ms': ok_after})

    def heal(self):
        """After a permanent mismatch, nudge the watcher so that later checks are not
        all the same finding: close-for-write every file, touch every directory."""
        for p in FILES:
            sp = os.path.join(SDOC, p)
            if os.path.isfile(sp):
                try:
                    os.close(os.open(sp, os.O_WRONLY))
                except OSError:
                    pass
        for p in [''] + DIRS:
            d = os.path.join(SDOC, p)
            if os.path.isdir(d):
                t = os.path.join(d, '.heal')
                try:
                    os.close(os.open(t, os.O_CREAT | os.O_WRONLY, 0o644))
                    os.unlink(t)
                except OSError:
                    pass
        time.sleep(0.05)
        left = self.snapdiff()
        self.emit({'note': 'healed', 'left': left})
        if left:
            print('HEAL-FAILED', json.dumps(left)[:600], flush=True)

    def poll(self, f, limit):
        t0 = time.monotonic()
        while True:
            a, b = f()
            if a == b:
                return round((time.monotonic() - t0) * 1000, 2)
            if time.monotonic() - t0 > limit:
                return None
            time.sleep(0.002)

    def content_pair(self, mp, sp):
        try:
            s = read_all(sp)
        except OSError as e:
            s = errno.errorcode.get(e.errno)
        try:
            m = read_all(mp)
        except OSError as e:
            m = errno.errorcode.get(e.errno)
        if s == 'EISDIR':
            return (None, None)
        return (m, s)

    def snap(self, R, side):
        out = {}
        held = self.held_inos()
        lenient = self.lenient_content()
        for p in [''] + ALL:
            try:
                st = os.lstat(os.path.join(R, p))
            except OSError as e:
                out['stat:' + p] = None if e.errno == errno.ENOENT else errno.errorcode.get(e.errno)
                continue
            isreg = (st.st_mode & 0o170000) == 0o100000
            d = {'ino': st.st_ino, 'mode': oct(st.st_mode), 'nlink': st.st_nlink}
            if side == 'S':
                self.last_ino[p] = st.st_ino
                if isreg and st.st_nlink > 1:
                    self.linked_before.add(st.st_ino)
            if KNOWN_NLINK and isreg and (st.st_ino in self.linked_before or st.st_nlink > 1):
                del d['nlink']   # finding 2 (outside link-count changes never reach the mount)
            skip_size = isreg and st.st_ino in lenient
            skip_times = skip_size
            if self.wb and isreg:
                # documented (DESIGN 22): the kernel keeps size and times of an inode it
                # holds: held open, another cached name (hard link).
                if st.st_ino in held or st.st_nlink > 1 or st.st_ino in self.linked_before:
                    skip_size = skip_times = True
                if st.st_ino in self.wb_mount_written:
                    skip_times = True
            if not skip_size:
                d['size'] = st.st_size if isreg else None
            if not skip_times:
                d['mtime'] = st.st_mtime_ns
            out['stat:' + p] = d
            if not isreg:
                try:
                    out['ls:' + p] = sorted(os.listdir(os.path.join(R, p)))
                except OSError as e:
                    out['ls:' + p] = errno.errorcode.get(e.errno)
            out['x:' + p] = xattrs(os.path.join(R, p))
        return out

    def snapdiff(self):
        s = self.snap(SDOC, 'S')
        m = self.snap(MDOC, 'M')
        d = {}
        for k in s:
            a, b = m.get(k), s.get(k)
            if isinstance(a, dict) and isinstance(b, dict):
                ks = set(a) & set(b)
                a = {x: a[x] for x in ks}
                b = {x: b[x] for x in ks}
            if a != b:
                d[k] = {'mount': a, 'store': b}
        return d

    def close_all(self):
        for h in self.mh.values():
            try:
                if h['mm'] is not None:
                    h['mm'].close()
                os.close(h['fd'])
                os.close(h['sfd'])
            except OSError:
                pass
        for h in self.sh.values():
            try:
                os.close(h['fd'])
            except OSError:
                pass
        self.mh.clear()
        self.sh.clear()


def summ(x):
    if isinstance(x, bytes):
        import hashlib
        return {'len': len(x), 'head': x[:40].decode('latin1'), 'md5': hashlib.md5(x).hexdigest()[:8]}
    return x


def run_ops(ops, writeback, log, stop_on_finding=False):
    fresh_mount(writeback)
    R = Runner(writeback, log)
    try:
        for op in ops:
            R.emit({'op': op})
            R.do(op)
            if stop_on_finding and R.findings:
                break
    finally:
        R.close_all()
        unmount()
    return R.findings


def cmd_run(a):
    log = open(a.log or '%s/logs/run-%s-%d.jsonl' % (BASE, 'wb' if a.writeback else 'def', a.seed), 'w')
    log.write(json.dumps({'seed': a.seed, 'steps': a.steps, 'writeback': a.writeback}) + '\n')
    fresh_mount(a.writeback)
    R = Runner(a.writeback, log)
    g = Gen(a.seed)
    t0 = time.time()
    try:
        while R.stepno < a.steps:
            for op in g.next_ops(R):
                R.emit({'op': op})
                res = R.do(op)
                if op['op'] not in ('check', 'sleep'):
                    R.emit({'r': res, 'k': op['side'] + ':' + op['op']})
            if len(R.findings) >= a.max_findings:
                break
    finally:
        R.close_all()
        unmount()
    dlog = STORE + '/daemon.log'
    print('seed %d wb=%s steps=%d findings=%d %.1fs' % (a.seed, a.writeback, R.stepno,
                                                        len(R.findings), time.time() - t0))
    return 1 if R.findings else 0


def load_ops(path):
    ops = []
    for line in open(path):
        rec = json.loads(line)
        if 'op' in rec and isinstance(rec['op'], dict):
            o = dict(rec['op'])
            o.pop('res', None)
            ops.append(o)
    return ops


def cmd_replay(a):
    ops = load_ops(a.log)
    if a.upto:
        ops = ops[:a.upto]
    hits = 0
    for i in range(a.repeat):
        f = run_ops([dict(o) for o in ops], a.writeback, None)
        for x in f:
            print('FINDING', json.dumps(x)[:800])
        hits += bool(f)
    print('reproduced %d/%d' % (hits, a.repeat))


def cmd_shrink(a):
    ops = load_ops(a.log)
    kind = a.kind

    def fails(cand):
        for _ in range(a.repeat):
            f = run_ops([dict(o) for o in cand], a.writeback, None, stop_on_finding=True)
            if any(kind is None or x['FINDING'] == kind for x in f):
                return True
        return False

    # cut after the first finding
    f = run_ops([dict(o) for o in ops], a.writeback, None, stop_on_finding=True)
    if not f:
        print('does not reproduce')
        return
    # find the prefix: ops up to the check where it fired
    n = 0
    cnt = 0
    for i, o in enumerate(ops):
        if o['op'] != 'check' and o['op'] != 'sleep':
            cnt += 1
        if cnt >= f[0]['step'] and o['op'] == 'check':
            n = i + 1
            break
    ops = ops[:n] if n else ops
    print('prefix', len(ops))
    L = 8
    while L < len(ops):
        cand = ops[-L:]
        if fails(cand):
            ops = cand
            break
        L *= 2
    print('suffix', len(ops), flush=True)
    chunk = len(ops) // 2
    while chunk >= 1:
        i = 0
        changed = False
        while i < len(ops):
            cand = ops[:i] + ops[i + chunk:]
            if cand and cand[-1]['op'] != 'check':
                cand = cand + [{'op': 'check'}]
            if fails(cand):
                ops = cand
                changed = True
                print('len', len(ops), flush=True)
                with open((a.out or a.log + '.min') + '.partial', 'w') as fo:
                    for o in ops:
                        fo.write(json.dumps({'op': o}) + '\n')
            else:
                i += chunk
        if not changed:
            chunk //= 2
    out = a.out or a.log + '.min'
    with open(out, 'w') as fo:
        for o in ops:
            fo.write(json.dumps({'op': o}) + '\n')
    print('minimal (%d ops) -> %s' % (len(ops), out))
    for o in ops:
        print(json.dumps(o))


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest='cmd')
    r = sp.add_parser('run')
    r.add_argument('--seed', type=int, default=1)
    r.add_argument('--steps', type=int, default=2000)
    r.add_argument('--writeback', action='store_true')
    r.add_argument('--log')
    r.add_argument('--max-findings', type=int, default=20)
    p = sp.add_parser('replay')
    p.add_argument('log')
    p.add_argument('--writeback', action='store_true')
    p.add_argument('--upto', type=int)
    p.add_argument('--repeat', type=int, default=1)
    s = sp.add_parser('shrink')
    s.add_argument('log')
    s.add_argument('--writeback', action='store_true')
    s.add_argument('--kind')
    s.add_argument('--repeat', type=int, default=3)
    s.add_argument('--out')
    for x in (r, p, s):
        x.add_argument('--no-ptruncate', action='store_true')
        x.add_argument('--skip-known-nlink', action='store_true')
        x.add_argument('--lenient-held', action='store_true')
    a = ap.parse_args()
    global PTRUNC, KNOWN_NLINK, LENIENT_HELD, QUIET
    KNOWN_NLINK = a.skip_known_nlink
    LENIENT_HELD = a.lenient_held
    QUIET = a.cmd == 'shrink'
    PTRUNC = not a.no_ptruncate
    os.makedirs(BASE + '/logs', exist_ok=True)
    if a.cmd == 'run':
        sys.exit(cmd_run(a))
    if a.cmd == 'replay':
        cmd_replay(a)
    if a.cmd == 'shrink':
        cmd_shrink(a)


if __name__ == '__main__':
    main()
