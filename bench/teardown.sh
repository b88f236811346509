#!/usr/bin/env bash
# bench/teardown.sh — undo bench/setup.sh: stop each bench sshd (by its pid
# file), delete the namespaces and veth pairs hb*, and remove $BENCH_DIR
# (trees, keys, builds). The login hbench is removed too. Results under
# bench/results/ are kept.
#
# teardown.sh -n stops the sshd's and deletes the namespaces, veth pairs
# and (with them) their iptables rules only, keeping the trees, keys and
# login: bench/run.sh calls it when it exits, and bench/setup.sh makes the
# network again in a second or two.
set -uo pipefail
BENCH_DIR=${BENCH_DIR:-/srv/hbench}
NET_ONLY=0
[ "${1:-}" = -n ] && NET_ONLY=1
if [ "$NET_ONLY" = 0 ] && mountpoint -q "$BENCH_DIR/scratch"; then umount "$BENCH_DIR/scratch"; fi
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
if [ "$NET_ONLY" = 1 ]; then exit 0; fi
case $BENCH_DIR in /srv/hbench | /srv/hbench/*) rm -rf "$BENCH_DIR" ;; *) echo "not removing $BENCH_DIR (not under /srv/hbench)" >&2 ;; esac
id hbench >/dev/null 2>&1 && userdel hbench
echo "teardown: done"
