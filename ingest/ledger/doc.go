// Package ledger is the store step's record and the ingester's memory: the
// SQLite database (pure-Go driver, WAL, synchronous=FULL) holding every
// stored source, every distinct handoff and its result, every plan, every
// run and every person's decision in `handoff review` (decisions.go), and
// the read-only queries doctor, where, prune and review ask.
//
// Guarantees:
//   - A committed transaction survives power loss; a source is recorded
//     before its remote copy may be archived, and a content's first result
//     is kept by hash, so a later copy is a duplicate, never applied twice.
//   - A content has one number (shas.go), given the first time it is
//     seen; its bytes, its result and its plan are keyed by that number,
//     at most one of each, and every row's sha256 is its number's
//     (IntegrityCheck checks it).
//   - A process's writers take turns (writeTurn) and are let in as soon
//     as the one before is done; each write waits within a bounded time.
//     Another process's writers are kept out by SQLite's lock. During a
//     run there are none: its pull workers record through the run.
//   - Apply commits many callers' writes in one transaction: all of them
//     or, on an error, none.
//   - Open leaves the database file, its -wal and its -shm 0600 whatever
//     the umask: it creates the file before SQLite does (SQLite gives the
//     other two its mode) and narrows one an earlier version left wider.
//   - OpenReadOnly never creates, migrates or writes anything: a missing
//     ledger is ErrNoLedger, a newer schema an error.
package ledger
