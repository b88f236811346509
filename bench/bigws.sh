#!/usr/bin/env bash
# bench/bigws.sh — the big workspace: a year of memory, made by the handoff
# under test (issue 34).
#
#   bench/bigws.sh -b BIN [-o DIR] [-u USE] [-c CARDS] [-s CHUNK] [-n RECEIPTS]
#
# Makes, with the handoff binary BIN, a workspace holding CARDS memory
# cards (100,000) and twice as many ledger handoffs, fed through real
# `handoff sync` runs over the local transport in chunks of CHUNK (2,000;
# so 100 syncs): half card creations, each of its own card, half appends
# to 300 documents in turn (bench/cmd/bigws says what each handoff holds),
# from the inboxes of 8 hosts x 100 repositories x 2 harnesses, the shape
# of bench/setup.sh's K=8 R=100 hosts. Then one idle sync, and RECEIPTS
# (17,520: a sync every 30 minutes for a year) runs in all: the idle run's
# receipt written again by the receipts package's writer with fresh run
# ids and times (quiet inboxes counted, as sync writes a per-run
# receipt), every 30 minutes back from the first real run, each with its
# ledger row (bench/cmd/bigws receipts); then a last idle sync, whose
# retention (the manifest's defaults: receipts.keep 90d, keep_idle 7d)
# removes what a year of the timer would have removed. All busy runs are
# the last hour's, so every busy receipt outlives the 90 days: an upper
# bound for a year whose busy runs are spread out. DIR/state.txt says
# what each part of the workspace takes on disk (du). The walk hints the
# syncs left are then removed (the benchmark brings its own).
#
# The syncs run in a private mount namespace where the generated hosts'
# trees are at $BENCH_DIR/hosts and the workspace at USE (default
# $BENCH_DIR/scratch/ws, where bench/run.sh uses it), so the ledger's
# inboxes, the receipts' paths and the runs' receipt paths are those a
# year of the benchmark's own ticks would have left. Nothing outside DIR
# changes; the shared hosts and scratch are not touched.
#
# The result is cached: DIR defaults to $BENCH_DIR/bigws/<first 12 hex of
# BIN's sha256>, and a second call with the same parameters only prints
# DIR/ws. The workspace's ledger is the schema BIN writes, since BIN made
# it. Prints the workspace's path on stdout; progress and the build time
# on stderr (also in DIR/build.txt). Run it under the benchmark's lock
# (flock /tmp/hbench.lock), as bench/run.sh -w big does: it keeps both
# cores busy for minutes.
set -euo pipefail

BIN="" OUT="" USE="" CARDS=100000 CHUNK=2000 RECEIPTS=17520
HOSTS=8 REPOS=100 DOCS=300
while getopts "b:o:u:c:s:n:" o; do
  case $o in
    b) BIN=$OPTARG ;; o) OUT=$OPTARG ;; u) USE=$OPTARG ;; c) CARDS=$OPTARG ;; s) CHUNK=$OPTARG ;; n) RECEIPTS=$OPTARG ;;
    *) sed -n 2,40p "$0" >&2; exit 2 ;;
  esac
done
[ -n "$BIN" ] && [ -x "$BIN" ] || { echo "bigws: -b BIN: an executable handoff binary is needed" >&2; exit 2; }
BIN=$(realpath "$BIN")
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_DIR=${BENCH_DIR:-/srv/hbench}
USE=${USE:-$BENCH_DIR/scratch/ws}
OUT=${OUT:-$BENCH_DIR/bigws/$(sha256sum "$BIN" | cut -c1-12)}
CHUNKS=$((2 * CARDS / CHUNK))
PARAMS="year=compact+retained cards=$CARDS chunk=$CHUNK receipts=$RECEIPTS hosts=$HOSTS repos=$REPOS docs=$DOCS use=$USE"

# state_du WS: the disk each part of the workspace WS takes (du, KiB):
# handoff's own state (.handoff, each entry, then in all) and the rest
# (cards and documents).
state_du() {
  local ws=$1
  (cd "$ws" && du -sk .handoff/* | sort -k2 && du -sk .handoff && du -sk --exclude=.handoff . | sed 's|\t\.$|\tcards and documents|' &&
    echo "receipts files: $(find .handoff/receipts -name '*.json' | wc -l)")
}

# --- inside the private mount namespace (the script calls itself) -----------
if [ "${BIGWS_INSIDE:-}" = 1 ]; then
  T=$OUT.build
  mkdir -p "$BENCH_DIR/hosts" "$(dirname "$USE")"
  mount --bind "$T/hosts" "$BENCH_DIR/hosts"
  mount -t tmpfs bigws "$(dirname "$USE")"
  mkdir -p "$USE"
  mount --bind "$T/ws" "$USE"
  cat >"$T/writers.yaml" <<EOF
version: 1
workspace: $USE
defaults: {harnesses: [.claude, .codex], max_depth: 2, timeout: 3h}
hosts:
EOF
  for h in $(seq 1 "$HOSTS"); do
    cat >>"$T/writers.yaml" <<EOF
  - name: h$h
    transport: local
    discover: [{root: $BENCH_DIR/hosts/h$h/code, max_depth: 2}]
EOF
    for n in $(seq 1 "$REPOS"); do
      mkdir -p "$BENCH_DIR/hosts/h$h/code/g$(( (n - 1) / 10 + 1 ))/repo$n/"{.claude,.codex}/memory-handoffs
    done
  done
  "$BIN" init --workspace "$USE" >/dev/null
  sync_chunk() { # want: one sync, which must pull and apply want handoffs
    local want=$1
    env -u SSH_AUTH_SOCK HOME="$T/home" "$BIN" sync --manifest "$T/writers.yaml" --parallel "$HOSTS" --json >"$T/receipt.json" 2>>"$T/sync.log" ||
      { echo "bigws: a sync failed (see $T/sync.log)" >&2; exit 1; }
    ok=$(jq ".outcome == \"ok\" and .counts.pulled == $want and (.counts.promoted + .counts.routed) == $want" "$T/receipt.json")
    [ "$ok" = true ] || { echo "bigws: a sync did not apply $want: $(jq -c '{outcome, counts}' "$T/receipt.json")" >&2; exit 1; }
    find "$BENCH_DIR/hosts" -name processed -type d -prune -exec rm -rf {} +
  }
  t0=$(date +%s)
  for c in $(seq 0 $((CHUNKS - 1))); do
    "$T/bigws" handoffs -root "$BENCH_DIR/hosts" -from $((c * CHUNK)) -count "$CHUNK" -hosts "$HOSTS" -repos "$REPOS" -docs "$DOCS"
    sync_chunk "$CHUNK"
    if (( (c + 1) % 10 == 0 )); then echo "bigws: $(( (c + 1) * CHUNK )) handoffs ingested, $(( $(date +%s) - t0 )) s" >&2; fi
  done
  sync_chunk 0 # the idle run, whose receipt the year's are copies of
  t1=$(date +%s)
  "$T/bigws" receipts -ws "$USE" -n $((RECEIPTS - CHUNKS - 2))
  sync_chunk 0 # the year's last run, and its retention
  state_du "$USE" >"$T/state.txt"
  rm -rf "$USE/.handoff/walks"
  echo "syncs $((t1 - t0)) s, receipts $(( $(date +%s) - t1 )) s" >"$T/times.txt"
  exit 0
fi

# --- the cache -------------------------------------------------------------
if [ "$(cat "$OUT/done" 2>/dev/null)" = "$PARAMS" ] && [ -d "$OUT/ws" ]; then
  echo "bigws: $OUT/ws ($(cat "$OUT/build.txt" 2>/dev/null))" >&2
  echo "$OUT/ws"
  exit 0
fi
command -v jq >/dev/null || { echo "bigws: jq is needed" >&2; exit 1; }
echo "bigws: building $OUT/ws with $BIN: $CARDS cards, $((2 * CARDS)) handoffs in $CHUNKS syncs, $RECEIPTS runs" >&2
start=$(date +%s)
rm -rf "$OUT" "$OUT.build"
mkdir -p "$OUT.build/ws" "$OUT.build/hosts" "$OUT.build/home"
(cd "$HERE/.." && go build -o "$OUT.build/bigws" ./bench/cmd/bigws)
BIGWS_INSIDE=1 OUT=$OUT USE=$USE BENCH_DIR=$BENCH_DIR unshare -m --propagation private -- \
  "$0" -b "$BIN" -o "$OUT" -u "$USE" -c "$CARDS" -s "$CHUNK" -n "$RECEIPTS"
mkdir -p "$OUT"
mv "$OUT.build/ws" "$OUT/ws"
took=$(( $(date +%s) - start ))
echo "built in $took s ($(cat "$OUT.build/times.txt")) by $BIN (sha256 $(sha256sum "$BIN" | cut -c1-12)); $(du -sh "$OUT/ws" | cut -f1), $(find "$OUT/ws" | wc -l) files" >"$OUT/build.txt"
cp "$OUT.build/state.txt" "$OUT/state.txt"
rm -rf "$OUT.build"
echo "$PARAMS" >"$OUT/done"
echo "bigws: $(cat "$OUT/build.txt")" >&2
echo "$OUT/ws"
