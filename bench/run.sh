#!/usr/bin/env bash
# bench/run.sh — one cell of the network benchmark, side by side.
#
#   bench/run.sh -k 8 -r 100 -f 10 -t 100 -n 5 [-T "handoff rsync-plain rsync-pruned rsync-fsync rclone"] [-w "empty big"]
#
# -k hosts, -r repositories per host, -f handoffs per repository, -t RTT in
# milliseconds, -n repetitions, -w the workspaces handoff starts from:
# empty (the default), big (also BIG_WS=1), or both, alternated like
# tools (see below). Runs bench/setup.sh for the shape first
# (idempotent), builds bin/handoff and the delaying proxy into
# $BENCH_DIR/bin, starts one delaying proxy for all hosts (127.0.0.1:22100+K
# -> 10.77.K.2:22), prints the RTT it measures (TCP connect to first server
# byte, and `ssh host true`), then for each repetition runs every tool on
# freshly restored handoffs, rotating the order of the tools each time:
#
#   handoff       handoff sync, all hosts, --parallel K (pull, store, fsync, ingest)
#   rsync-plain   rsync -a --remove-source-files, include '*/' + the two inbox globs, exclude '*'
#   rsync-pruned  the same with anchored includes that never enter a directory that cannot hold an inbox
#   rsync-fsync   rsync-pruned with --fsync: the durable peer (every file fsynced before the source goes)
#   rclone        rclone move over SFTP with the anchored include filters
#   handoff-X     (optional) the same command as handoff, with the binary at
#                 $HANDOFF_X_BIN (X upper-cased, - as _: handoff-b ->
#                 HANDOFF_B_BIN), e.g. a variant built outside the tree;
#                 -T "handoff handoff-b" alternates the two. Its files are
#                 named receipt-handoff-b-N.json, handoff-b-N.log, ...
#
# one rsync/rclone process per host, all hosts in parallel. Each run writes
# into a freshly made journaled ext4 (loop-mounted $BENCH_DIR/scratch; see
# bench/scratch.sh for why). After each run it
# checks that exactly the expected files moved (names and count), and for
# handoff also that the receipt pulled and applied all of them. Medians,
# ratios of medians, and handoff's round trips per host (counted at the
# proxy) beside the floor go to stdout and to bench/results/.
#
# Each handoff variant starts from the walk hints its previous run left
# (an unmeasured warm-up run makes the first), as a sync every 30 minutes
# does; COLD=1 runs each repetition without them, as a first run.
#
# PERF=1 records the whole machine (perf record -a -g, PERF_FREQ samples a
# second, 499 unless set) while handoff runs,
# into perf-N.data (perf report --sort comm,dso -i ... says which
# processes the CPU went to).
#
# STRACE=1 counts the system calls of handoff and its workers (strace -f
# -c, into strace-N.txt; STRACE_FULL=1 keeps every file call instead, with
# times, and STRACE_FULL=CALLS only those, e.g. fsync,unlink,exit_group);
# the run is slower under it, so take only counts from it.
#
# -w big (BIG_WS=1): every handoff variant X also runs as the tool X+big
# (handoff+big, handoff-b+big; files receipt-handoff+big-N.json, ...),
# whose every run, warm-up and timed, starts from the big workspace that
# bench/bigws.sh makes with that variant's own binary (100,000 cards,
# 200,000 ledger handoffs, a year of receipts; cached under
# $BENCH_DIR/bigws/), exactly as bigws.sh left it, then the walk hints:
# a scratch image of its own holds a copy, made once and mounted for the
# whole invocation, and before each run rsync puts back what the last run
# changed (bench/scratch.sh, big_scratch; untimed, seconds, where a fresh
# copy took 52-250 s and left the cache cold). It keeps only its walk
# hints between runs, at F=0 too. -w big runs only
# the X+big tools, -w "empty big" both, side by side. rsync and rclone
# are unaffected. The ws column of runs.csv says which workspace a run
# started from.
#
# Every run's server CPU is measured too: what the K hosts' sshd spent
# on its sessions (the listeners' reaped children, /proc/PID/stat), in
# the server_cpu_s column and the table's sshd cpu column; the client's
# cpu column does not hold it, and on one machine both share the cores.
#
# Each handoff run's peak RSS is measured with GNU time (%M, in
# rss-N.txt and the rss_mib column): the largest resident set of any
# single process of the run, the sync or one of its workers (wait4
# reports a process's own and its reaped children's maximum, not their
# sum).
#
# DELAY=nfq (default DELAY=proxy) delays packets instead of proxying
# bytes: the tools connect straight to each host's sshd (10.77.K.2:22),
# and bench/cmd/nfqdelay holds every packet entering a host's namespace
# (iptables NFQUEUE there) for the RTT before the kernel takes it, so
# TCP's handshake, slow start, windows and acknowledgements see the round
# trip as on a real link. The whole RTT is spent on the way in (client to
# host); the way out is not held. The RTT check adds ping's median across
# the veth. The delaying proxy still runs, with no delay, only for the
# round-trip counts of the RTT check and the floor; runs in nfq mode have
# no per-run proxy count (use DELAY=proxy for those). When run.sh exits,
# even on failure, it removes the rules, stops nfqdelay, and (both
# modes) stops the sshd's and deletes the namespaces (bench/teardown.sh
# -n); the next bench/setup.sh makes them again. KEEP_NET=1 keeps them.
#
# PARALLEL=default runs handoff without --parallel (the fan-out sync
# picks itself, internal/fanout); unset, each run passes --parallel K.
#
# CPU is split by cgroup (cgroup v1 cpuacct, hbench-client,
# hbench-hosts, hbench-delay): the tool's processes, the hosts' sshd
# sessions (their sftp included), and nfqdelay (the verdicts re-inject
# packets, so the hosts' TCP receive work lands there too); and the
# whole machine's busy time from /proc/stat (other users of the
# machine included). Columns client_cg_s, hosts_cg_s, delay_cg_s,
# machine_cpu_s. MEM=1 also samples, every 0.2 s, the summed resident
# set of every process in hbench-client (the run, its workers, ssh
# clients) into mem_peak_mib.
#
# PCAP=1 captures host 1's end of the link (tcpdump in its namespace,
# before the nfq delay) for every timed run into pcap-TOOL-N.pcap;
# bench/timeline.py prints a capture's exchanges, one a line, with the
# time each side waited (apt-get install tcpdump first).
#
# PROFILE=1 also keeps handoff's --verbose JSON log of each run, a CPU
# profile of the run and of each worker (cpu-N/sync-<pid>.cpu, worker-<pid>.cpu), and writes its phases (bench/phases.py: connect + discovery, claim/store/acknowledge
# per host, ingest) to phases-N.md.
set -euo pipefail

K=2 R=10 F=1 RTT=20 N=3
DELAY=${DELAY:-proxy}
case $DELAY in proxy | nfq) ;; *) echo "run.sh: DELAY=proxy or DELAY=nfq" >&2; exit 2 ;; esac
TOOLS="handoff rsync-plain rsync-pruned rsync-fsync rclone"
WS=empty
[ "${BIG_WS:-0}" = 1 ] && WS=big
while getopts "k:r:f:t:n:T:w:" o; do
  case $o in
    k) K=$OPTARG ;; r) R=$OPTARG ;; f) F=$OPTARG ;; t) RTT=$OPTARG ;; n) N=$OPTARG ;; T) TOOLS=$OPTARG ;; w) WS=$OPTARG ;;
    *) sed -n 2,26p "$0" >&2; exit 2 ;;
  esac
done
case " $WS " in *" empty "* | *" big "*) ;; *) echo "run.sh: -w empty, big or \"empty big\"" >&2; exit 2 ;; esac
for w in $WS; do case $w in empty | big) ;; *) echo "run.sh: -w: no workspace $w (empty, big)" >&2; exit 2 ;; esac; done
HERE=$(cd "$(dirname "$0")" && pwd)
# tool_bin TOOL: the binary of handoff-X or handoff-X+big (from $HANDOFF_X_BIN).
tool_bin() {
  local var t=${1%+big}
  var=$(printf '%s' "${t#handoff-}" | tr 'a-z-' 'A-Z_')
  var=HANDOFF_${var}_BIN
  printf '%s' "${!var:-}"
}
variants=""
for t in $TOOLS; do
  case $t in
    handoff-*)
      b=$(tool_bin "$t")
      [ -n "$b" ] && [ -x "$b" ] || { echo "run.sh: tool $t needs an executable binary in \$HANDOFF_$(printf '%s' "${t#handoff-}" | tr 'a-z-' 'A-Z_')_BIN" >&2; exit 2; }
      variants+="; $t = $b ($(cat "$b.rev" 2>/dev/null || echo "no $b.rev"), sha256 $(sha256sum "$b" | cut -c1-12))"
      ;;
  esac
done
MAIN=$(cd "$HERE/.." && pwd)
export BENCH_DIR=${BENCH_DIR:-/srv/hbench}
BIN=$BENCH_DIR/bin
W=$BENCH_DIR/work
KEYS=$BENCH_DIR/keys
RESULTS=$HERE/results
CELL="K${K}-R${R}-F${F}-RTT${RTT}"
[ "$DELAY" = proxy ] || CELL="$CELL-$DELAY"
[ "${PARALLEL:-}" = default ] && CELL="$CELL-pdefault"
# host_addr H, host_port H: where the tools reach host H: the delaying
# proxy, or (DELAY=nfq) the host's own sshd behind its delayed veth.
host_addr() { if [ "$DELAY" = nfq ]; then echo "10.77.$1.2"; else echo 127.0.0.1; fi; }
host_port() { if [ "$DELAY" = nfq ]; then echo 22; else echo $((22100 + $1)); fi; }
# is_handoff TOOL: a handoff variant, on either workspace; ws_of TOOL:
# the workspace its runs start from; hbin_of TOOL: its binary.
is_handoff() { [ "${1:0:7}" = handoff ]; }
ws_of() { if [[ $1 == *+big ]]; then echo big; else echo empty; fi; }
hbin_of() { if [ "${1%+big}" = handoff ]; then printf '%s' "$BIN/handoff"; else tool_bin "$1"; fi; }
# Each handoff variant once per workspace asked for.
expanded=""
for t in $TOOLS; do
  if ! is_handoff "$t"; then expanded+=" $t"; continue; fi
  for w in $WS; do
    if [ "$w" = big ]; then expanded+=" $t+big"; else expanded+=" $t"; fi
  done
done
TOOLS=${expanded# }
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=$RESULTS/$CELL-$STAMP
mkdir -p "$BIN" "$W" "$RESULTS" "$OUT"
SSHOPTS="-i $KEYS/id_ed25519 -o UserKnownHostsFile=$KEYS/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes -o IdentitiesOnly=yes"

# From here on, whatever happens, the network goes when run.sh does.
cleanup_net() {
  if [ -n "${NFQ:-}" ]; then
    local h
    for h in $(seq 1 "$K"); do
      ip netns exec "hb$h" "$IPT" -t mangle -D PREROUTING -i eth0 -j NFQUEUE --queue-num 0 2>/dev/null || true
    done
    kill "$NFQ" 2>/dev/null || true
    wait "$NFQ" 2>/dev/null || true
  fi
  [ "${KEEP_NET:-0}" = 1 ] || "$HERE/teardown.sh" -n >&2
  local g
  for g in "${CGC:-}" "${CGH:-}" "${CGD:-}"; do [ -n "$g" ] && rmdir "$g" 2>/dev/null; done
  return 0
}
trap cleanup_net EXIT
"$HERE/setup.sh" -k "$K" -r "$R" -f "$F" >&2

# handoff is built from a snapshot of a commit (HANDOFF_REV, default HEAD),
# never from the working tree, which others may be editing mid-run;
# HANDOFF_REV=worktree builds the working tree as it is.
"$HERE/build.sh" "$BIN/handoff" >&2
(cd "$MAIN" && go build -o "$BIN/delayproxy" ./bench/cmd/delayproxy && go build -o "$BIN/nfqdelay" ./bench/cmd/nfqdelay)

# -w big: each handoff variant's big workspace, made by its own binary
# (bench/bigws.sh; cached, so only a new binary waits for one), or by
# BIGWS_BIN for all of them: a change that keeps the ledger's schema can
# then be measured on the workspace an earlier binary made, without the
# minutes a new one takes.
declare -A BIGWS=()
for t in $TOOLS; do
  if is_handoff "$t" && [ "$(ws_of "$t")" = big ]; then BIGWS[$t]=$("$HERE/bigws.sh" -b "${BIGWS_BIN:-$(hbin_of "$t")}"); fi
done

# --- the proxy ---------------------------------------------------------------
STATS=$OUT/proxy-stats.jsonl
maps=()
for h in $(seq 1 "$K"); do maps+=(-map "h$h=127.0.0.1:$((22100 + h))=10.77.$h.2:22"); done
PROXY_RTT=$RTT
[ "$DELAY" = nfq ] && PROXY_RTT=0 # only counts round trips; nfqdelay delays
"$BIN/delayproxy" -rtt "${PROXY_RTT}ms" -stats "$STATS" "${maps[@]}" 2>"$OUT/proxy.log" &
PROXY=$!
cleanup() { kill "$PROXY" 2>/dev/null || true; wait "$PROXY" 2>/dev/null || true; cleanup_net; }
trap cleanup EXIT

# --- CPU by cgroup (cgroup v1 cpuacct) ------------------------------------------
CG=/sys/fs/cgroup/cpuacct
CGC=$CG/hbench-client CGH=$CG/hbench-hosts CGD=$CG/hbench-delay
mkdir -p "$CGC" "$CGH" "$CGD"
for h in $(seq 1 "$K"); do # the sshd listeners; their sessions inherit
  cat "/run/hbench-h$h.pid" >"$CGH/cgroup.procs"
done

# --- the packet delay (DELAY=nfq) ---------------------------------------------------
IPT=${IPTABLES:-iptables-legacy}
NFQ=""
if [ "$DELAY" = nfq ] && [ "$RTT" != 0 ]; then
  nss=()
  for h in $(seq 1 "$K"); do nss+=(-ns "hb$h"); done
  "$BIN/nfqdelay" -delay "${RTT}ms" -stats "$OUT/nfq-stats.jsonl" "${nss[@]}" >"$OUT/nfq.out" 2>"$OUT/nfq.log" &
  NFQ=$!
  echo "$NFQ" >"$CGD/cgroup.procs"
  for _ in $(seq 100); do grep -q ready "$OUT/nfq.out" 2>/dev/null && break; kill -0 "$NFQ" || break; sleep 0.05; done
  grep -q ready "$OUT/nfq.out" || { echo "run.sh: nfqdelay did not start: $(cat "$OUT/nfq.log")" >&2; exit 1; }
  for h in $(seq 1 "$K"); do
    ip netns exec "hb$h" "$IPT" -t mangle -A PREROUTING -i eth0 -j NFQUEUE --queue-num 0
  done
fi
for _ in $(seq 50); do
  if (exec 3<>/dev/tcp/127.0.0.1/$((22100 + K))) 2>/dev/null; then break; fi
  sleep 0.1
done

# --- RTT check -------------------------------------------------------------------
probe=$("$BIN/delayproxy" probe -n 7 "$(host_addr 1):$(host_port 1)")
ping_med=""
if [ "$DELAY" = nfq ]; then
  ping_med=$(ping -q -c 7 -i 0.2 "$(host_addr 1)" | awk -F/ '/^rtt/ {print $5}')
  ping_med="; ping across the veth: avg ${ping_med} ms"
fi
ssh_true=()
for _ in 1 2 3 4 5; do
  t0=$(date +%s.%N)
  ssh -p "$(host_port 1)" $SSHOPTS "hbench@$(host_addr 1)" true
  t1=$(date +%s.%N)
  ssh_true+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')")
done
ssh_true_med=$(printf '%s\n' "${ssh_true[@]}" | sort -n | sed -n 3p)
# floor: the round trips of an SFTP session that does nothing (connect, key
# exchange, auth, channel, subsystem, init), counted at the proxy.
before=$(wc -l <"$STATS")
echo bye | sftp -q -b - -P 22101 $SSHOPTS hbench@127.0.0.1 >/dev/null
sleep 0.2
sftp_rt=$(tail -n +$((before + 1)) "$STATS" | jq -s 'map(.round_trips) | add')
# handoff's own session setup: a sync of h1 whose discovery root does not
# exist (connect, auth, SFTP init, home, one lstat), minus those 2 calls.
cat >"$W/writers-empty.yaml" <<EOF
version: 1
workspace: $W/ws-empty
hosts:
  - name: h1
    transport: ssh
    ssh: {host: 127.0.0.1, port: 22101, user: hbench, identity_file: $KEYS/id_ed25519, known_hosts: $KEYS/known_hosts}
    discover: [{root: /nonexistent-bench-root, max_depth: 3}]
EOF
rm -rf "$W/ws-empty"; mkdir -p "$W/ws-empty" "$W/home"
"$BIN/handoff" init --workspace "$W/ws-empty" >/dev/null
before=$(wc -l <"$STATS")
t0=$(date +%s.%N)
env -u SSH_AUTH_SOCK HOME="$W/home" "$BIN/handoff" sync --manifest "$W/writers-empty.yaml" --quiet || true
t1=$(date +%s.%N)
empty_secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')
sleep 0.2
setup_rt=$(( $(tail -n +$((before + 1)) "$STATS" | jq -s 'map(.round_trips) | add') - 2 ))
echo "handoff $(cat "$BIN/handoff.rev"); delay: $DELAY; rtt-check: requested ${RTT} ms$ping_med; TCP connect to first server byte: $probe (2 RTT on a real link); ssh host true: median ${ssh_true_med} s (${ssh_true[*]}); OpenSSH empty SFTP session: $sftp_rt round trips; handoff session setup: $setup_rt round trips (an empty handoff sync of one host: ${empty_secs} s)$variants" | tee "$OUT/rtt.txt" >&2

# --- the tools ---------------------------------------------------------------------
cat >"$W/writers.yaml" <<EOF
version: 1
workspace: $BENCH_DIR/scratch/ws
defaults: {harnesses: [.claude, .codex], max_depth: 2, timeout: 3h}
hosts:
EOF
for h in $(seq 1 "$K"); do
  cat >>"$W/writers.yaml" <<EOF
  - name: h$h
    transport: ssh
    ssh: {host: $(host_addr "$h"), port: $(host_port "$h"), user: hbench, identity_file: $KEYS/id_ed25519, known_hosts: $KEYS/known_hosts}
    discover: [{root: $BENCH_DIR/hosts/h$h/code, max_depth: 2}]
EOF
done
: >"$W/rclone.conf"
for h in $(seq 1 "$K"); do
  cat >>"$W/rclone.conf" <<EOF
[h$h]
type = sftp
host = $(host_addr "$h")
port = $(host_port "$h")
user = hbench
key_file = $KEYS/id_ed25519
known_hosts_file = $KEYS/known_hosts

EOF
done
mkdir -p "$W/home"

# Every tool writes into a fresh, empty, journaled ext4 (a loop-mounted
# image made again before each run; see bench/scratch.sh for why): the
# workspace for handoff, the destination for rsync and rclone. A run on
# the big workspace has an image of its own (scratch_for).
. "$HERE/scratch.sh"
SCRATCH=$BENCH_DIR/scratch
unmount_all() {
  unmount_scratch "$SCRATCH"
  local ws
  for ws in "${BIGWS[@]}"; do unmount_scratch "$(dirname "$ws")/mnt"; done
}
trap 'cleanup; unmount_all' EXIT
DEST=$SCRATCH/dest
run_tool() { # tool rep -> prints seconds
  local tool=$1 rep=$2 h port
  local pids=()
  case $tool in
    handoff | handoff-* | handoff+big)
      local hbin tag=$rep
      hbin=$(hbin_of "$tool")
      [ "$tool" = handoff ] || tag=$tool-$rep
      local extra=() par=(--parallel "$K")
      [ "${PARALLEL:-}" = default ] && par=()
      local prof=()
      if [ "${PROFILE:-0}" = 1 ]; then
        extra=(--verbose --log-format json)
        mkdir -p "$OUT/cpu-$tag" # CPU profiles: sync-<pid>.cpu and worker-<pid>.cpu
        prof=(HANDOFF_WORKER_CPUPROFILE="$OUT/cpu-$tag")
      fi
      local perf=()
      if [ "${PERF:-0}" = 1 ]; then # the whole machine while handoff runs
        perf=(perf record -a -g -F "${PERF_FREQ:-499}" -o "$OUT/perf-$tag.data" --)
      elif [ "${STRACE:-0}" = 1 ]; then # system calls of handoff and its workers
        perf=(strace -f -c -o "$OUT/strace-$tag.txt" --)
        if [ -n "${STRACE_FULL:-}" ]; then
          local calls=%file,%desc,fsync
          [ "$STRACE_FULL" = 1 ] || calls=$STRACE_FULL
          perf=(strace -f -tt --seccomp-bpf -e trace="$calls" -o "$OUT/strace-$tag.txt" --)
        fi
      fi
      env -u SSH_AUTH_SOCK HOME="$W/home" "${prof[@]}" "${perf[@]}" /usr/bin/time -f %M -o "$OUT/rss-$tag.txt" "$hbin" "${extra[@]}" sync --manifest "$W/writers.yaml" \
        --workspace "$SCRATCH/ws" "${par[@]}" --json >"$OUT/receipt-$tag.json" 2>"$OUT/$tool-$rep.log" || {
        echo "$tool sync exited $? (see $OUT/$tool-$rep.log)" >&2; return 1; }
      ;;
    rsync-plain | rsync-pruned | rsync-fsync)
      local filt durable=()
      [ "$tool" = rsync-fsync ] && durable=(--fsync)
      if [ "$tool" = rsync-plain ]; then
        filt=(--include='*/' --include='.claude/memory-handoffs/*.md' --include='.codex/memory-handoffs/*.md' --exclude='*')
      else
        filt=(--include='/*/' --include='/*/*/' --include='/*/*/.claude/' --include='/*/*/.codex/'
          --include='/*/*/.claude/memory-handoffs/' --include='/*/*/.codex/memory-handoffs/'
          --include='/*/*/.claude/memory-handoffs/*.md' --include='/*/*/.codex/memory-handoffs/*.md' --exclude='*')
      fi
      for h in $(seq 1 "$K"); do
        port=$(host_port "$h")
        mkdir -p "$DEST/$tool/h$h"
        rsync -a -m --remove-source-files "${durable[@]}" "${filt[@]}" -e "ssh -p $port $SSHOPTS" \
          "hbench@$(host_addr "$h"):$BENCH_DIR/hosts/h$h/code/" "$DEST/$tool/h$h/" 2>>"$OUT/$tool-$rep.log" &
        pids+=($!)
      done
      ;;
    rclone)
      for h in $(seq 1 "$K"); do
        rclone --config "$W/rclone.conf" move "h$h:$BENCH_DIR/hosts/h$h/code" "$DEST/rclone/h$h" \
          --include '/*/*/.claude/memory-handoffs/*.md' --include '/*/*/.codex/memory-handoffs/*.md' \
          2>>"$OUT/rclone-$rep.log" &
        pids+=($!)
      done
      ;;
  esac
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

# verify TOOL REP: exactly the expected files moved; prints "ok" or a reason.
verify() {
  local tool=$1 rep=$2 h got want left
  for h in $(seq 1 "$K"); do
    local HD=$BENCH_DIR/hosts/h$h
    want=$HD/expected.txt
    left=$(find "$HD"/code/g*/repo*/.claude/memory-handoffs "$HD"/code/g*/repo*/.codex/memory-handoffs -maxdepth 1 -name '*.md' | wc -l)
    if [ "$left" != 0 ]; then echo "h$h: $left handoff(s) left in the inboxes"; return; fi
    if is_handoff "$tool"; then
      got=$(cd "$HD" && find code -path '*/memory-handoffs/processed/*.md' | sed -E 's#/processed/#/#; s#\.[0-9a-f]{12}\.md$#.md#' | sort)
    else
      got=$(cd "$DEST/$tool/h$h" && find . -type f | sed 's#^\./#code/#' | sort)
    fi
    if [ "$got" != "$(cat "$want")" ]; then
      echo "h$h: moved $(printf '%s' "$got" | grep -c . || true) file(s), expected $(wc -l <"$want"); names differ"
      return
    fi
  done
  if is_handoff "$tool"; then
    local total applied receipt=$OUT/receipt-$rep.json
    [ "$tool" = handoff ] || receipt=$OUT/receipt-$tool-$rep.json
    total=$((K * R * F))
    applied=$(jq '.counts.pulled == '"$total"' and (.counts.promoted + .counts.routed) == '"$total"' and .outcome == "ok"' "$receipt")
    if [ "$applied" != true ]; then echo "receipt: $(jq -c '{outcome, counts}' "$receipt")"; return; fi
  fi
  echo ok
}

# floor for one host's pull: SFTP setup + one round trip per directory level
# (max_depth 2, the depth of the repositories, as the pruned rsync: levels
# 0..2) + read + acknowledge.
floor_rt=$((setup_rt + 3 + 1 + 1))

# cpu_of FILE prints the user + system seconds of every process this shell
# had waited for when bash's times wrote FILE (times must run in this
# shell, not in a $(...) subshell): the tool's own processes, its workers
# and ssh clients included.
cpu_of() {
  awk 'NR == 2 {
    split($1, u, /[ms]/); split($2, s, /[ms]/)
    printf "%.3f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"
}

# server_cpu prints the user + system seconds that the K hosts' sshd
# listeners have reaped from their session processes so far (fields 16
# and 17 of /proc/PID/stat, in clock ticks): the difference across a run
# is what the servers spent on it, beside the client's cpu_of.
TICKS=$(getconf CLK_TCK)
server_cpu() {
  local h pid sum=0 t
  for h in $(seq 1 "$K"); do
    pid=$(cat "/run/hbench-h$h.pid" 2>/dev/null) || continue
    t=$(awk '{print $16 + $17}' "/proc/$pid/stat" 2>/dev/null) || continue
    sum=$((sum + t))
  done
  awk -v t="$sum" -v hz="$TICKS" 'BEGIN{printf "%.3f", t / hz}'
}

# A sync on a canonical host starts with what the run before it left:
# the hosts' walk hints (.handoff/walks, claim/speculate.go). Each handoff
# variant keeps its own between repetitions, from an unmeasured warm-up
# run; COLD=1 runs every repetition without one, as a first run. At F=0
# (the idle tick) a variant keeps its whole workspace (ledger, spool,
# hints), since an idle tick changes nothing in it and a user's tick finds
# it there; FRESH_WS=1 keeps only the hints, as at F>0, where the
# handoffs must be new to the ledger. The copy goes onto the fresh
# scratch file system before the `sync` that precedes each timed run.
# With -w big, each run starts from the big workspace instead
# (scratch_for), and only the hints are kept, at F=0 too.
keep_ws() { [ "$(ws_of "$1")" = empty ] && [ "$F" = 0 ] && [ "${FRESH_WS:-0}" != 1 ] && [ "${COLD:-0}" != 1 ]; }
keep_walks() { # tool: save the walk hints (at F=0, the workspace) the run left
  rm -rf "$W/walks-$1" "$W/ws-$1"
  if keep_ws "$1"; then
    cp -a "$SCRATCH/ws" "$W/ws-$1"
    return 0
  fi
  [ -d "$SCRATCH/ws/.handoff/walks" ] && cp -a "$SCRATCH/ws/.handoff/walks" "$W/walks-$1"
  return 0
}
give_walks() { # tool: put the saved walk hints (or workspace) into the fresh scratch
  [ "${COLD:-0}" = 1 ] && return 0
  if keep_ws "$1" && [ -d "$W/ws-$1" ]; then
    rm -rf "$SCRATCH/ws"
    cp -a "$W/ws-$1" "$SCRATCH/ws"
    return 0
  fi
  [ -d "$W/walks-$1" ] || return 0
  mkdir -p "$SCRATCH/ws/.handoff"
  rm -rf "$SCRATCH/ws/.handoff/walks"
  cp -a "$W/walks-$1" "$SCRATCH/ws/.handoff/walks"
}
# scratch_for tool: the fresh scratch file system a run of tool writes
# into (untimed): the big workspace's own image, put back as bigws.sh
# made it, for X+big; else a new, empty one.
scratch_for() {
  if is_handoff "$1" && [ "$(ws_of "$1")" = big ]; then
    local t0=$SECONDS
    big_scratch "${BIGWS[$1]}" "$(dirname "${BIGWS[$1]}")/scratch.img" "$(dirname "${BIGWS[$1]}")/mnt" "$SCRATCH"
    echo "$1: the big workspace put back in $((SECONDS - t0)) s" >&2
  else
    fresh_scratch "$SCRATCH" 8G 600000
  fi
  mkdir -p "$SCRATCH/ws" "$DEST"
}
# fresh_ws tool: the workspace a handoff run starts from, on the fresh
# scratch (untimed): the big one is there already (X+big); else a new
# one, made as `handoff init` makes it, since a sync refuses a directory
# without an identity (at F=0 give_walks then puts the kept one in its
# place).
fresh_ws() {
  [ "$(ws_of "$1")" = big ] && return 0
  "$(hbin_of "$1")" init --workspace "$SCRATCH/ws" >/dev/null
}
for tool in $TOOLS; do
  is_handoff "$tool" || continue
  rm -rf "$W/walks-$tool" "$W/ws-$tool"
  [ "${COLD:-0}" = 1 ] && continue
  "$HERE/restore.sh" -k "$K"
  scratch_for "$tool"
  fresh_ws "$tool"
  sync
  run_tool "$tool" warmup >/dev/null || { echo "warm-up run of $tool failed" >&2; exit 1; }
  keep_walks "$tool"
  echo "warm-up $tool: $(ls "$W/walks-$tool" "$W/ws-$tool/.handoff/walks" 2>/dev/null | grep -c json) walk hint(s) kept$(keep_ws "$tool" && echo ", with its workspace")" >&2
done

# cg_usage: the nanoseconds of CPU each side's cgroup has used so far
# (client, hosts, delay); machine_busy: the whole machine's busy seconds
# (/proc/stat: all but idle and iowait).
cg_usage() { echo "$(cat "$CGC/cpuacct.usage") $(cat "$CGH/cpuacct.usage") $(cat "$CGD/cpuacct.usage")"; }
machine_busy() {
  awk -v hz="$TICKS" '$1 == "cpu" { printf "%.3f", ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' /proc/stat
}
# mem_sample OUT: until killed, the peak of the summed resident sets of
# the processes in hbench-client, in bytes, into OUT.
PAGE=$(getconf PAGESIZE)
mem_sample() {
  local peak=0 sum p rss
  while :; do
    sum=0
    while read -r p; do
      { read -r _ rss _ <"/proc/$p/statm"; } 2>/dev/null && sum=$((sum + rss))
    done <"$CGC/cgroup.procs"
    if ((sum > peak)); then peak=$sum; echo $((peak * PAGE)) >"$1"; fi
    sleep 0.2
  done
}

CSV=$OUT/runs.csv
echo "cell,k,r,f,rtt_ms,rep,tool,seconds,verified,rt_per_host_median,rt_per_host_max,bytes_per_host_median,floor_rt,cpu_s,rss_mib,ws,server_cpu_s,delay,client_cg_s,hosts_cg_s,delay_cg_s,machine_cpu_s,mem_peak_mib" >"$CSV"
read -r -a tools <<<"$TOOLS"
nt=${#tools[@]}
for rep in $(seq 1 "$N"); do
  for j in $(seq 0 $((nt - 1))); do
    tool=${tools[$(( (j + rep - 1) % nt ))]}
    # fresh handoffs, empty workspace and destinations
    "$HERE/restore.sh" -k "$K"
    scratch_for "$tool"
    if is_handoff "$tool"; then fresh_ws "$tool"; give_walks "$tool"; fi
    sync
    before=$(wc -l <"$STATS")
    times >"$OUT/times-before"
    srv0=$(server_cpu)
    read -r cgc0 cgh0 cgd0 < <(cg_usage)
    mach0=$(machine_busy)
    MS=""
    if [ "${MEM:-0}" = 1 ]; then
      rm -f "$OUT/mem-$tool-$rep.txt"
      mem_sample "$OUT/mem-$tool-$rep.txt" &
      MS=$!
    fi
    PC=""
    if [ "${PCAP:-0}" = 1 ]; then # host 1's side of the link, every packet
      ip netns exec hb1 tcpdump -i eth0 -n -s 128 -U -w "$OUT/pcap-$tool-$rep.pcap" tcp port 22 2>/dev/null &
      PC=$!
      sleep 0.5 # tcpdump is listening before the tool connects
    fi
    t0=$(date +%s.%N)
    ok=1
    (echo "$BASHPID" >"$CGC/cgroup.procs" && run_tool "$tool" "$rep") || ok=0
    t1=$(date +%s.%N)
    if [ -n "$PC" ]; then sleep 0.3; kill "$PC"; wait "$PC" 2>/dev/null || true; fi
    times >"$OUT/times-after"
    mach1=$(machine_busy)
    read -r cgc1 cgh1 cgd1 < <(cg_usage)
    if [ -n "$MS" ]; then kill "$MS"; wait "$MS" 2>/dev/null || true; fi
    sleep 0.3 # let the hosts' sshd reap their sessions and the proxy log the closed connections
    srv=$(awk -v a="$srv0" -v b="$(server_cpu)" 'BEGIN{printf "%.2f", b-a}')
    is_handoff "$tool" && keep_walks "$tool"
    cpu=$(awk -v a="$(cpu_of "$OUT/times-before")" -v b="$(cpu_of "$OUT/times-after")" 'BEGIN{printf "%.2f", b-a}')
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')
    # the hosts' sessions end just after the client: read their cgroup
    # again after the pause above
    read -r _ cgh1 _ < <(cg_usage)
    cgsplit=$(awk -v c0="$cgc0" -v c1="$cgc1" -v h0="$cgh0" -v h1="$cgh1" -v d0="$cgd0" -v d1="$cgd1" -v m0="$mach0" -v m1="$mach1" \
      'BEGIN { printf "%.2f,%.2f,%.2f,%.2f", (c1 - c0) / 1e9, (h1 - h0) / 1e9, (d1 - d0) / 1e9, m1 - m0 }')
    memp=""
    [ -s "$OUT/mem-$tool-$rep.txt" ] && memp=$(awk '{ printf "%.1f", $1 / 1048576 }' "$OUT/mem-$tool-$rep.txt")
    rtmed="" rtmax="" bmed="" rss=""
    if is_handoff "$tool"; then
      ptag=$rep; [ "$tool" = handoff ] || ptag=$tool-$rep
      rss=$(awk 'END { if ($1 ~ /^[0-9]+$/) printf "%.1f", $1 / 1024 }' "$OUT/rss-$ptag.txt" 2>/dev/null || true)
    fi
    if is_handoff "$tool" && [ "$DELAY" = proxy ]; then
      read -r rtmed rtmax bmed < <(tail -n +$((before + 1)) "$STATS" | jq -rs '
        group_by(.host) | map({rt: (map(.round_trips) | add), b: (map(.bytes_c2s + .bytes_s2c) | add)})
        | (map(.rt) | sort) as $r | (map(.b) | sort) as $b
        | "\($r[(length/2|floor)]) \($r[-1]) \($b[(length/2|floor)])"')
    fi
    if is_handoff "$tool" && [ "${PROFILE:-0}" = 1 ]; then
      ptag=$rep; [ "$tool" = handoff ] || ptag=$tool-$rep
      python3 "$HERE/phases.py" "$OUT/$tool-$rep.log" >"$OUT/phases-$ptag.md" 2>&1 || true
    fi
    v=$(verify "$tool" "$rep")
    [ "$ok" = 1 ] || v="exit-status-nonzero; $v"
    printf '%s,%s,%s,%s,%s,%s,%s,%.3f,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$CELL" "$K" "$R" "$F" "$RTT" "$rep" "$tool" "$secs" "$v" "$rtmed" "$rtmax" "$bmed" "$floor_rt" "$cpu" "$rss" "$(is_handoff "$tool" && ws_of "$tool")" "$srv" "$DELAY" "$cgsplit" "$memp" >>"$CSV"
    printf 'run %s/%s %-13s %8.2f s  cpu %6.2f s  sshd cpu %6.2f s  cgroups client,hosts,delay,machine %s  %s%s%s%s\n' "$rep" "$N" "$tool" "$secs" "$cpu" "$srv" "$cgsplit" "$v" "${rtmed:+  round trips/host median $rtmed max $rtmax}" "${rss:+  rss $rss MiB}" "${memp:+  summed rss peak $memp MiB}" >&2
  done
done

python3 "$HERE/report.py" --csv "$CSV" --floor-rt "$floor_rt" --rtt "$RTT" \
  --rtt-check "$(cat "$OUT/rtt.txt")" | tee "$OUT/table.md"
cp "$OUT/table.md" "$RESULTS/$CELL-latest.md"
echo "results: $OUT" >&2
