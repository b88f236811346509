package ingest

import (
	"fmt"
	"io"
	"syscall"
)

// maxTargetSize bounds what the ingester reads from a target before it
// appends to it: a document grown past this is a problem for a human.
const maxTargetSize = 64 << 20

// nofollowNonblock opens without following a swapped-in symlink and without
// blocking on a swapped-in FIFO.
const nofollowNonblock = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return data, nil
}
