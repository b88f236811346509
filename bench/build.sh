#!/usr/bin/env bash
# bench/build.sh OUT — build the handoff binary to OUT from a snapshot of
# HANDOFF_REV (default: $BENCH_DIR/pin-rev if present, else HEAD) taken with git archive, so that a benchmark
# measures one known revision even while the working tree is being edited.
# HANDOFF_REV=worktree builds the working tree instead. Writes OUT.rev.
# With EXTRA_TEST_FILE=path (relative to the repository), that file is
# copied from the working tree into the snapshot too (bench/ingest.sh uses
# it for ingest/bench_naive_test.go); SNAPSHOT_DIR receives the snapshot.
set -euo pipefail
OUT=$1
MAIN=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=${BENCH_DIR:-/srv/hbench}
# $BENCH_DIR/pin-rev, when present, pins the default revision for a series
# of cells (a grid should measure one commit even if HEAD moves meanwhile).
REV=${HANDOFF_REV:-$(cat "$BENCH_DIR/pin-rev" 2>/dev/null || echo HEAD)}
SNAP=${SNAPSHOT_DIR:-$BENCH_DIR/src}
if [ "$REV" = worktree ]; then
  (cd "$MAIN" && go build -o "$OUT" ./cmd/handoff)
  echo "worktree of $(git -C "$MAIN" rev-parse --short HEAD) (uncommitted changes included)" >"$OUT.rev"
  exit 0
fi
commit=$(git -C "$MAIN" rev-parse "$REV")
rm -rf "$SNAP"
mkdir -p "$SNAP"
git -C "$MAIN" archive "$commit" | tar -x -C "$SNAP"
if [ -n "${EXTRA_TEST_FILE:-}" ]; then cp "$MAIN/$EXTRA_TEST_FILE" "$SNAP/$EXTRA_TEST_FILE"; fi
(cd "$SNAP" && go build -o "$OUT" ./cmd/handoff)
echo "commit ${commit:0:12}" >"$OUT.rev"
echo "build: handoff from commit ${commit:0:12}"
