# bench/scratch.sh — sourced by bench/run.sh and bench/ingest.sh.
#
# fresh_scratch DIR SIZE INODES: (re)make a journaled ext4 (mkfs defaults
# but for the inode count) on the loop image DIR.img, of SIZE, and mount it
# on DIR, empty. The benchmarks write into one made afresh before every
# run: this machine's root file system has no journal, and without one
# ext4, allocating an inode, skips every inode of its group freed in the
# last 60 s (6 min while the inode table block is dirty), checking each;
# deleting the previous run's thousands of files right before the next run
# made every file creation scan them (perf: recently_deleted and
# find_inode_bit were 2.4 CPU-s of a 13 s handoff run). A user's workspace
# (ext4 with its default journal) never pays that, nor should a benchmark.
#
# unmount_scratch DIR: unmount it if it is mounted.
fresh_scratch() {
  local dir=$1 size=$2 inodes=$3
  unmount_scratch "$dir"
  mkdir -p "$dir"
  rm -f "$dir.img"
  truncate -s "$size" "$dir.img"
  mkfs.ext4 -q -F -N "$inodes" "$dir.img"
  mount -o loop "$dir.img" "$dir"
}

unmount_scratch() {
  if mountpoint -q "$1"; then umount "$1"; fi
}

# big_scratch SRC IMG MNT DIR: bind onto DIR the journaled ext4 in IMG,
# mounted on MNT, whose ws/ holds the workspace SRC exactly as SRC is.
# The image is made once (32 GB, 2,000,000 inodes, SRC copied in: minutes
# for the big workspace, bench/bigws.sh) and stays mounted on MNT until
# the caller unmounts it, so its cache stays warm from run to run as a
# workspace's does between two ticks; before each run, rsync -a --delete
# puts back what the last run added or changed (its receipt, the ledger,
# the documents, new spool files, cards and backups): seconds. On a
# journaled ext4, removing a run's files does not slow the next run's
# creations (a fresh file system is for the root file system's missing
# journal, see above).
big_scratch() {
  local src=$1 img=$2 mnt=$3 dir=$4 stamp
  stamp="$src $(stat -c %Y "$src")"
  unmount_scratch "$dir"
  mkdir -p "$dir" "$mnt"
  if ! mountpoint -q "$mnt"; then
    if [ "$(cat "$img.src" 2>/dev/null)" != "$stamp" ]; then
      rm -f "$img" "$img.src"
      truncate -s 32G "$img"
      mkfs.ext4 -q -F -N 2000000 "$img"
      mount -o loop "$img" "$mnt"
      cp -a "$src" "$mnt/ws"
      echo "$stamp" >"$img.src"
    else
      mount -o loop "$img" "$mnt"
    fi
  fi
  rsync -a --delete "$src/" "$mnt/ws/"
  rm -rf "$mnt/dest"
  mount --bind "$mnt" "$dir"
}
