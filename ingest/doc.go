// Package ingest turns stored handoffs into workspace changes: parsing and
// validation (the handoff format and its reason codes), planning, the
// transaction (plan, backup, guarded commit, bookkeeping), crash recovery,
// and the SQLite ledger that remembers all of it.
//
// Guarantees:
//   - A content (by SHA-256) is applied at most once, ever; later copies are
//     recorded as duplicates.
//   - A plan is durable in the ledger before its target is touched; the
//     target's prior content is durable under .handoff/backups before it is
//     replaced; the target is replaced atomically and only while it still
//     hashes to the plan's before-hash.
//   - A run killed at any point is finished by the next one without a second
//     application: the target's hash tells whether the write happened, or
//     whether a later plan of the same batch, made on top of it, replaced
//     it.
//   - Nothing is written outside the workspace: every path is resolved in an
//     os.Root, and a symlinked component or target routes the handoff to
//     review instead.
//   - Backups and review drafts are 0600 in 0700 directories whatever the
//     umask (layout.FileMode); an applied run first narrows the .handoff
//     and .handoff/review directories an earlier version left wider.
//     Cards and documents get 0644 and 0755 less the umask.
//   - Anything not clearly safe (failed validation, secret-like, hidden or
//     injection-like content, stale hashes) goes to review with a stable
//     reason code.
//   - A person's decision about a handoff waiting for review (Decide, see
//     review.go) goes through the same plan and commit and crash recovery,
//     relaxing only the rules its Override names; the decision is finished
//     in the plan's own bookkeeping transaction.
//
// These hold per handoff; their cost is shared. Sources are decided and
// applied in batches (batch.go): one plan commit and one bookkeeping commit
// per batch, the batch's new files written and fsynced concurrently, each
// directory fsynced once.
package ingest
