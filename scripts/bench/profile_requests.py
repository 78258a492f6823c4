#!/usr/bin/env python3
"""profile_requests.py CONNECTION < perf script -F time,event,trace output

Counts FUSE requests per opcode for one connection (the mount's device minor) and their
mean and total round trip (fuse_request_send -> fuse_request_end, i.e. queueing + daemon
work + reply), from the fuse:fuse_request_send / fuse:fuse_request_end tracepoints.
"""
import collections
import re
import sys

conn = sys.argv[1]
send = {}
count = collections.Counter()
lat = collections.defaultdict(float)
pat_send = re.compile(r"([\d.]+):\s+fuse:fuse_request_send:\s+connection (\d+) req (\d+) opcode \d+ \((\w+)\)")
pat_end = re.compile(r"([\d.]+):\s+fuse:fuse_request_end:\s+connection (\d+) req (\d+)")
for line in sys.stdin:
    m = pat_send.search(line)
    if m:
        if m.group(2) != conn:
            continue
        op = m.group(4).replace("FUSE_", "")
        count[op] += 1
        send[m.group(3)] = (float(m.group(1)), op)
        continue
    m = pat_end.search(line)
    if m and m.group(2) == conn:
        s = send.pop(m.group(3), None)
        if s:
            lat[s[1]] += float(m.group(1)) - s[0]
total = sum(count.values())
tl = sum(lat.values())
print(f"{'opcode':<14}{'requests':>10}{'mean µs':>10}{'total s':>10}")
for op, n in count.most_common():
    print(f"{op:<14}{n:>10}{lat[op] / n * 1e6:>10.1f}{lat[op]:>10.3f}")
print(f"{'TOTAL':<14}{total:>10}{'':>10}{tl:>10.3f}")
