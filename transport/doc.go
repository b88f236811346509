// Package transport defines FS, the small file-system surface through which
// handoff reads and archives writer inboxes, and its local implementation.
//
// Discovery, claim and acknowledgement are written once against FS; a local
// host and an SSH host differ only in the FS they are given.
//
// Guarantees every implementation makes (checked by the shared conformance
// suite in transport/transporttest):
//   - Lstat and ReadDir never follow a final symlink.
//   - ReadFile never follows a final symlink, never blocks on a FIFO or
//     device, refuses anything whose open handle is not a regular file, and
//     never reads more than limit+1 bytes whatever the host claims.
//   - Rename and Mkdir never replace or modify an existing destination.
//   - Missing names yield errors matching ErrNotExist; existing destinations
//     yield errors matching ErrExist.
//   - Every method is safe to call from many goroutines at once, and each
//     call's bounds hold on their own.
package transport
