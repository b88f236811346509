#!/usr/bin/env bash
# bench/grid.sh — run bench/run.sh over a grid and print one table.
#
#   bench/grid.sh                                   # the full grid of issue 6, with the idle tick (F=0) of issue 18
#   KS="1 32" RS=10 FS=1 RTTS=20 N=3 bench/grid.sh  # a slice of it
#   WS="empty big" KS=8 RS=100 FS="0 10" RTTS=100 TOOLS=handoff bench/grid.sh
#                                                   # the big-workspace cells of issue 34
#
# KS, RS, FS, RTTS are space-separated lists; N repetitions per cell (N_BIG
# for cells of 3,200 repositories or more, K=32 R=100, whose runs take
# minutes); TOOLS (optional) a subset of "handoff rsync-plain rsync-pruned rsync-fsync
# rclone". Cells are taken shape by shape (K, R, F outermost), so that
# bench/setup.sh rebuilds each shape once; RTT is the inner loop. WS
# (default "empty") the workspaces handoff starts from (run.sh -w): with
# "empty big" each cell runs handoff on the empty and on the big
# workspace (bench/bigws.sh) side by side, and the table has a row for
# each, the big one with its ratio to the empty one.
#
# rclone runs one remote hash command per file, about two round trips per
# file and host, so a cell of R×F files per host at a high RTT takes it
# minutes per run: where the estimate (R·F·2.2·RTT + K·R·F·4.5 ms, fitted
# to the K=8 cells) is over RCLONE_MAX_S (default 120 s), rclone runs
# RCLONE_N times (default 1) after the other tools' runs, not alternating
# with them. The table says how many runs each median has.
#
# Each run.sh invocation's files land in bench/results/<cell>-<time>/; the
# grid table (all cells run by this invocation) in
# bench/results/grid-<time>.md. bench/report.py --grid over any set of
# runs.csv files merges the runs of a cell.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
KS=${KS:-"1 8 32"} RS=${RS:-"10 100"} FS=${FS:-"0 1 10"} RTTS=${RTTS:-"0 20 100"} N=${N:-5}
N_BIG=${N_BIG:-$N} RCLONE_MAX_S=${RCLONE_MAX_S:-120} RCLONE_N=${RCLONE_N:-1} WS=${WS:-empty}
TOOLS=${TOOLS:-"handoff rsync-plain rsync-pruned rsync-fsync rclone"}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
csvs=()
latest() { csvs+=("$(ls -td "$HERE"/results/K$1-R$2-F$3-RTT$4-*/ | head -1)runs.csv"); }
for k in $KS; do for r in $RS; do for f in $FS; do for rtt in $RTTS; do
  n=$N
  if (( k * r >= 3200 )); then n=$N_BIG; fi
  tools=$TOOLS rclone_apart=0
  est=$(awk -v k="$k" -v r="$r" -v f="$f" -v t="$rtt" 'BEGIN { printf "%d", r*f*2.2*t/1000 + k*r*f*0.0045 }')
  if [[ " $TOOLS " == *" rclone "* ]] && (( est > RCLONE_MAX_S )); then
    tools=$(echo " $TOOLS " | sed 's/ rclone / /; s/^ *//; s/ *$//')
    rclone_apart=1
  fi
  echo "=== K=$k R=$r F=$f RTT=${rtt}ms N=$n tools: $tools$( ((rclone_apart)) && echo "; rclone apart, N=$RCLONE_N (estimated ${est} s a run)")" >&2
  if [ -n "$tools" ]; then
    "$HERE/run.sh" -k "$k" -r "$r" -f "$f" -t "$rtt" -n "$n" -T "$tools" -w "$WS"
    latest "$k" "$r" "$f" "$rtt"
  fi
  if ((rclone_apart)); then
    "$HERE/run.sh" -k "$k" -r "$r" -f "$f" -t "$rtt" -n "$RCLONE_N" -T rclone
    latest "$k" "$r" "$f" "$rtt"
  fi
done; done; done; done
python3 "$HERE/report.py" --grid --csv "${csvs[@]}" | tee "$HERE/results/grid-$STAMP.md"
