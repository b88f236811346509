package ingest

import "golang.org/x/sys/unix"

// openPath opens a directory only to name things in it (O_PATH): no read
// permission is needed and nothing can be read through it.
const openPath = unix.O_PATH
