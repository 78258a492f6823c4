"""Assertions for cases written as Python heredocs (`"$PY" - ARGS <<'EOF'`).

    import os, sys; sys.path.insert(0, os.environ["TEST_LIB"]); from checks import *

Every check prints `ok N - label` or `FAIL: label: why` and goes on, so that one run shows
every difference; `done()` exits 1 if any failed. `err` compares the errno's symbolic name
exactly (a call that succeeds, or fails otherwise, is a failure).
"""
import errno
import os
import sys

_count = 0
_failures = 0


def _name(e):
    return errno.errorcode.get(e, "E%d" % e)


def ok_(label):
    global _count
    _count += 1
    print("  ok %d - %s" % (_count, label), flush=True)


def fail(label, why):
    global _failures
    _failures += 1
    print("FAIL: %s: %s" % (label, why), flush=True)


def eq(label, got, want):
    if got == want:
        ok_("%s = %r" % (label, want))
    else:
        fail(label, "expected %r, got %r" % (want, got))
    return got


def true(label, cond, why=""):
    if cond:
        ok_(label)
    else:
        fail(label, why or "not true")
    return cond


def ok(label, fn, *args, **kwargs):
    """fn must succeed; returns its result (None when it failed)."""
    try:
        result = fn(*args, **kwargs)
    except OSError as e:
        fail(label, "failed with %s (%s)" % (_name(e.errno), e))
        return None
    ok_(label)
    return result


def err(label, want, fn, *args, **kwargs):
    """fn must fail with exactly the errno named `want`."""
    try:
        result = fn(*args, **kwargs)
    except OSError as e:
        got = _name(e.errno)
        if got == want:
            ok_("%s -> %s" % (label, want))
        else:
            fail(label, "expected %s, got %s (%s)" % (want, got, e))
        return
    fail(label, "expected %s, succeeded (%r)" % (want, result))


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def write_file(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def done():
    print("%d checks, %d failed" % (_count + _failures, _failures), flush=True)
    sys.exit(1 if _failures else 0)
