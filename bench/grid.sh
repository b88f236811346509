#!/usr/bin/env bash
# bench/grid.sh — run bench/run.sh over a grid and print one table.
#
#   bench/grid.sh                                   # the full grid of issue 6
#   KS="1 32" RS=10 FS=1 RTTS=20 N=3 bench/grid.sh  # a slice of it
#
# KS, RS, FS, RTTS are space-separated lists; N repetitions per cell; TOOLS
# (optional) a subset of "handoff rsync-plain rsync-pruned rclone". Each
# cell's files land in bench/results/<cell>-<time>/; the grid table (all
# cells run by this invocation) in bench/results/grid-<time>.md.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
KS=${KS:-"1 8 32"} RS=${RS:-"10 100"} FS=${FS:-"1 10"} RTTS=${RTTS:-"0 20 100"} N=${N:-5}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
csvs=()
for rtt in $RTTS; do for k in $KS; do for r in $RS; do for f in $FS; do
  echo "=== K=$k R=$r F=$f RTT=${rtt}ms N=$N" >&2
  "$HERE/run.sh" -k "$k" -r "$r" -f "$f" -t "$rtt" -n "$N" ${TOOLS:+-T "$TOOLS"}
  csvs+=("$(ls -td "$HERE"/results/K$k-R$r-F$f-RTT$rtt-*/ | head -1)runs.csv")
done; done; done; done
python3 "$HERE/report.py" --grid --csv "${csvs[@]}" | tee "$HERE/results/grid-$STAMP.md"
