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
