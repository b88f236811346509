#!/usr/bin/env python3
"""timeline.py PCAP [--client-port N] -- one SSH connection's exchanges.

Reads a capture that bench/run.sh took with PCAP=1 (host 1's end of the
link, before the nfq delay: a packet from the client is stamped on arrival
at the veth and reaches sshd one RTT later, when nfqdelay lets it go) and prints
one line a burst: who sent it, when (ms from the SYN), how many segments
and payload bytes, and how long the side that sent it had waited since
the other side's last data. A burst is the packets one side sends before
the other side sends data again. A pure ACK is not data, so a server
burst that follows only the client's ACK (Nagle waiting for it) shows as
a separate burst with the ACK counted in its wait.

    tcpdump must be installed (it decodes the capture).
"""

import argparse
import re
import subprocess
import sys

LINE = re.compile(
    r"^(\d+\.\d+) IP (\S+)\.(\d+) > (\S+)\.(\d+): Flags \[([^\]]*)\].*?length (\d+)"
)


def packets(pcap):
    out = subprocess.run(
        ["tcpdump", "-n", "-tt", "-r", pcap], capture_output=True, text=True, check=True
    ).stdout
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        t, src, sport, _dst, dport, flags, length = m.groups()
        yield float(t), src, int(sport), int(dport), flags, int(length)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pcap")
    ap.add_argument("--client-port", type=int, help="the connection's client port (default: the first SYN's)")
    a = ap.parse_args()
    pk = list(packets(a.pcap))
    port = a.client_port
    if port is None:
        syn = next((p for p in pk if p[4] == "S" and p[3] == 22), None)
        if syn is None:
            sys.exit("timeline.py: no SYN to port 22 in " + a.pcap)
        port = syn[2]
    conn = [p for p in pk if port in (p[2], p[3])]
    t0 = conn[0][0]
    bursts = []  # [side, start, end, segments, bytes, flags]
    last_data = {"client": None, "server": None}
    for t, _src, sport, _dport, flags, n in conn:
        side = "client" if sport == port else "server"
        if n == 0 and not set(flags) & set("SF"):
            continue  # a pure ACK
        if bursts and bursts[-1][0] == side:
            b = bursts[-1]
            b[2], b[3], b[4] = t, b[3] + 1, b[4] + n
            continue
        other = "server" if side == "client" else "client"
        bursts.append([side, t, t, 1, n, flags, last_data[other]])
        last_data[side] = t
    print(f"connection from client port {port}: {len(bursts)} bursts, {(conn[-1][0] - t0) * 1000:.0f} ms")
    print("| side | start ms | end ms | segments | bytes | since the other side's last burst ms |")
    print("|---|---|---|---|---|---|")
    for side, start, end, segs, n, flags, prev in bursts:
        wait = "" if prev is None else f"{(start - prev) * 1000:.0f}"
        tag = " (SYN)" if "S" in flags else " (FIN)" if "F" in flags else ""
        print(f"| {side}{tag} | {(start - t0) * 1000:.0f} | {(end - t0) * 1000:.0f} | {segs} | {n} | {wait} |")


if __name__ == "__main__":
    main()
