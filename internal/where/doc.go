// Package where answers "did my handoff land, and where?": where a
// handoff came from and what became of it, and which handoffs a
// workspace path (card, document, review draft) came from.
//
// Guarantees:
//   - It only reads: the ledger through a read-only view taken under a
//     shared probe of the workspace lock, and the workspace's files; it
//     never writes, creates or upgrades anything.
//   - Every version of a name (its writer rewrote it in place) is a
//     match of its own, oldest first, with its own result; rejected
//     files the pull never read are matches too.
//   - A directory that is no workspace is an error naming the
//     workspaces near it, never an empty answer.
package where
