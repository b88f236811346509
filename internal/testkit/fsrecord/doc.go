// Package fsrecord records the file-system calls of a process tree with
// strace and replays them against a model of a file system that forgets
// everything a power cut may forget. Tests use it to prove that handoff's
// durability follows from its protocol (fsync a file before renaming it,
// fsync a directory after changing its entries, commit before acting on a
// commit) and not from the luck of a particular file system's ordering.
//
// Parse turns an strace log (written with the flags Wrap uses) into Ops,
// each with the absolute paths it touched: strace's -y decoration names the
// file behind every descriptor at the moment of the call, so descriptors
// are followed to paths across threads and child processes without
// tracking dup, fork or close.
//
// Model replays Ops. It keeps two states of every file and directory: the
// volatile one (what a running process sees) and the durable one (what is
// left after a power cut at this point). A file's data becomes durable when
// the file is fsynced; a directory's entries (creations, renames, unlinks)
// become durable when that directory is fsynced. This is the weakest model
// POSIX allows and the one the protocol in internal/durable is written
// against; real file systems often persist more, never less.
//
// This package is for tests only.
package fsrecord
