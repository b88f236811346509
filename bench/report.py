#!/usr/bin/env python3
"""bench/report.py — medians and ratios of medians for one cell (or a grid).

  report.py --csv runs.csv [--floor-rt N --rtt MS --rtt-check TEXT]
  report.py --grid --csv results/*/runs.csv   # one row per cell

In the grid, "handoff round trips (wall)" is the time the RTT adds to
handoff's median over the same shape at RTT 0, divided by the RTT: the
round trips on the run's critical path. The proxy's count (direction
changes of each connection) over-counts when many requests are in flight.

Ratios are of medians: handoff's median over pruned rsync's median, etc.
Only verified runs count; a tool with an unverified run is flagged.
Variants of handoff run side by side (tools named handoff-X, see run.sh)
get a column "ratio vs handoff" and their own round-trip line.

"peak RSS" is the largest of the runs' rss_mib (GNU time's %M: the
largest single process of a run, the sync or a worker). Runs on the big
workspace (run.sh -w big) are the tools X+big, with a column "big /
empty": X+big's median over X's. In the grid they are the cell's row of
ws "big" (beside the same invocation's rsync and rclone runs), and
"handoff big / empty" is handoff's median there over the row "empty".
"""
import argparse
import csv
import statistics
import sys
from collections import defaultdict

ORDER = ["handoff", "rsync-plain", "rsync-pruned", "rsync-fsync", "rclone"]


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            rows.extend(csv.DictReader(f))
    return rows


def cell_table(rows):
    by = defaultdict(list)
    bad = defaultdict(int)
    rts = defaultdict(list)
    rtmax = defaultdict(list)
    cpu = defaultdict(list)
    rss = defaultdict(list)
    for r in rows:
        if r["verified"] == "ok":
            by[r["tool"]].append(float(r["seconds"]))
            if r.get("cpu_s"):
                cpu[r["tool"]].append(float(r["cpu_s"]))
            if r.get("rss_mib"):
                rss[r["tool"]].append(float(r["rss_mib"]))
        else:
            bad[r["tool"]] += 1
        if r.get("rt_per_host_median"):
            rts[r["tool"]].append(int(r["rt_per_host_median"]))
            rtmax[r["tool"]].append(int(r["rt_per_host_max"]))
    med = {t: statistics.median(v) for t, v in by.items() if v}
    cpu_med = {t: statistics.median(v) for t, v in cpu.items() if v}
    rss_max = {t: max(v) for t, v in rss.items() if v}
    return by, bad, med, rts, rtmax, cpu_med, rss_max


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.2f}×"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", nargs="+", required=True)
    ap.add_argument("--floor-rt", type=int)
    ap.add_argument("--rtt", type=float)
    ap.add_argument("--rtt-check", default="")
    ap.add_argument("--grid", action="store_true")
    a = ap.parse_args()
    rows = load(a.csv)
    if a.grid:
        delays = sorted({r.get("delay") or "proxy" for r in rows})
        for d in delays:
            if len(delays) > 1:
                print(f"\n#### delay: {d}\n")
            grid([r for r in rows if (r.get("delay") or "proxy") == d])
        if any(r.get("client_cg_s") for r in rows):
            cpu_split(rows)
        return
    single(rows, a)


def cpu_split(rows):
    """Medians of each side's CPU (cgroups) and of the machine's busy
    time, per run and per handoff, and the summed peak memory."""
    by = defaultdict(list)
    for r in rows:
        if r["verified"] == "ok" and r.get("client_cg_s"):
            by[(r.get("delay") or "proxy", int(r["k"]), int(r["r"]), int(r["f"]), r["tool"])].append(r)
    print("\n| delay | K | R | F | tool | runs | median s | client cpu s | hosts' sshd cpu s | delay cpu s | sum s | machine busy s | sum ms / handoff | machine ms / handoff | summed peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(by, key=lambda k: (k[0], k[1:4], ORDER.index(k[4]) if k[4] in ORDER else 99)):
        rs = by[key]
        m = lambda c: statistics.median(float(r[c]) for r in rs)
        n = key[1] * key[2] * key[3]
        tot = m("client_cg_s") + m("hosts_cg_s") + m("delay_cg_s")
        per = f"{1000 * tot / n:.2f}" if n else "–"
        mper = f"{1000 * m('machine_cpu_s') / n:.2f}" if n else "–"
        mems = [float(r["mem_peak_mib"]) for r in rs if r.get("mem_peak_mib")]
        mem = f"{max(mems):.0f}" if mems else "–"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {len(rs)} | {m('seconds'):.2f} | {m('client_cg_s'):.2f} | {m('hosts_cg_s'):.2f} | {m('delay_cg_s'):.2f} | {tot:.2f} | {m('machine_cpu_s'):.2f} | {per} | {mper} | {mem} |")


def grid(rows):
    if True:
        cells = defaultdict(list)
        shape = lambda r: (int(r["k"]), int(r["r"]), int(r["f"]), int(r["rtt_ms"]))
        big = {shape(r) for r in rows if r.get("ws") == "big"}
        for r in rows:
            if r["tool"].endswith("+big"):
                cells[shape(r) + ("big",)].append(dict(r, tool=r["tool"].removesuffix("+big")))
                continue
            cells[shape(r) + ("empty",)].append(r)
            if not r.get("ws") and shape(r) in big:
                cells[shape(r) + ("big",)].append(r)  # rsync, rclone: the same for both
        meds = {key: cell_table(rs)[2] for key, rs in cells.items()}
        print("| K | R | F | RTT ms | ws | runs handoff / plain / pruned / fsync / rclone | handoff s | rsync plain s | rsync pruned s | rsync --fsync s | rclone s | handoff / pruned rsync | handoff / fsync rsync | handoff / rclone | handoff big / empty | handoff cpu s | pruned rsync cpu s | handoff peak RSS MiB | handoff round trips (wall) | floor | proxy-counted |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for key in sorted(cells, key=lambda k: (k[:4], k[4] != "empty", k[4])):
            by, bad, med, rts, _, cpu, rss = cell_table(cells[key])
            runs = " / ".join(str(len(by.get(t, []))) for t in ORDER)
            f = lambda t: (f"{med[t]:.2f}" + (f" ({bad[t]} bad)" if bad[t] else "")) if t in med else ("–" if not bad[t] else f"{bad[t]} bad")
            rt = str(int(statistics.median(rts["handoff"]))) if rts["handoff"] else "–"
            # Round trips on the critical path: the time RTT adds to the
            # run, over the RTT (against the same shape at RTT 0).
            wall_rt = "–"
            base = meds.get(key[:3] + (0, key[4]), {}).get("handoff")
            if key[3] > 0 and base is not None and "handoff" in med:
                n = (med["handoff"] - base) / (key[3] / 1000)
                # Below 1: the run is CPU-bound and the RTT adds nothing
                # that stands out of the noise.
                wall_rt = f"{n:.0f}" if n >= 1 else "–"
            floors = [int(r["floor_rt"]) for r in cells[key] if r.get("floor_rt")]
            floor = str(floors[0]) if floors else "–"
            c = lambda t: f"{cpu[t]:.2f}" if t in cpu else "–"
            big = ratio(med.get("handoff"), meds.get(key[:4] + ("empty",), {}).get("handoff")) if key[4] != "empty" else "–"
            mem = f"{rss['handoff']:.0f}" if "handoff" in rss else "–"
            print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {runs} | {f('handoff')} | {f('rsync-plain')} | {f('rsync-pruned')} | {f('rsync-fsync')} | {f('rclone')} | "
                  f"{ratio(med.get('handoff'), med.get('rsync-pruned'))} | {ratio(med.get('handoff'), med.get('rsync-fsync'))} | {ratio(med.get('handoff'), med.get('rclone'))} | {big} | "
                  f"{c('handoff')} | {c('rsync-pruned')} | {mem} | {wall_rt} | {floor} | {rt} |")


def single(rows, a):
    by, bad, med, rts, rtmax, cpu, rss = cell_table(rows)
    cell = rows[0]["cell"] if rows else "?"
    print(f"### {cell}\n")
    if a.rtt_check:
        print(f"{a.rtt_check}\n")
    variants = any(t.startswith("handoff-") or t.endswith("+big") for t in set(by) | set(bad))
    bigs = any(t.endswith("+big") for t in set(by) | set(bad))
    bcol = " big / empty |" if bigs else ""
    vs = " ratio vs handoff |" if variants else ""
    srv = defaultdict(list)
    for r in rows:
        if r["verified"] == "ok" and r.get("server_cpu_s"):
            srv[r["tool"]].append(float(r["server_cpu_s"]))
    print("| tool | runs ok | median s | min s | max s | median cpu s | median sshd cpu s | peak RSS MiB | ratio vs pruned rsync | ratio vs rclone |" + vs + bcol)
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if variants else "") + ("---|" if bigs else ""))
    for t in ORDER + sorted(set(by) - set(ORDER)):
        if t not in by and not bad[t]:
            continue
        v = by.get(t, [])
        m = med.get(t)
        flag = f" ({bad[t]} failed verification)" if bad[t] else ""
        vcol = f" {ratio(m, med.get('handoff'))} |" if variants else ""
        if bigs:
            vcol += f" {ratio(m, med.get(t.removesuffix('+big')))} |" if t.endswith("+big") else " – |"
        cs = f"{cpu[t]:.2f}" if t in cpu else "–"
        ms = f"{rss[t]:.0f}" if t in rss else "–"
        ss = f"{statistics.median(srv[t]):.2f}" if srv.get(t) else "–"
        print(f"| {t} | {len(v)}{flag} | {m:.2f} | {min(v):.2f} | {max(v):.2f} | {cs} | {ss} | {ms} | {ratio(m, med.get('rsync-pruned'))} | {ratio(m, med.get('rclone'))} |{vcol}"
              if v else f"| {t} | 0{flag} | – | – | – | – | – | – | – | – |" + (" – |" if variants else "") + (" – |" if bigs else ""))
    if variants:
        print("\nruns (s, in the order run): " + "; ".join(
            f"{t}: " + " ".join(r["seconds"] + ("" if r["verified"] == "ok" else "(bad)") for r in rows if r["tool"] == t)
            for t in ORDER + sorted(set(by) - set(ORDER)) if t in by or bad[t]))
    for h in [t for t in ["handoff"] + sorted(set(rts) - {"handoff"}) if rts.get(t)]:
        rt = statistics.median(rts[h])
        mx = max(rtmax[h])
        line = f"\n{h} round trips per host (counted at the proxy): median {rt:.0f}, max {mx}"
        if a.floor_rt:
            line += f"; floor {a.floor_rt} (SFTP session setup + 3 directory levels + read + acknowledge): {rt / a.floor_rt:.1f}× the floor"
            if a.rtt:
                line += f"; at {a.rtt:.0f} ms that is {rt * a.rtt / 1000:.1f} s of waiting vs a floor of {a.floor_rt * a.rtt / 1000:.1f} s"
        print(line)
    for t, n in bad.items():
        if n:
            bad_rows = [r for r in rows if r["tool"] == t and r["verified"] != "ok"]
            print(f"\n{t}: {n} run(s) failed verification, e.g.: {bad_rows[0]['verified']}", file=sys.stdout)


if __name__ == "__main__":
    main()
