#!/usr/bin/env bash
# bench/year.sh — a year of the timer with its busy runs spread out, then
# one real idle sync: what sync's retention leaves (issue 49).
#
#   bench/year.sh -b BIN -w WS -o OUT
#
# Copies WS, a workspace bench/bigws.sh built (its use= must be the
# default $BENCH_DIR/scratch/ws), to OUT/ws; spreads its 100 busy runs
# evenly over the year and ages the backups each wrote to match
# (bench/yearspread.py); then runs one idle `handoff sync` with BIN as
# bigws.sh's last run does (hosts with empty inboxes at $BENCH_DIR/hosts,
# the workspace at $BENCH_DIR/scratch/ws, in a private mount namespace),
# whose retention removes what a year of the timer would have. Writes
# OUT/state.txt (du -sk of each part, as bigws.sh), OUT/sync.log (with
# --verbose, and /usr/bin/time -v) and OUT/receipt.json.
set -euo pipefail
BIN="" WS="" OUT=""
while getopts "b:w:o:" o; do
  case $o in
    b) BIN=$OPTARG ;; w) WS=$OPTARG ;; o) OUT=$OPTARG ;;
    *) sed -n 2,16p "$0" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] && [ -d "$WS/.handoff" ] && [ -n "$OUT" ] || { sed -n 2,16p "$0" >&2; exit 2; }
BIN=$(realpath "$BIN") OUT=$(realpath -m "$OUT")
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_DIR=${BENCH_DIR:-/srv/hbench}
USE=$BENCH_DIR/scratch/ws HOSTS=8 REPOS=100

if [ "${YEAR_INSIDE:-}" != 1 ]; then
  [ ! -e "$OUT/ws" ] || { echo "year: $OUT/ws exists" >&2; exit 1; }
  mkdir -p "$OUT/hosts" "$OUT/home"
  cp -a "$WS" "$OUT/ws"
  python3 "$HERE/yearspread.py" "$OUT/ws"
  YEAR_INSIDE=1 BENCH_DIR=$BENCH_DIR exec unshare -m --propagation private -- "$0" -b "$BIN" -w "$WS" -o "$OUT"
fi

mkdir -p "$BENCH_DIR/hosts" "$(dirname "$USE")"
mount --bind "$OUT/hosts" "$BENCH_DIR/hosts"
mount -t tmpfs year "$(dirname "$USE")"
mkdir -p "$USE"
mount --bind "$OUT/ws" "$USE"
cat >"$OUT/writers.yaml" <<EOY
version: 1
workspace: $USE
defaults: {harnesses: [.claude, .codex], max_depth: 2, timeout: 3h}
hosts:
EOY
for h in $(seq 1 "$HOSTS"); do
  cat >>"$OUT/writers.yaml" <<EOY
  - name: h$h
    transport: local
    discover: [{root: $BENCH_DIR/hosts/h$h/code, max_depth: 2}]
EOY
  for n in $(seq 1 "$REPOS"); do
    mkdir -p "$BENCH_DIR/hosts/h$h/code/g$(( (n - 1) / 10 + 1 ))/repo$n/"{.claude,.codex}/memory-handoffs
  done
done
/usr/bin/time -v env -u SSH_AUTH_SOCK HOME="$OUT/home" "$BIN" sync --manifest "$OUT/writers.yaml" --parallel "$HOSTS" --json --verbose \
  >"$OUT/receipt.json" 2>"$OUT/sync.log"
jq -c '{outcome, status, counts}' "$OUT/receipt.json"
(cd "$USE" && du -sk .handoff/* | sort -k2 && du -sk .handoff && du -sk --exclude=.handoff . | sed 's|\t\.$|\tcards and documents|' &&
  echo "receipts files: $(find .handoff/receipts -name '*.json' | wc -l)" &&
  echo "backups files: $(find .handoff/backups -type f | wc -l)" &&
  echo "ledger pages: $(sqlite3 .handoff/ledger.db 'pragma page_count') free: $(sqlite3 .handoff/ledger.db 'pragma freelist_count')") >"$OUT/state.txt"
grep -E 'old (receipts|backups) removed' "$OUT/sync.log" || true
cat "$OUT/state.txt"
