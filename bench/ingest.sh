#!/usr/bin/env bash
# bench/ingest.sh — the ingester alone (issue 6): N stored handoffs (default
# 10,000) applied by the transactional ingester vs a naive applier (no fsync,
# no backup, no ledger), each in its own process so that peak RSS and fsync
# counts are its own, each on a fresh journaled ext4; plus the cost of one
# 4 KiB write + fsync there.
#
#   bench/ingest.sh [N]          # prints a markdown table; also bench/results/ingest-<time>/
#   RUNS=5 (default)             # plain runs of each applier, alternating; medians
#   PROFILE=1 bench/ingest.sh    # adds a CPU profile of the transactional run (pprof -top)
#   INGEST_B_REV=REV             # adds transactional-b, the ingester at REV (or worktree), side by side
#
# handoffs/s and peak RSS come from a plain run (/usr/bin/time -v); fsyncs
# per handoff from a second run under strace -c -f (fsync + fdatasync, the
# ingester's own and SQLite's), minus the fsyncs of a seed-only run.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MAIN=$(cd "$HERE/.." && pwd)
N=${1:-10000}
RUNS=${RUNS:-5}
export HANDOFF_BENCH_N=$N
OUT=$HERE/results/ingest-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
TB=$OUT/ingest.test
# The ingester of a snapshot of HANDOFF_REV (default HEAD), plus this
# benchmark file from the working tree (see bench/build.sh).
BENCH_DIR=${BENCH_DIR:-/srv/hbench}
SNAP=$BENCH_DIR/src-ingest
SNAPSHOT_DIR=$SNAP EXTRA_TEST_FILE=ingest/bench_naive_test.go "$HERE/build.sh" "$OUT/handoff" >&2
if [ "${HANDOFF_REV:-HEAD}" = worktree ]; then SNAP=$MAIN; fi
(cd "$SNAP" && go test -c -o "$TB" ./ingest/)
# INGEST_B_REV=REV (a commit, or worktree) adds the applier
# transactional-b: the transactional benchmark of an ingest test binary
# built at REV, run in turn with the others, for a change's effect
# measured side by side (HANDOFF_REV gives the one it is compared with).
TBB=
if [ -n "${INGEST_B_REV:-}" ]; then
  TBB=$OUT/ingest-b.test
  SNAPB=$BENCH_DIR/src-ingest-b
  HANDOFF_REV=$INGEST_B_REV SNAPSHOT_DIR=$SNAPB EXTRA_TEST_FILE=ingest/bench_naive_test.go "$HERE/build.sh" "$OUT/handoff-b" >&2
  if [ "$INGEST_B_REV" = worktree ]; then SNAPB=$MAIN; fi
  (cd "$SNAPB" && go test -c -o "$TBB" ./ingest/)
fi
# Each run gets a freshly made journaled ext4 (a loop-mounted image) for
# its files, as in bench/run.sh (bench/scratch.sh says why).
. "$HERE/scratch.sh"
SCRATCH=$BENCH_DIR/scratch-ingest
fresh_scratch_tmp() {
  fresh_scratch "$SCRATCH" 4G 300000
  mkdir -p "$SCRATCH/tmp"
  export TMPDIR=$SCRATCH/tmp
}
trap 'unmount_scratch "$SCRATCH"' EXIT

# binary NAME, bench NAME: the test binary and benchmark an applier runs.
binary() { if [ "$1" = transactional-b ]; then echo "$TBB"; else echo "$TB"; fi; }
bench() { echo "${1%-b}"; }
plain() { # name run -> one plain run (/usr/bin/time -v) on a fresh fs
  local name=$1 run=$2
  fresh_scratch_tmp
  /usr/bin/time -v "$(binary "$name")" -test.run '^$' -test.bench "^BenchmarkIngestVsNaive/$(bench "$name")\$" -test.benchtime 1x \
    >"$OUT/$name.$run.txt" 2>"$OUT/$name.$run.time"
}
traced() { # name -> one run under strace, for the fsync count
  local name=$1
  fresh_scratch_tmp
  strace -f -c -e trace=fsync,fdatasync -o "$OUT/$name.strace" \
    "$(binary "$name")" -test.run '^$' -test.bench "^BenchmarkIngestVsNaive/$(bench "$name")\$" -test.benchtime 1x >/dev/null 2>&1
}
# RUNS plain runs of each applier, alternating; the table gives medians.
# transactional-unscreened is the ingester without the injection-like-
# content screen (issue 15): run beside it, for what the screen costs.
APPLIERS="transactional transactional-unscreened naive"
if [ -n "$TBB" ]; then APPLIERS="$APPLIERS transactional-b"; fi
for r in $(seq "$RUNS"); do for b in $APPLIERS; do plain "$b" "$r"; done; done
for b in seed-only $APPLIERS; do traced "$b"; done
if [ "${PROFILE:-0}" = 1 ]; then # where the transactional ingester's time goes
  "$TB" -test.run '^$' -test.bench '^BenchmarkIngestVsNaive/transactional$' -test.benchtime 1x \
    -test.cpuprofile "$OUT/transactional.cpu" >/dev/null
  go tool pprof -top -nodecount 40 "$TB" "$OUT/transactional.cpu" >"$OUT/transactional.top" 2>/dev/null || true
  go tool pprof -top -cum -nodecount 60 "$TB" "$OUT/transactional.cpu" >"$OUT/transactional.cum" 2>/dev/null || true
fi
fresh_scratch_tmp
"$TB" -test.run '^$' -test.bench '^BenchmarkFsync4K$' -test.benchtime 2000x >"$OUT/fsync.txt"
"$TB" -test.run '^$' -test.bench '^BenchmarkFsyncNewFile4K$' -test.benchtime 2000x >"$OUT/fsync-new.txt"

calls() { awk '$NF == "fsync" || $NF == "fdatasync" { s += $4 } END { print s + 0 }' "$OUT/$1.strace"; }
metric() { grep -o "[0-9.]* $2" "$OUT/$1.txt" | head -1 | cut -d' ' -f1; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# runs NAME METRIC: the metric of each plain run; med: their median
runs() { for r in $(seq "$RUNS"); do metric "$1.$r" "$2"; done; }
med() { runs "$1" "$2" | median; }
# peak RSS: the largest of the plain runs
rss() { for r in $(seq "$RUNS"); do awk -F: '/Maximum resident set size/ { printf "%.1f\n", $2 / 1024 }' "$OUT/$1.$r.time"; done | sort -g | tail -1; }
seed=$(calls seed-only)
fs_med=$(metric fsync 'median-µs/fsync')
{
  echo "### Ingest alone: $N handoffs (40% cards, 40% document appends, 10% review, 10% malformed); handoff $(cat "$OUT/handoff.rev")"
  echo
  echo "| applier | handoffs/s (median of $RUNS) | runs | ms/handoff | fsyncs/handoff (strace: all) | file fsyncs/handoff (durable) | peak RSS MiB (whole process, largest run) |"
  echo "|---|---|---|---|---|---|---|"
  for b in $APPLIERS; do
    hs=$(med "$b" handoffs/s)
    all=$(( $(calls "$b") - seed ))
    printf '| %s | %.0f | %s | %.3f | %.2f | %s | %s |\n' "$b" "$hs" "$(runs "$b" handoffs/s | tr '\n' ' ' | sed 's/ $//')" "$(awk -v h="$hs" 'BEGIN{print 1000/h}')" \
      "$(awk -v a="$all" -v n="$N" 'BEGIN{print a/n}')" "$(metric "$b.1" file-fsyncs/handoff)" "$(rss "$b")"
  done
  t=$(med transactional handoffs/s) nv=$(med naive handoffs/s)
  all=$(( $(calls transactional) - seed ))
  echo
  echo "transactional / naive throughput (ratio of the medians): $(awk -v a="$t" -v b="$nv" 'BEGIN{printf "%.1f%%", 100*a/b}')."
  u=$(med transactional-unscreened handoffs/s)
  # per run pair: the screened run's throughput over the unscreened one's
  pairs=$(for r in $(seq "$RUNS"); do awk -v a="$(metric "transactional.$r" handoffs/s)" -v b="$(metric "transactional-unscreened.$r" handoffs/s)" 'BEGIN{printf "%.3f ", a/b}'; done)
  echo "injection screen: transactional (screened) / transactional-unscreened throughput (ratio of the medians): $(awk -v a="$t" -v b="$u" 'BEGIN{printf "%.3f", a/b}') (per run pair: ${pairs% })."
  if [ -n "$TBB" ]; then
    tb=$(med transactional-b handoffs/s)
    pairs=$(for r in $(seq "$RUNS"); do awk -v a="$(metric "transactional-b.$r" handoffs/s)" -v b="$(metric "transactional.$r" handoffs/s)" 'BEGIN{printf "%.3f ", a/b}'; done)
    echo "transactional-b ($(cat "$OUT/handoff-b.rev")) / transactional throughput (ratio of the medians): $(awk -v a="$tb" -v b="$t" 'BEGIN{printf "%.3f", a/b}') (per run pair: ${pairs% }); transactional-b / naive: $(awk -v a="$tb" -v b="$nv" 'BEGIN{printf "%.1f%%", 100*a/b}')."
  fi
  fn_med=$(metric fsync-new 'median-µs/fsync') fn_file=$(metric fsync-new 'median-µs/durable-file')
  per=$(awk -v a="$all" -v n="$N" 'BEGIN{printf "%.2f", a/n}')
  echo "fsync cost here: rewriting 4 KiB of one file + fsync: median ${fs_med} µs (p90 $(metric fsync 'p90-µs/fsync') µs); a new 4 KiB file durably (create, write, fsync, rename, fsync the directory): median ${fn_file} µs, its fsyncs median ${fn_med} µs each."
  echo "fsync limit at $per fsyncs/handoff: $(awk -v p="$per" -v f="$fn_med" 'BEGIN{printf "%.2f ms/handoff (%.0f handoffs/s)", p*f/1000, 1e6/(p*f)}') at ${fn_med} µs per fsync ($(awk -v p="$per" -v f="$fs_med" 'BEGIN{printf "%.2f ms", p*f/1000}') at ${fs_med} µs); measured $(awk -v h="$t" 'BEGIN{printf "%.2f ms/handoff", 1000/h}'): fsync waits are about $(awk -v p="$per" -v f="$fn_med" -v h="$t" 'BEGIN{printf "%.0f%%", 100*(p*f/1000)/(1000/h)}') of the ingester's time."
  echo "(seed-only run, subtracted: $seed fsyncs; raw files in $OUT)"
} | tee "$OUT/table.md"
cp "$OUT/table.md" "$HERE/results/ingest-latest.md"
