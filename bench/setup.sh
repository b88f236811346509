#!/usr/bin/env bash
# bench/setup.sh — K writer hosts for the network benchmark (idempotent).
#
#   bench/setup.sh -k 8 -r 100 -f 10
#
# Each host hK (K = 1..k) is a network namespace "hbK" joined to the root
# namespace by a veth pair (root side hbvK 10.77.K.1/24, namespace side eth0
# 10.77.K.2/24) running its own OpenSSH sshd on port 22 (own config and host
# key, one shared generated client key, UsePAM no, Subsystem sftp
# internal-sftp), for the login hbench (/bin/sh, empty home). All namespaces share the file system, so each host has its
# own tree: $BENCH_DIR/hosts/hK/code/gG/repoN (depth 2 under code/), every
# repository a hard-linked copy of ONE template (~3,000 ordinary files: a
# node_modules-like tree, src/, docs/, tests/, scripts/, a real .git with an
# index). The F handoffs per repository are real separate files, alternately
# in .claude/memory-handoffs and .codex/memory-handoffs, kept pristine under
# $BENCH_DIR/pristine/hK (bench/restore.sh copies them back before each run).
# Handoffs alternate document appends and card creations; every one has
# unique content and card name, and an mtime an hour old (past settle).
#
# SFTP_TRACE=1 runs each host's SFTP server behind bench/cmd/sftptrace,
# which logs every request and reply with its time into
# $BENCH_DIR/trace/sftp-<pid>.log (bench/waves.py names the round trips
# from them); without it, the next setup puts internal-sftp back.
#
# Re-running with the same k/r/f does nothing; with another r it rebuilds the
# trees of the hosts whose shape changed, with another f only their
# handoffs (4 hosts at a time); hosts above k are left alone (their sshd
# keeps running; bench/teardown.sh removes everything).
set -euo pipefail

K=2 R=10 F=1
while getopts "k:r:f:" o; do
  case $o in
    k) K=$OPTARG ;; r) R=$OPTARG ;; f) F=$OPTARG ;;
    *) echo "usage: $0 -k HOSTS -r REPOS -f HANDOFFS" >&2; exit 2 ;;
  esac
done
BENCH_DIR=${BENCH_DIR:-/srv/hbench}
KEYS=$BENCH_DIR/keys
TEMPLATE=$BENCH_DIR/template
mkdir -p "$BENCH_DIR" "$KEYS" /run/sshd
chmod 755 "$BENCH_DIR" "$KEYS"

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null || need+=(openssh-client)
command -v rsync >/dev/null || need+=(rsync)
command -v rclone >/dev/null || need+=(rclone)
command -v git >/dev/null || need+=(git)
command -v jq >/dev/null || need+=(jq)
command -v strace >/dev/null || need+=(strace)
[ -x /usr/bin/time ] || need+=(time)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs) # run.sh's scratch file system
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# --- the login -----------------------------------------------------------------
# A dedicated account with /bin/sh and an empty home: root's interactive
# shell set-up (here: pyenv init in ~/.bashrc, which bash reads even for
# `ssh host cmd`) took 0.3 s to 20 s per remote command and made rsync and
# above all rclone (one remote md5sum per file) look far slower than they
# are. SFTP (handoff) never starts a shell; rsync and rclone do.
BUSER=${BENCH_USER:-hbench}
if ! id "$BUSER" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir "$BENCH_DIR/home" --shell /bin/sh "$BUSER"
fi
usermod -p '*' "$BUSER" # no password, but not locked: sshd without PAM refuses a locked account
mkdir -p "$BENCH_DIR/home"
chown "$BUSER:" "$BENCH_DIR/home"

# --- the client key ----------------------------------------------------------
if [ ! -f "$KEYS/id_ed25519" ]; then
  ssh-keygen -q -t ed25519 -N '' -C handoff-bench -f "$KEYS/id_ed25519"
fi
cp "$KEYS/id_ed25519.pub" "$KEYS/authorized_keys"
chmod 644 "$KEYS/authorized_keys" # read by sshd as the user
chmod 600 "$KEYS/id_ed25519"

# --- the template repository (built once) -------------------------------------
if [ ! -f "$TEMPLATE/.bench-done" ]; then
  echo "setup: building the template repository"
  rm -rf "$TEMPLATE"
  mkdir -p "$TEMPLATE"
  (
    cd "$TEMPLATE"
    for d in $(seq 1 20); do
      mkdir -p "src/pkg$d"
      for f in $(seq 1 15); do
        printf 'package pkg%d\n\n// file %d\nfunc F%d() int { return %d }\n' "$d" "$f" "$f" "$((d * f))" >"src/pkg$d/f$f.go"
      done
    done
    mkdir -p docs tests scripts
    for f in $(seq 1 50); do printf '# Doc %d\n\nSome text.\n' "$f" >"docs/doc$f.md"; done
    for f in $(seq 1 100); do printf 'test %d\n' "$f" >"tests/t$f.txt"; done
    for f in $(seq 1 20); do printf '#!/bin/sh\necho %d\n' "$f" >"scripts/s$f.sh"; done
    printf '# repo\n' >README.md
    printf '{"name":"repo"}\n' >package.json
    printf 'node_modules/\n' >.gitignore
    git init -q .
    git -c user.name=bench -c user.email=bench@example.invalid add -A
    git -c user.name=bench -c user.email=bench@example.invalid commit -qm init
    # node_modules-like tree: 50 packages, 46 files each, nested directories.
    for p in $(seq 1 50); do
      pd=node_modules/pkg-$p
      mkdir -p "$pd/lib/internal" "$pd/dist" "$pd/test"
      printf '{"name":"pkg-%d","version":"1.0.%d"}\n' "$p" "$p" >"$pd/package.json"
      printf '# pkg-%d\n' "$p" >"$pd/README.md"
      printf 'module.exports = %d;\n' "$p" >"$pd/index.js"
      for f in $(seq 1 10); do printf 'exports.f%d = () => %d;\n' "$f" "$f" >"$pd/lib/m$f.js"; done
      for f in $(seq 1 10); do printf 'exports.g%d = () => %d;\n' "$f" "$f" >"$pd/lib/internal/i$f.js"; done
      for f in $(seq 1 15); do printf 'var d%d = %d;\n' "$f" "$f" >"$pd/dist/d$f.js"; done
      for f in $(seq 1 8); do printf 'test(%d);\n' "$f" >"$pd/test/t$f.js"; done
    done
    mkdir -p .claude/memory-handoffs .codex/memory-handoffs
  )
  touch -d '-1 hour' "$TEMPLATE"
  touch "$TEMPLATE/.bench-done"
fi
echo "setup: template holds $(find "$TEMPLATE" -type f | wc -l) files"

# --- one handoff ---------------------------------------------------------------
# handoff_body HOST GROUP REPO I: a valid handoff, unique across the whole
# benchmark; even I: a card creation, odd I: a document append.
handoff_body() {
  local h=$1 g=$2 r=$3 i=$4
  local tag="h$h-g$g-r$r-$i"
  printf '# Memory Handoff\n\n## Type\nworkflow\n\n## Title\nBench handoff %s\n\n## Summary\nA handoff written by the benchmark for host %s, repository %s, number %s.\n\n## Durable facts\n- The build of %s uses make.\n- Tests run with go test.\n\n## Evidence\nObserved while working on %s.\n\n' "$tag" "$h" "$r" "$i" "$tag" "$tag"
  if (( i % 2 == 0 )); then
    printf '## Recommended memory action\ncreate-card\n\n## Target card\nbench-%s.md\n\n## Suggested card content\n---\ntopic: bench %s\ncategory: workflow\ntags: [bench, h%s]\n---\nThe repository %s builds with make; its tests run with go test.\n' "$tag" "$tag" "$h" "$tag"
  else
    local docs=(TOOLS.md USER.md rules/go.md .learnings/LEARNINGS.md)
    printf '## Recommended memory action\nno-card\n\n## Target document\n%s\n\n## Suggested document content\n- %s: prefer make over ad-hoc go build commands.\n' "${docs[$(( (i / 2) % 4 ))]}" "$tag"
  fi
}

# build_host H: host H's tree (if R changed) and its pristine handoffs.
build_host() {
  local h=$1 HD=$BENCH_DIR/hosts/h$1 PR=$BENCH_DIR/pristine/h$1 n g repo i hn rel
  echo "setup: host h$h: $R repositories, $F handoffs each"
  rm -f "$HD/shape"
  if [ "$(cat "$HD/shape-tree" 2>/dev/null)" != "R=$R" ]; then
    rm -rf "$HD/code" "$HD/shape-tree"
    mkdir -p "$HD/code"
    for n in $(seq 1 "$R"); do
      g=$(( (n - 1) / 10 + 1 ))
      mkdir -p "$HD/code/g$g"
      cp -al "$TEMPLATE" "$HD/code/g$g/repo$n"
    done
    # the copied inbox directories are hard links of nothing: make them
    # real (empty) directories of this repository (restore.sh does)
    for d in "$HD"/code/g*/repo*; do
      rm -rf "$d/.claude/memory-handoffs" "$d/.codex/memory-handoffs"
    done
    echo "R=$R" >"$HD/shape-tree"
  fi
  rm -rf "$PR"
  mkdir -p "$PR/code"
  : >"$HD/expected.txt"
  for n in $(seq 1 "$R"); do
    g=$(( (n - 1) / 10 + 1 ))
    repo=code/g$g/repo$n
    mkdir -p "$PR/$repo/.claude/memory-handoffs" "$PR/$repo/.codex/memory-handoffs"
    for i in $(seq 1 "$F"); do
      if (( i % 2 == 1 )); then hn=.claude; else hn=.codex; fi
      rel=$repo/$hn/memory-handoffs/2026-04-20-1537-h$h-r$n-$i.md
      handoff_body "$h" "$g" "$n" "$i" >"$PR/$rel"
      echo "$rel" >>"$HD/expected.txt"
    done
  done
  # the inboxes belong to the login (it renames and removes in them)
  chown -R "$BUSER:" "$PR"
  find "$PR" -exec touch -h -d '-1 hour' {} +
  sort -o "$HD/expected.txt" "$HD/expected.txt"
  echo "R=$R F=$F" >"$HD/shape"
}

# --- the SFTP server -------------------------------------------------------------
SUBSYSTEM=internal-sftp
if [ "${SFTP_TRACE:-0}" = 1 ]; then
  mkdir -p "$BENCH_DIR/bin" "$BENCH_DIR/trace"
  (cd "$(dirname "$0")/.." && go build -o "$BENCH_DIR/bin/sftptrace" ./bench/cmd/sftptrace)
  chown "$BUSER:" "$BENCH_DIR/trace"
  SUBSYSTEM="$BENCH_DIR/bin/sftptrace $BENCH_DIR/trace"
fi

# --- the hosts -----------------------------------------------------------------
for h in $(seq 1 "$K"); do
  ns=hb$h
  HD=$BENCH_DIR/hosts/h$h
  PR=$BENCH_DIR/pristine/h$h
  mkdir -p "$HD/etc"
  # network namespace and veth pair
  if ! ip netns list | grep -qw "$ns"; then
    ip netns add "$ns"
  fi
  if ! ip link show "hbv$h" >/dev/null 2>&1; then
    ip link add "hbv$h" type veth peer name "hbp$h"
    ip link set "hbp$h" netns "$ns"
    ip addr add "10.77.$h.1/24" dev "hbv$h"
    ip link set "hbv$h" up
    ip -n "$ns" link set "hbp$h" name eth0
    ip -n "$ns" addr add "10.77.$h.2/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  fi
  # sshd
  [ -f "$HD/etc/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C "h$h" -f "$HD/etc/ssh_host_ed25519_key"
  cat >"$HD/etc/sshd_config" <<EOF
Port 22
ListenAddress 10.77.$h.2
HostKey $HD/etc/ssh_host_ed25519_key
PidFile /run/hbench-h$h.pid
AuthorizedKeysFile $KEYS/authorized_keys
PermitRootLogin no
AllowUsers $BUSER
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
MaxStartups 200:30:400
MaxSessions 100
LogLevel ERROR
Subsystem sftp $SUBSYSTEM
EOF
  pidf=/run/hbench-h$h.pid
  if ! cmp -s "$HD/etc/sshd_config" "$HD/etc/sshd_config.running" && [ -f "$pidf" ]; then
    kill "$(cat "$pidf")" 2>/dev/null || true # the config changed: restart
    sleep 0.2
  fi
  cp "$HD/etc/sshd_config" "$HD/etc/sshd_config.running"
  if ! { [ -f "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null; }; then
    ip netns exec "$ns" /usr/sbin/sshd -f "$HD/etc/sshd_config"
  fi

  # the tree (depends on R only) and the handoffs (on R and F), built in
  # the background, at most 4 hosts at a time
  if [ "$(cat "$HD/shape" 2>/dev/null)" != "R=$R F=$F" ]; then
    while [ "$(jobs -rp | wc -l)" -ge 4 ]; do wait -n; done
    build_host "$h" &
  elif [ "$(stat -c %U "$PR/code" 2>/dev/null)" != "$BUSER" ]; then
    chown -R "$BUSER:" "$PR" # (a host being built is chowned by build_host, once its handoffs exist)
  fi
  # known_hosts line for the proxy port of this host and for the veth address
  port=$((22100 + h))
  key=$(cut -d' ' -f1,2 "$HD/etc/ssh_host_ed25519_key.pub")
  printf '[127.0.0.1]:%s %s\n10.77.%s.2 %s\n' "$port" "$key" "$h" "$key" >"$HD/known_hosts_line"
done
wait # for the hosts being built
for h in $(seq 1 "$K"); do
  [ "$(cat "$BENCH_DIR/hosts/h$h/shape" 2>/dev/null)" = "R=$R F=$F" ] || { echo "setup: host h$h was not built" >&2; exit 1; }
done
cat "$BENCH_DIR"/hosts/h*/known_hosts_line >"$KEYS/known_hosts"

# restore the handoffs of every host in the selection
"$(dirname "$0")"/restore.sh -k "$K"
echo "setup: $K host(s) ready: $R repositories x $F handoffs each; sshd on 10.77.1..$K.2:22"
