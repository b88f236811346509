// Package continuity carries a repository's working context from one
// agent to the next, on any host: it records which repository each inbox
// belongs to (as the pulls found it) and which handoff continues which,
// and builds, for each host whose mirror includes repos, the files of
// its repos/ (mirror.ReposFiles) from the ledger and the spool.
//
// Guarantees:
//   - Privacy is decided from the manifest at every build: a handoff
//     from an inbox under a private discover root of its host, or of a
//     repository whose repos entry is private, goes into no other host's
//     files; neither does a handoff of a host the manifest no longer
//     names, nor anything about an inbox whose home is unknown when a
//     private root is written with "~". Privacy is per host: a private
//     repository is its host's own, never joined with another host's
//     clones of the same origin, and its entry's name and origins are
//     never shown to, or change a slug of, another host. A host whose
//     share_notes is false has its handoffs and clones in no other
//     host's files, and still sees the others' in its own.
//   - Build reads the ledger and the spool and writes only the ledger's
//     notes rows (what RECENT.md shows of a handoff, kept the first time
//     its bytes are read, so that prune never blanks RECENT.md); Record
//     writes only the ledger's inbox_repos and threads rows. Neither touches the
//     workspace's memory, and a failure of either is the caller's to log:
//     it never blocks ingest.
//   - No host pushes another's notes out: every bound of repos/ (rows
//     read, repositories kept, handoffs and bytes per RECENT.md) is a
//     per-host share, and rows that are no handoff never count.
//   - An idle build does not grow with a repository's history: of each
//     inbox only the newest rows RECENT.md can show are read, only a
//     host's first Count of a repository are parsed, and threads are
//     grouped once by index (mirror.threads), never pair by pair.
//   - Reads are bounded: at most maxSources ledger rows per host, spool files of
//     at most maxHandoff bytes parsed, and the files mirror.ReposFiles
//     bounds.
package continuity
