#!/usr/bin/env python3
"""bench/yearspread.py WS — spread the busy runs of a bench/bigws.sh
workspace WS (a copy: it is changed) evenly over its year.

bigws.sh's 100 busy runs all fall in its last hour. This moves busy run c
(of n, by finish time) to end - (n-1-c) * (end - start) / n, where start
is the year's first run and end the last busy run, in the ledger's runs
table, and shifts the mtime of every file in .handoff/backups by what its
run (the one whose start..finish holds the file's mtime) moved. The idle
ticks keep their times. bench/year.sh then runs one real idle sync.
"""
import os, sqlite3, sys, bisect
from datetime import datetime, timezone

ws = sys.argv[1]
db = sqlite3.connect(os.path.join(ws, ".handoff/ledger.db"))

def parse(s):
    date, frac = s.rstrip("Z").split(".") if "." in s else (s.rstrip("Z"), "0")
    t = datetime.strptime(date, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return t + float("0." + frac)

def fmt(t):
    sec = int(t)
    ns = int(round((t - sec) * 1e9))
    return datetime.fromtimestamp(sec, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % ns

start = parse(db.execute("select min(finished_at) from runs").fetchone()[0])
busy = db.execute("select run_id, started_at, finished_at from runs where status = 'ingested' order by finished_at").fetchall()
assert len(busy) == 100, len(busy)
end = parse(busy[-1][2])
n = len(busy)
shift = {}
wins = []
for c, (rid, st, fin) in enumerate(busy):
    new = end - (n - 1 - c) * (end - start) / n
    d = new - parse(fin)
    shift[rid] = d
    wins.append((parse(st), parse(fin) + 2.0, d))  # 2 s slack: the run's own ingest ends before finished_at
    db.execute("update runs set started_at = ?, finished_at = ? where run_id = ?", (fmt(parse(st) + d), fmt(new), rid))
db.commit()

bk = os.path.join(ws, ".handoff/backups")
starts = [w[0] for w in wins]
moved = unplaced = 0
for name in os.listdir(bk):
    p = os.path.join(bk, name)
    m = os.lstat(p).st_mtime
    i = bisect.bisect_right(starts, m) - 1
    if i < 0 or m > wins[i][1]:
        unplaced += 1
        continue
    t = m + wins[i][2]
    os.utime(p, (t, t), follow_symlinks=False)
    moved += 1
print("busy runs spread from", fmt(end - (n - 1) * (end - start) / n), "to", fmt(end), "; backups aged:", moved, "not in any run's window:", unplaced)
