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
//     is never opened; it is moved unread into malformed/.
//   - Reads are bounded by the size limit whatever the host claims; a file
//     that changes while read is deferred, not stored.
//   - A host copy is renamed only after its exact bytes are durable in the
//     spool and its source is recorded; renames never replace a file.
//   - Host-supplied names are validated before use and quoted in logs.
package claim
