// Package workspace is a workspace's identity: the random id and the time
// `handoff init` gave it, kept in .handoff/workspace.json and in the
// ledger. A directory without an identity is no workspace, and every
// command that writes one asks this package first, so that a typo in a
// path never starts a second, empty memory.
//
// Guarantees:
//   - Read and Check write nothing, anywhere: a directory that is not a
//     workspace stays as it was, and does not even gain a .handoff
//     directory.
//   - Check tells a workspace made by an earlier handoff (a ledger, no
//     identity) from no workspace at all, and for the latter names the
//     workspaces near the path asked for (a parent or child, or a sibling
//     whose name is a typo away), reading at most a bounded number of
//     directory entries.
//   - Establish records the identity in the ledger first and writes the
//     identity file last, durably (internal/durable), so that a workspace
//     with the file has both, and one a crash left with only the ledger's
//     record gets that same id back, never a second one.
//   - An identity is never replaced: a file and a ledger that disagree are
//     an *Error, and nothing is changed.
package workspace
