// Package handoff pulls memory-handoff files from writer hosts and ingests
// them into a durable-memory workspace. Sync is the whole job: pull every
// selected host (discover, claim, store, acknowledge), then ingest everything
// stored (plan, back up, commit), then write a receipt.
//
// Guarantees:
//   - Sync never starts a workspace: a directory without an identity (see
//     Init) is refused with a *NoWorkspaceError before anything is
//     created, and one an earlier handoff made (a ledger, no identity) is
//     given its identity by its first applied run.
//   - One run at a time per workspace: Sync takes an exclusive flock on
//     .handoff/lock and returns ErrLocked at once if another run holds it.
//   - No handoff is lost: a remote copy is archived only after its exact
//     bytes are durable in the spool and its source is in the ledger.
//     The run is the ledger's one writer: pull workers record through
//     it (worker.RecordQueue), and a worker learns a batch is recorded
//     only once the transaction holding it has committed.
//   - None is applied twice: content is identified by SHA-256, plans are
//     recorded before they are applied and finished by the next run after a
//     crash.
//   - A dry run writes nothing at all: no spool, no renames, no ledger rows,
//     no receipt; it works on a scratch copy of the ledger in a temporary
//     directory that it removes.
//   - A host that fails does not stop the others; the outcome is then
//     "partial".
package handoff
