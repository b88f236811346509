#!/usr/bin/env bash
# bench/teardown.sh — undo bench/setup.sh: stop each bench sshd (by its pid
# file), delete the namespaces and veth pairs hb*, and remove $BENCH_DIR
# (trees, keys, builds). The login hbench is removed too. Results under
# bench/results/ are kept.
set -uo pipefail
BENCH_DIR=${BENCH_DIR:-/srv/hbench}
if mountpoint -q "$BENCH_DIR/scratch"; then umount "$BENCH_DIR/scratch"; fi
for pidf in /run/hbench-h*.pid; do
  [ -f "$pidf" ] || continue
  kill "$(cat "$pidf")" 2>/dev/null
  rm -f "$pidf"
done
for ns in $(ip netns list | awk '$1 ~ /^hb[0-9]+$/ {print $1}'); do
  ip netns del "$ns"
done
for l in $(ip -o link show | awk -F': ' '$2 ~ /^hbv[0-9]+@/ {split($2, a, "@"); print a[1]}'); do
  ip link del "$l" 2>/dev/null
done
case $BENCH_DIR in /srv/hbench | /srv/hbench/*) rm -rf "$BENCH_DIR" ;; *) echo "not removing $BENCH_DIR (not under /srv/hbench)" >&2 ;; esac
id hbench >/dev/null 2>&1 && userdel hbench
echo "teardown: done"
