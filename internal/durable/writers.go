package durable

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// WritersWait bounds how long a replacement waits, after its swap, for
// other writers to close the file it took out of place before it reads
// what they appended (see Swapped.Late). A writer that keeps the file open
// longer loses what it writes after that.
var WritersWait = 2 * time.Second

var (
	errNoLease     = errors.New("no lease on this file")
	errWritersOpen = errors.New("another writer still has the file open")
)

// awaitWriters waits until no process has f's file open for writing, or
// until deadline. The kernel grants a read lease only when nobody has the
// file open for writing, so a granted (and at once released) lease is the
// proof; readers do not stand in its way. It returns nil once the file is
// free of writers, errWritersOpen at the deadline, and errNoLease at once
// where leases are not available (a file system without them, or a file
// owned by another user without CAP_LEASE).
func awaitWriters(f *os.File, deadline time.Time) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return errNoLease
	}
	pause := 100 * time.Microsecond
	for {
		var lerr error
		if err := rc.Control(func(fd uintptr) { lerr = tryReadLease(fd) }); err != nil {
			return errNoLease
		}
		switch {
		case lerr == nil:
			return nil
		case !errors.Is(lerr, unix.EAGAIN) && !errors.Is(lerr, unix.EBUSY):
			return errNoLease
		case !time.Now().Before(deadline):
			return errWritersOpen
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// readClosed reads the regular file name once no writer has it open, or at
// deadline, whichever comes first.
func readClosed(root *os.Root, name string, deadline time.Time) ([]byte, error) {
	f, err := openRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	awaitWriters(f, deadline)
	return io.ReadAll(f)
}
