// Package prune is `handoff prune`: it deletes what is old enough and no
// longer needed, on every host and in the workspace.
//
// Guarantees:
//   - On a host it removes only archived handoffs in processed/ that the
//     ledger says were archived before the cutoff; never anything in
//     malformed/, never an inbox file, never anything below a symlink.
//   - In the workspace it removes spool copies of handoffs that were
//     ingested, and old per-run receipts; never the exact bytes of a
//     handoff that still waits for a person, or that was rejected or
//     superseded less than --older-than ago; never a review draft,
//     latest.*, the newest receipt or the newest failed run's.
//   - Retain, which sync runs after every receipt it writes, removes
//     receipts by the manifest's retention (idle runs' sooner) under the
//     same exceptions, and never one it cannot read.
//   - Backups, which sync runs once a day (RetainBackups) and prune on
//     every run, removes from .handoff/backups only plan backups
//     (ingest.BackupName's names) older than the manifest's backups.keep;
//     never an open plan's or one of a target an open plan changes, never
//     a target's newest backup, another writer's late edit, index.MEMORY.md
//     or anything not a regular file; it opens .handoff and backups
//     without following a symlink, and refuses one.
//   - It takes the workspace lock, refuses a directory that is no
//     workspace, and with --dry-run writes nothing anywhere.
package prune
