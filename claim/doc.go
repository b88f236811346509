// Package claim finds handoffs on a host and takes them into local custody:
// discovery (steps 1), the claim checks (2), the spool (3) and the
// acknowledgement (4) of the pipeline. It is written once against
// transport.FS, so local and SSH hosts behave identically.
//
// Guarantees:
//   - Discovery never follows a symlink, never enters a dot-directory other
//     than a harness's memory-handoffs, honours .no-memory-handoffs, walks at
//     most the configured depth, and never reads, moves or counts a file that
//     the repository's git index tracks.
//   - A file that is a symlink, not a regular file, or larger than the limit
//     is never opened; it is moved unread into malformed/, but only when an
//     LSTAT agrees with the listing about its type. On a server whose LSTAT
//     follows symlinks nothing is read, renamed or removed under a
//     symlink's name (inbox, archive directory or entry): it is left in
//     place and the host reported with QuirkFollowsSymlinks.
//   - Reads are bounded by the size limit whatever the host claims; a file
//     that changes while read is deferred, not stored. A file the host
//     refuses to read is deferred (ReasonReadFailed); only a broken
//     connection fails the host.
//   - A host copy is renamed only after its exact bytes are durable in the
//     spool and its source is recorded; renames never replace a file.
//   - Host-supplied names are validated before use and quoted in logs.
//   - A walk hint (WalkHint, the last discovery's questions) decides only
//     when a question is asked, never what its answer is; a missing or
//     damaged hint file is no hint, and one is written only when it
//     changed, never in a dry run.
package claim
