#!/usr/bin/env python3
"""bench/waves.py — name a client's SFTP round trips from sftptrace logs.

  waves.py --rtt 100 TRACE_DIR_OR_LOGS...

Input: bench/cmd/sftptrace logs (one a session: time ns, > request or <
reply, type, id, length), written on the host side of a delayed link.

A request depends on a reply only if it reached the server at least one
RTT after the reply left it. Each request's wave is one more than the
highest wave among the replies that left at least an RTT before it
arrived (the first request's is 1). That is an upper bound on the chain
of round trips: a request that did not need the latest reply is counted
as if it did. Requests that overlap (sent together, or while others are
answered) share a wave.

Prints, per session, one row a wave: when it reached the server (ms after
the session's INIT), how long after the earliest reply it could have
followed (the client's own time, e.g. a local commit), and its requests
by type; then the total.
"""
import argparse
import os
import sys
from collections import Counter

NAMES = {1: "INIT", 2: "VERSION", 3: "OPEN", 4: "CLOSE", 5: "READ", 6: "WRITE", 7: "LSTAT", 8: "FSTAT",
         9: "SETSTAT", 10: "FSETSTAT", 11: "OPENDIR", 12: "READDIR", 13: "REMOVE", 14: "MKDIR", 15: "RMDIR",
         16: "REALPATH", 17: "STAT", 18: "RENAME", 19: "READLINK", 20: "SYMLINK", 200: "EXTENDED"}


def session(path, rtt_ns, tol_ns):
    ev = []
    for line in open(path):
        t, d, typ, pid, n = line.split()
        ev.append((int(t), d, int(typ), int(pid), int(n)))
    ev.sort(key=lambda e: e[0])
    reqs = [e for e in ev if e[1] == ">"]
    reps = [e for e in ev if e[1] == "<"]
    if not reqs:
        return None
    gen_of = {}  # request id -> wave
    t0 = reqs[0][0]
    waves = {}  # wave -> [first arrival, Counter, slack ns]
    j = 0
    best = 0  # highest wave among replies that left long enough ago
    best_t = None  # when the latest of those left
    for t, _, typ, rid, _ in reqs:
        while j < len(reps) and reps[j][0] <= t - rtt_ns + tol_ns:
            g = gen_of.get(reps[j][3], 0)
            if g >= best:
                best, best_t = g, reps[j][0]
            j += 1
        g = best + 1
        gen_of[rid] = g
        w = waves.setdefault(g, [t, Counter(), None])
        w[1][NAMES.get(typ, str(typ))] += 1
        if w[2] is None and best_t is not None:
            w[2] = t - best_t - rtt_ns
    return t0, reqs[-1][0], waves


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rtt", type=float, required=True, help="ms")
    ap.add_argument("--tol", type=float, default=0.5, help="ms of clock slack")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = []
    for p in a.paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".log"))
        else:
            files.append(p)
    for f in files:
        r = session(f, int(a.rtt * 1e6), int(a.tol * 1e6))
        if r is None:
            continue
        t0, t1, waves = r
        print(f"### {os.path.basename(f)}: {len(waves)} waves, {sum(sum(w[1].values()) for w in waves.values())} requests, "
              f"{(t1 - t0) / 1e6:.0f} ms from INIT to the last request\n")
        print("| wave | at ms | client's own ms | requests |")
        print("|---|---|---|---|")
        for g in sorted(waves):
            t, c, slack = waves[g]
            own = f"{slack / 1e6:.0f}" if slack is not None else "–"
            print(f"| {g} | {(t - t0) / 1e6:.0f} | {own} | {', '.join(f'{k}×{v}' for k, v in c.most_common())} |")
        print()


if __name__ == "__main__":
    sys.exit(main())
