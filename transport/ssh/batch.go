package ssh

import (
	"io"
	"runtime"
	"sync"
)

// maxBatch bounds the bytes waiting in a batchWriter: past it, Write waits
// for the stream, as a direct write would.
const maxBatch = 1 << 20

// coalesceBelow is the size under which the writer yields once before it
// writes, so that more requests join the write.
const coalesceBelow = 16 << 10

// batchWriter coalesces the SFTP requests written while the stream is
// busy into one write: each write to the SSH channel is an SSH packet and
// a system call, and pkg/sftp writes every request on its own, so a burst
// of pipelined requests (READs, LSTATs, READDIRs of a walk) cost one
// system call each. Bytes go out in the order written; Write returns once
// they are queued, and the first error of the stream fails every later
// Write.
//
// One goroutine, started with the writer and ended by Close or the first
// error, does every write: it keeps the stack that SSH's packet writing
// grew, where a goroutine for each burst grew a fresh one every time
// (about a third of a pull worker's stack growth, 2% of its CPU).
type batchWriter struct {
	w io.WriteCloser

	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // queued, not yet handed to w
	spare   []byte
	writing bool // bytes are queued or being written
	err     error
	done    chan struct{} // closed when the writing goroutine ends
}

func newBatchWriter(w io.WriteCloser) *batchWriter {
	b := &batchWriter{w: w, done: make(chan struct{})}
	b.cond = sync.NewCond(&b.mu)
	go b.flush()
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
		b.cond.Broadcast()
	}
	return len(p), nil
}

// flush writes what is queued, as it is queued, until the stream fails or
// is closed.
func (b *batchWriter) flush() {
	defer close(b.done)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for len(b.buf) == 0 && b.err == nil {
			b.cond.Wait()
		}
		if b.err != nil {
			b.writing = false
			b.cond.Broadcast()
			return
		}
		if len(b.buf) < coalesceBelow {
			// Let the requesters a burst of answers woke queue
			// theirs first: one write for many, not one each.
			b.mu.Unlock()
			runtime.Gosched()
			b.mu.Lock()
			if b.err != nil {
				continue
			}
		}
		out := b.buf
		b.buf = b.spare[:0]
		b.mu.Unlock()
		_, err := b.w.Write(out)
		b.mu.Lock()
		b.spare = out[:0]
		if err != nil {
			b.err = err
		}
		if len(b.buf) == 0 {
			b.writing = false
		}
		b.cond.Broadcast()
	}
}

// Close closes the stream at once; what is still queued is dropped, as it
// would be by closing a stream written directly. It ends the goroutine
// that writes.
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
