//go:build unix && !linux

package durable

import "golang.org/x/sys/unix"

// tryReadLease: there are no leases here, so whether another process
// has a file open for writing cannot be known (awaitWriters says
// errNoLease).
func tryReadLease(fd uintptr) error { return unix.ENOTSUP }
