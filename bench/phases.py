#!/usr/bin/env python3
"""bench/phases.py LOG — phases of one `handoff --verbose --log-format json sync`
run (PROFILE=1 bench/run.sh keeps that log as handoff-N.log).

Per host: connect + discovery (run start to the host's first progress line,
which a worker logs once Discover has walked, listed every inbox and read
the git indexes), claim/store/acknowledge (first to last progress line),
then the parent's ingest (first to last "handoff" line) and the end.
"""
import json
import sys
from datetime import datetime


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


start = end = None
first, last, pulled = {}, {}, {}
ing = []
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    t = ts(r["time"])
    m = r.get("msg")
    if m == "run started":
        start = t
    elif m == "run finished":
        end = t
    elif m == "progress" and "host" in r:
        h = r["host"]
        first.setdefault(h, t)
        last[h] = t
        pulled[h] = r.get("pulled", 0)
    elif m == "handoff":
        ing.append(t)
if start is None:
    sys.exit("no 'run started' line")
print("| host | connect + discover s | claim, store, acknowledge s | pulled |")
print("|---|---|---|---|")
for h in sorted(first, key=lambda x: int(x[1:]) if x[1:].isdigit() else x):
    print(f"| {h} | {(first[h] - start).total_seconds():.1f} | {(last[h] - first[h]).total_seconds():.1f} | {pulled[h]} |")
if ing:
    pulls_end = max(last.values()) if last else start
    print(f"\nall pulls done at {(pulls_end - start).total_seconds():.1f} s; ingest of {len(ing)} handoffs "
          f"{(ing[-1] - ing[0]).total_seconds():.1f} s (first applied at {(ing[0] - start).total_seconds():.1f} s); "
          f"run finished at {((end or ing[-1]) - start).total_seconds():.1f} s")
