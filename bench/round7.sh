#!/usr/bin/env bash
# bench/round7.sh — the cells of round seven (issue 49, docs/BENCHMARKS.md, round seven),
# each on both harnesses, one after the other: DELAY=nfq (real TCP, packets
# held by bench/cmd/nfqdelay) and DELAY=proxy (bench/cmd/delayproxy), all at
# RTT 100 ms, handoff with its default fan-out (PARALLEL=default).
#
#   bench/round7.sh                 # every cell, N=5 (about an hour here)
#   N=3 CELLS="bulk k1" bench/round7.sh
#
# CELLS picks from: bulk (K=8 R=100 F=10), k1 (K=1 R=100 F=10), idle (K=8
# R=100 F=0), fleet (K=32 R=10 F=2), big (K=64 and K=128, R=1 F=0, with
# the summed peak memory, MEM=1). The cells that share a shape run
# together, so bench/setup.sh builds each shape once. Each run.sh invocation
# leaves its files in bench/results/<cell>-<delay>-pdefault-<time>/; the grid
# of all of them goes to bench/results/round7-<time>.md.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-5}
CELLS=${CELLS:-"bulk k1 idle fleet big"}
DELAYS=${DELAYS:-"nfq proxy"}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
export PARALLEL=default
csvs=()
cell() { # k r f tools [env...]
  local k=$1 r=$2 f=$3 tools=$4 d
  shift 4
  for d in $DELAYS; do
    echo "=== K=$k R=$r F=$f delay=$d tools: $tools $*" >&2
    env DELAY="$d" "$@" "$HERE/run.sh" -k "$k" -r "$r" -f "$f" -t 100 -n "$N" -T "$tools"
    local name=K$k-R$r-F$f-RTT100
    [ "$d" = proxy ] || name=$name-$d
    csvs+=("$(ls -td "$HERE/results/$name-pdefault-"2*/ | head -1)runs.csv")
  done
}
for c in $CELLS; do
  case $c in
    bulk) cell 8 100 10 "handoff rsync-pruned rsync-fsync" ;;
    k1) cell 1 100 10 "handoff rsync-pruned rsync-fsync" ;;
    idle) cell 8 100 0 "handoff rsync-pruned" ;;
    fleet) cell 32 10 2 "handoff rsync-pruned rsync-fsync" ;;
    big) cell 64 1 0 "handoff rsync-pruned" MEM=1; cell 128 1 0 "handoff rsync-pruned" MEM=1 ;;
    *) echo "round7.sh: no cell $c" >&2; exit 2 ;;
  esac
done
python3 "$HERE/report.py" --grid --csv "${csvs[@]}" | tee "$HERE/results/round7-$STAMP.md"
