//go:build unix && !linux

package ingest

import "golang.org/x/sys/unix"

// openPath: without O_PATH a directory is opened for reading.
const openPath = unix.O_RDONLY
