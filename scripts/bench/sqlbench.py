#!/usr/bin/env python3
"""sqlbench.py - SQLite workload for scripts/bench.sh (ContainerFS).

usage: sqlbench.py DIR [SCALE]

Creates DIR (must not exist), runs the phases below against databases in it and prints
one line per phase, like metabench.c:

    <phase> <ops> <seconds> <ops_per_second>

SCALE (default 1.0) multiplies every operation count (the smoke run uses ~0.02).

Phases (what a desktop app's SQLite store does to a file system):
  txn_delete   single-row INSERT transactions, journal_mode=DELETE, synchronous=FULL:
               each commit creates, writes, fsyncs and unlinks DB-journal and writes and
               fsyncs the database (create/unlink/fsync/small-write path)      txn/s
  txn_wal      single-row INSERT transactions, journal_mode=WAL, synchronous=NORMAL:
               appends to DB-wal, locks through the mmap'ed DB-shm (no fsync)  txn/s
  bulk_insert  rows inserted in one transaction (WAL) + CREATE INDEX         rows/s
  point_select random primary-key SELECTs on a fresh connection (SQLite's own
               page cache cold, so pages come through read(2))              queries/s
  scan         full-table aggregate scans (sequential 4 KiB page reads)      rows/s
The directory is removed at the end (not timed).
"""
import os
import random
import shutil
import sqlite3
import sys
import time


def report(phase, ops, secs):
    print(f"{phase} {ops} {secs:.6f} {ops / secs if secs > 0 else 0.0:.1f}", flush=True)


def one_row_txns(db, phase, cnt, payload):
    """Creates table t and times `cnt` transactions of one INSERT each."""
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, k INTEGER)")
    t0 = time.perf_counter()
    for i in range(cnt):
        db.execute("BEGIN")
        db.execute("INSERT INTO t (v, k) VALUES (?, ?)", (payload, i))
        db.execute("COMMIT")
    report(phase, cnt, time.perf_counter() - t0)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    n = lambda x: max(10, int(x * scale))
    os.mkdir(d)
    rnd = random.Random(42)
    payload = "x" * 100

    # txn_delete: rollback journal, fsync on every commit
    db = sqlite3.connect(os.path.join(d, "delete.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("PRAGMA synchronous=FULL")
    one_row_txns(db, "txn_delete", n(500), payload)
    db.close()

    # txn_wal: WAL, synchronous=NORMAL (fsync only at checkpoints)
    path = os.path.join(d, "wal.db")
    db = sqlite3.connect(path, isolation_level=None)
    if db.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
        raise SystemExit("sqlbench: WAL mode refused")
    db.execute("PRAGMA synchronous=NORMAL")
    one_row_txns(db, "txn_wal", n(5000), payload)

    # bulk_insert: one big transaction + an index
    rows = n(200000)
    t0 = time.perf_counter()
    db.execute("BEGIN")
    db.executemany("INSERT INTO t (v, k) VALUES (?, ?)",
                   ((payload, rnd.randrange(1 << 30)) for _ in range(rows)))
    db.execute("COMMIT")
    db.execute("CREATE INDEX t_k ON t (k)")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    report("bulk_insert", rows, time.perf_counter() - t0)
    db.close()
    total = n(5000) + rows

    # point_select: fresh connection, small page cache, random primary keys
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA cache_size=-512")  # 512 KiB: most lookups read pages from the FS
    q = n(50000)
    keys = [rnd.randrange(1, total + 1) for _ in range(q)]
    t0 = time.perf_counter()
    for k in keys:
        db.execute("SELECT v FROM t WHERE id = ?", (k,)).fetchone()
    report("point_select", q, time.perf_counter() - t0)

    # scan: full-table aggregates
    passes = 3
    t0 = time.perf_counter()
    for _ in range(passes):
        db.execute("SELECT count(*), sum(length(v)), max(k) FROM t").fetchone()
    report("scan", passes * total, time.perf_counter() - t0)
    db.close()

    shutil.rmtree(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
