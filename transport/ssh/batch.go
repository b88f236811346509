package ssh

import (
	"io"
	"sync"
)

// maxBatch bounds the bytes waiting in a batchWriter: past it, Write waits
// for the stream, as a direct write would.
const maxBatch = 1 << 20

// batchWriter coalesces the SFTP requests written while the stream is
// busy into one write: each write to the SSH channel is an SSH packet and
// a system call, and pkg/sftp writes every request on its own, so a burst
// of pipelined requests (READs, LSTATs, READDIRs of a walk) cost one
// system call each. Bytes go out in the order written; Write returns once
// they are queued, and the first error of the stream fails every later
// Write.
type batchWriter struct {
	w io.WriteCloser

	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // queued, not yet handed to w
	spare   []byte
	writing bool // a flush is running
	err     error
}

func newBatchWriter(w io.WriteCloser) *batchWriter {
	b := &batchWriter{w: w}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *batchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && len(b.buf) >= maxBatch {
		b.cond.Wait()
	}
	if b.err != nil {
		return 0, b.err
	}
	b.buf = append(b.buf, p...)
	if !b.writing {
		b.writing = true
		go b.flush()
	}
	return len(p), nil
}

// flush writes what is queued, and what is queued meanwhile, until
// nothing is left.
func (b *batchWriter) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) > 0 && b.err == nil {
		out := b.buf
		b.buf = b.spare[:0]
		b.mu.Unlock()
		_, err := b.w.Write(out)
		b.mu.Lock()
		b.spare = out[:0]
		if err != nil {
			b.err = err
		}
		b.cond.Broadcast()
	}
	b.writing = false
	b.cond.Broadcast()
}

// Close closes the stream at once; what is still queued is dropped, as it
// would be by closing a stream written directly.
func (b *batchWriter) Close() error {
	b.mu.Lock()
	if b.err == nil {
		b.err = io.ErrClosedPipe
	}
	b.buf = nil
	b.cond.Broadcast()
	b.mu.Unlock()
	return b.w.Close()
}
