#!/usr/bin/env python3
"""report.py - summary of a scripts/bench.sh run (ContainerFS vs native and passthrough_ll).

usage: report.py [--fs LABEL[,LABEL...]] [--anchors native,passthrough_ll,passthrough_ll_wb[,passthrough_ll_xattr]]
                 [--rounds N] [--workloads LIST] [--check-only] RESULTS_DIR

Reads the result files fsbench.sh and sqlbench.sh wrote into RESULTS_DIR
(LABEL.rN.txt; LABEL.tree.rN.txt, the tree workload's pass of its own; LABEL.sqlite.rN.txt:
lines "LABEL METRIC VALUE UNIT", '#' notes), the
daemon memory samples of rss-exec.sh (RESULTS_DIR/rss/LABEL.PID.rss) and the progress logs
(*.err, for phase start times), and prints markdown:
  1. medians per file system and each FS's ratio to every anchor (performance ratios:
     FS/anchor for rates, anchor/FS for times, so > 1.00 always means faster), with the
     targets of issue 3 that a ContainerFS median misses;
  2. CPU-seconds per phase (client + daemon);
  3. spread (min..max over rounds);
  4. daemon memory: peak RSS (VmHWM) over the whole run, max RSS per phase, and the
     daemon's own memory (RssAnon: RSS less mapped files such as shared libraries).
Exit status: 0 when every (file system, round) produced every metric of the workloads run
(--workloads, fsbench.sh's names; the SQLite workload always), 1 otherwise (no timing
assertions).
"""
import argparse
import collections
import datetime
import glob
import os
import re
import statistics
import sys

FSBENCH_METRICS = [
    # metric, description (SIZE, NFILES, ... filled in from the run's notes)
    ("seqwrite", "seq write {size} bs=1M +fsync"),
    ("seqread", "seq read {size} bs=1M, cold (drop_caches)"),
    ("randread_cold", "rand read 4k, {randread_io} no repeats (FUSE cache cold)"),
    ("randread_hot", "rand read 4k within {hot}, warm (cached)"),
    ("randwrite", "rand write 4k, {randwrite_runtime} (no fsync)"),
    ("meta_create", "create {nfiles} empty files"),
    ("meta_stat_warm", "stat {nfiles}, warm (right after create)"),
    ("meta_stat_cold", "stat {nfiles}, cold (after drop dentries/inodes)"),
    ("meta_readdir", "readdir {nfiles}-entry dir ({readdir_passes} passes)"),
    ("meta_ls_l_cold", "ls -l (readdir + stat each), cold"),
    ("meta_rename", "rename {nfiles}"),
    ("meta_unlink", "unlink {nfiles}"),
    ("tree_untar", "untar {tarball}"),
    ("tree_readall", "read all files (find | xargs cat)"),
    ("tree_rm", "rm -rf the tree"),
    ("tree_total", "untar + read all + rm -rf"),
]
SQLITE_METRICS = [
    ("sqlite_txn_delete", "SQLite 1-row txns, rollback journal, synchronous=FULL"),
    ("sqlite_txn_wal", "SQLite 1-row txns, WAL, synchronous=NORMAL"),
    ("sqlite_bulk_insert", "SQLite bulk insert (1 txn) + CREATE INDEX"),
    ("sqlite_point_select", "SQLite random PK selects, 512 KiB SQLite cache"),
    ("sqlite_scan", "SQLite full-table aggregate scans"),
]
# metrics a run must produce; (a, b) = either name (fsbench names the cold phases
# stat_again / ls_l when drop_caches is not permitted)
REQUIRED = [m for m, _ in FSBENCH_METRICS if m not in ("meta_stat_cold", "meta_ls_l_cold")] + [
    ("meta_stat_cold", "meta_stat_again"), ("meta_ls_l_cold", "meta_ls_l")] + [m for m, _ in SQLITE_METRICS]
ALL_WORKLOADS = "seqwrite,seqread,randread,randwrite,meta,tree"
PHASES = ["seqwrite", "seqread", "randread_cold", "randread_hot", "randwrite", "meta",
          "tree_untar", "tree_readall", "tree_rm", "sqlite"]
TIME_UNITS = {"s"}
# issue 3's targets: (metric or None for all, anchor, minimum performance ratio)
TARGETS = [
    (None, "passthrough_ll", 1.0),
    (None, "passthrough_ll_wb", 0.9),
    ("meta_stat_warm", "native", 0.85),
    ("randread_hot", "native", 0.85),
    ("seqwrite", "native", 0.9),
    ("seqread", "native", 0.9),
]
SHORT = {"native": "native", "passthrough_ll": "ll", "passthrough_ll_wb": "ll_wb", "passthrough_ll_xattr": "ll_xattr"}
# fsbench.sh / sqlbench.sh progress messages -> phase
PHASE_MSGS = [("priming", "mount"), ("mounting", "mount"), ("seqwrite", "seqwrite"), ("seqread", "seqread"),
              ("randread_cold", "randread_cold"), ("randread_hot", "randread_hot"), ("randwrite", "randwrite"),
              ("meta:", "meta"), ("tree:", "tree"), ("done; unmounting", "unmount"), ("sqlbench.py", "sqlite")]


def req_name(req):
    """a REQUIRED entry's metric name (its first spelling)"""
    return req if isinstance(req, str) else req[0]


def workload_of(metric):
    """the workload a metric belongs to: fsbench.sh's names (randread_cold -> randread,
    meta_create -> meta, seqwrite -> seqwrite) and sqlite"""
    return metric.split("_")[0]


def kind_of(metric):
    """the result file a metric comes from: sqlite, tree (its own pass) or fsbench"""
    w = workload_of(metric)
    return w if w in ("sqlite", "tree") else "fsbench"


def load(d):
    """-> data[label][metric] = [values], units, notes[label] = [header notes], runs[(label, file)] = metrics"""
    data = collections.defaultdict(lambda: collections.defaultdict(list))
    units, runs, failed, pids, params = {}, {}, [], {}, {}
    for f in sorted(glob.glob(os.path.join(d, "*.txt"))):
        base = os.path.basename(f)
        m = re.match(r"(.+?)\.(?:(sqlite|tree)\.)?r(\d+)\.txt$", base)
        if not m:
            continue
        label, kind, rnd = m.group(1), m.group(2) or "fsbench", int(m.group(3))
        got = set()
        with open(f) as fh:
            for line in fh:
                if line.startswith("#"):
                    if "FAILED" in line:
                        failed.append(base)
                    pm = re.search(r"daemon pid=(\d+)", line)
                    if pm:
                        pids[pm.group(1)] = (label, rnd, kind, f)
                    if line.startswith("# size="):
                        for tok in line[2:].split():
                            k, _, v = tok.partition("=")
                            params.setdefault(k, v)
                    continue
                parts = line.split()
                if len(parts) != 4 or parts[0] != label:
                    continue
                _, metric, value, unit = parts
                units[metric] = unit
                try:
                    v = float(value)
                except ValueError:
                    continue
                data[label][metric].append(v)
                got.add(metric)
        runs[(label, kind, rnd)] = got
    return data, units, runs, failed, pids, params


def fmt(v):
    if v is None:
        return "–"
    a = abs(v)
    if a >= 100000:
        return f"{v / 1000:.0f}k"
    if a >= 10000:
        return f"{v / 1000:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def med(data, label, metric):
    vals = data.get(label, {}).get(metric)
    return statistics.median(vals) if vals else None


def perf_ratio(v, anchor, unit):
    if v is None or anchor is None or v == 0 or anchor == 0:
        return None
    return anchor / v if unit in TIME_UNITS else v / anchor


def rss_by_phase(d, pids):
    """-> per label: {'peak': kB, 'anon': kB or None, 'phase': {phase: [max VmRSS kB per run]}, 'runs': n,
    'start': [...], 'end': [...], 'end_anon': [...]} (RssAnon: samples of rss-exec.sh that have it)"""
    out = collections.defaultdict(lambda: {"peak": 0, "anon": None, "phase": collections.defaultdict(list), "runs": 0,
                                           "start": [], "end": [], "end_anon": [], "threads": 0})
    for f in sorted(glob.glob(os.path.join(d, "rss", "*.rss"))):
        m = re.match(r"(.+)\.(\d+)\.rss$", os.path.basename(f))
        if not m:
            continue
        label, pid = m.group(1), m.group(2)
        samples = []
        with open(f) as fh:
            for line in fh:
                p = line.split()
                if len(p) in (4, 5):
                    anon = int(p[4]) if len(p) == 5 else None
                    samples.append((float(p[0]), int(p[1]), int(p[2]), int(p[3]), anon))
        if not samples:
            continue
        o = out[label]
        o["runs"] += 1
        o["peak"] = max(o["peak"], max(s[2] for s in samples))
        o["threads"] = max(o["threads"], max(s[3] for s in samples))
        anons = [s[4] for s in samples if s[4] is not None]
        if anons:
            o["anon"] = max(o["anon"] or 0, max(anons))
        # phase start times from the run's progress log
        starts = []
        run = pids.get(pid)
        kind = run[2] if run else "?"
        if kind == "fsbench":
            o["end"].append(samples[-1][1])
            if samples[-1][4] is not None:
                o["end_anon"].append(samples[-1][4])
        if run:
            _, rnd, kind, txt = run
            err = txt[:-4] + ".err"
            day = None
            with open(txt) as fh:
                for line in fh:
                    dm = re.search(r"date=(\S+)", line)
                    if dm:
                        day = datetime.datetime.fromisoformat(dm.group(1))
                        break
            if day and os.path.exists(err):
                with open(err) as fh:
                    for line in fh:
                        lm = re.match(r"\[(?:fsbench|sqlbench) \S+ (\d\d):(\d\d):(\d\d)\] (.*)", line)
                        if not lm:
                            continue
                        t = day.replace(hour=int(lm.group(1)), minute=int(lm.group(2)), second=int(lm.group(3)),
                                        microsecond=0)
                        if t < day.replace(microsecond=0):
                            t += datetime.timedelta(days=1)
                        for prefix, ph in PHASE_MSGS:
                            if lm.group(4).startswith(prefix):
                                # the log has whole seconds: a sample counts for a phase
                                # once the phase has surely begun
                                starts.append((t.timestamp() + 1, ph))
                                break
        per = collections.defaultdict(int)
        for ts, rss, _, _, _ in samples:
            ph = "mount"
            for t, name in starts:
                if t <= ts:
                    ph = name
            per[ph] = max(per[ph], rss)
        for ph, v in per.items():
            if ph == "mount" and kind == "sqlite":
                continue  # sqlbench's daemons start up too; count fsbench's only (both passes)
            o["phase"][ph].append(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--fs", default="containerfs")
    ap.add_argument("--anchors", default="native,passthrough_ll,passthrough_ll_wb")
    ap.add_argument("--rounds", type=int, default=0, help="rounds expected per FS (0: whatever is there)")
    ap.add_argument("--workloads", default=ALL_WORKLOADS, help="fsbench.sh workloads that were run")
    ap.add_argument("--check-only", action="store_true")
    a = ap.parse_args()
    data, units, runs, failed, pids, params = load(a.dir)
    fss = [x for x in a.fs.split(",") if x]
    anchors = [x for x in a.anchors.split(",") if x]
    labels = anchors + fss

    # ---- completeness (the smoke test's verdict)
    problems = []
    rounds = a.rounds or max([r for (_, _, r) in runs] or [0])
    ran = set(a.workloads.split(",")) | {"sqlite"}
    required = [x for x in REQUIRED if workload_of(req_name(x)) in ran]
    for label in labels:
        for kind in ("fsbench", "tree", "sqlite"):
            need = [x for x in required if kind_of(req_name(x)) == kind]
            if not need:
                continue
            for r in range(1, rounds + 1):
                got = runs.get((label, kind, r))
                if got is None and kind == "tree":
                    got = runs.get((label, "fsbench", r))  # a run from before the tree pass of its own
                if got is None:
                    problems.append(f"{label} {kind} round {r}: no result file")
                    continue
                for req in need:
                    alts = (req,) if isinstance(req, str) else req
                    if not any(x in got for x in alts):
                        problems.append(f"{label} {kind} round {r}: {alts[0]} missing")
    for f in failed:
        problems.append(f"{f}: a workload reported FAILED")

    out = []
    if not a.check_only:
        desc = {
            "size": params.get("size", "?"), "randread_io": params.get("randread_io", "?"),
            "hot": params.get("hot", "?").split("/")[0], "randwrite_runtime": params.get("randwrite_runtime", "?"),
            "nfiles": params.get("nfiles", "?"), "readdir_passes": params.get("readdir_passes", "?"),
            "tarball": re.sub(r".*/", "", params.get("tarball", "?")),
        }
        nruns = {l: max(sum(1 for (x, k, _) in runs if x == l and k == kind) for kind in ("fsbench", "tree"))
                 for l in labels}
        out.append("Medians over rounds. Ratio columns: performance of the file system relative to each "
                   "anchor (rate ÷ anchor rate; for times anchor ÷ FS time), so > 1.00 = faster, "
                   "< 1.00 = slower. Targets (issue 3): ≥ 1.00× passthrough_ll and ≥ 0.90× "
                   "passthrough_ll_wb everywhere; warm stat and warm random read ≥ 0.85× native; "
                   "seq write / cold seq read ≥ 0.90× native.\n")
        for fs in fss:
            if fs not in data:
                continue
            hdr = "| workload | unit | " + " | ".join(f"{l} (n={nruns[l]})" for l in anchors) + f" | **{fs}** (n={nruns[fs]}) | " \
                + " | ".join(f"÷ {SHORT.get(l, l)}" for l in anchors) + " | misses target |"
            out.append(hdr)
            out.append("|---|---|" + "---:|" * (len(anchors) * 2 + 1) + "---|")
            for metric, d in FSBENCH_METRICS + SQLITE_METRICS:
                alt = {"meta_stat_cold": "meta_stat_again", "meta_ls_l_cold": "meta_ls_l"}.get(metric)
                mm = metric if metric in data[fs] or not alt else alt
                if not any(mm in data[l] for l in labels):
                    continue
                unit = units.get(mm, "")
                v = med(data, fs, mm)
                cells = [fmt(med(data, l, mm)) for l in anchors] + [f"**{fmt(v)}**"]
                misses = []
                for l in anchors:
                    r = perf_ratio(v, med(data, l, mm), unit)
                    cells.append("–" if r is None else f"{r:.2f}")
                for tm, tl, tmin in TARGETS:
                    if tm not in (None, metric):
                        continue
                    r = perf_ratio(v, med(data, tl, mm), unit)
                    if r is not None and r < tmin:
                        misses.append(f"{SHORT.get(tl, tl)} {r:.2f}<{tmin:.2f}")
                out.append(f"| {metric} — {d.format(**desc)} | {unit} | " + " | ".join(cells) + " | "
                           + ("; ".join(misses) or "") + " |")
            out.append("")

        out.append("CPU-seconds per phase, median: client (workload processes, incl. their kernel time) "
                   "+ daemon (all threads) = total.\n")
        out.append("| phase | " + " | ".join(labels) + " |")
        out.append("|---|" + "---|" * len(labels))
        for ph in PHASES:
            cells = []
            for l in labels:
                c, f = med(data, l, ph + ".cpu_client"), med(data, l, ph + ".cpu_fs")
                cells.append("–" if c is None else f"{c:.2f}" if f is None else f"{c:.2f}+{f:.2f}={c + f:.2f}")
            if any(x != "–" for x in cells):
                out.append(f"| {ph} | " + " | ".join(cells) + " |")

        out.append("\nSpread (min..max over rounds).\n")
        out.append("| workload | " + " | ".join(labels) + " |")
        out.append("|---|" + "---|" * len(labels))
        for metric, _ in FSBENCH_METRICS + SQLITE_METRICS + [("bg_busy", "")]:
            cells = []
            for l in labels:
                vals = data.get(l, {}).get(metric)
                cells.append(f"{fmt(min(vals))}..{fmt(max(vals))}" if vals else "–")
            if any(x != "–" for x in cells):
                out.append(f"| {metric} | " + " | ".join(cells) + " |")

        rss = rss_by_phase(a.dir, pids)
        if rss:
            out.append("\nDaemon memory (rss-exec.sh samples /proc/PID/status every 0.5 s; every mount is a "
                       "new daemon). Peak = largest VmHWM of any daemon of that label over the whole run; "
                       "per phase: max VmRSS during the phase, median over rounds (MiB).\n")
            rl = [l for l in labels if l in rss]
            out.append("| | " + " | ".join(rl) + " |")
            out.append("|---|" + "---|" * len(rl))
            out.append("| **peak RSS (VmHWM), whole run** | " + " | ".join(f"**{rss[l]['peak'] / 1024:.1f}**" for l in rl) + " |")
            out.append("| daemons sampled | " + " | ".join(str(rss[l]["runs"]) for l in rl) + " |")
            out.append("| max threads seen | " + " | ".join(str(rss[l]["threads"]) for l in rl) + " |")
            for ph in ["seqwrite", "seqread", "randread_cold", "randread_hot", "randwrite", "meta",
                       "tree", "sqlite", "unmount"]:
                cells = []
                for l in rl:
                    vals = rss[l]["phase"].get(ph)
                    cells.append(f"{statistics.median(vals) / 1024:.1f}" if vals else "–")
                if any(x != "–" for x in cells):
                    out.append(f"| RSS during {ph} | " + " | ".join(cells) + " |")
            out.append("| RSS at the end of an fsbench run (median) | " + " | ".join(
                f"{statistics.median(rss[l]['end']) / 1024:.1f}" if rss[l]["end"] else "–" for l in rl) + " |")
            if any(rss[l]["anon"] is not None for l in rl):
                # The daemon's own memory; the rest of its RSS is shared libraries.
                out.append("| **own memory (RssAnon), largest sample** | " + " | ".join(
                    f"**{rss[l]['anon'] / 1024:.1f}**" if rss[l]["anon"] is not None else "–" for l in rl) + " |")
                out.append("| own memory at the end of an fsbench run (median) | " + " | ".join(
                    f"{statistics.median(rss[l]['end_anon']) / 1024:.1f}" if rss[l]["end_anon"] else "–" for l in rl) + " |")

    out.append("")
    if problems:
        out.append(f"INCOMPLETE: {len(problems)} problem(s):")
        out += [f"- {p}" for p in problems]
    else:
        out.append(f"complete: every workload ran for {', '.join(labels)} in {rounds} round(s)")
    print("\n".join(out))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
