#!/usr/bin/env python3
# Lists the findings of coherence-fuzzer logs: file, kind, step, what differed, and the burst before it.
# usage: scripts/fuzz/summarize.py LOG...
import json,sys,glob
for f in sorted(sys.argv[1:]):
    for l in open(f):
        r=json.loads(l)
        if 'FINDING' in r:
            b=[(o.get('side'),o.get('op'),o.get('path') or (o.get('src'),o.get('dst')),o.get('res')) for o in r['burst']]
            if 'diff' in r:
                print(f.split('/')[-1], r['FINDING'], r['step'], 'ok', r['ok_after_ms'], json.dumps(r['diff'])[:400], b)
            else:
                print(f.split('/')[-1], r['FINDING'], r['step'], r['path'], 'm=',str(r['mount'])[:90], 's=',str(r['store'])[:90], 'ok',r['ok_after_ms'], b)
