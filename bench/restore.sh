#!/usr/bin/env bash
# bench/restore.sh -k K — put every host's handoffs back into their inboxes:
# remove the inbox directories (with processed/ and malformed/) and copy the
# pristine handoffs back as new, separate files (cp -a keeps their old
# mtimes, so they are past settle). Hosts are restored in parallel.
set -euo pipefail
K=2
while getopts "k:" o; do case $o in k) K=$OPTARG ;; *) exit 2 ;; esac; done
BENCH_DIR=${BENCH_DIR:-/srv/hbench}
for h in $(seq 1 "$K"); do
  (
    HD=$BENCH_DIR/hosts/h$h
    PR=$BENCH_DIR/pristine/h$h
    for d in "$HD"/code/g*/repo*; do
      rm -rf "$d/.claude/memory-handoffs" "$d/.codex/memory-handoffs"
    done
    cp -a "$PR/code/." "$HD/code/"
  ) &
done
wait
