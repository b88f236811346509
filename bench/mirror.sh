#!/usr/bin/env bash
# What a mirror of 1,000 cards (about 1 KiB each) costs over real OpenSSH
# on loopback: the first publish (every card sent) and an idle one (one
# wave of listings). Medians of COUNT runs; needs sshd.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-5}
go test -run '^$' -bench 'BenchmarkPublish1000' -benchtime 3x -count "$COUNT" ./mirror/ | tee /tmp/mirror-bench.txt
for k in first unchanged; do
  grep "^BenchmarkPublish1000/$k" /tmp/mirror-bench.txt | awk '{print $3}' | sort -n |
    awk -v k="$k" '{a[NR] = $1} END {printf "%s: median %.1f ms of %d runs\n", k, a[int((NR + 1) / 2)] / 1e6, NR}'
done
