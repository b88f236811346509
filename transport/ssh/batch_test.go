package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
)

// countingWriter records every Write it gets.
type countingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	fail   error
	gate   chan struct{} // when set, each Write waits for a token
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.gate != nil {
		<-c.gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if c.fail != nil {
		return 0, c.fail
	}
	return c.buf.Write(p)
}

func (c *countingWriter) Close() error { return nil }

// TestBatchWriterKeepsOrder: writes queued while one is in progress go out
// together, in the order written, none lost or repeated.
func TestBatchWriterKeepsOrder(t *testing.T) {
	cw := &countingWriter{gate: make(chan struct{})}
	b := newBatchWriter(cw)
	var want bytes.Buffer
	for i := range 100 {
		msg := fmt.Sprintf("request %03d;", i)
		want.WriteString(msg)
		if _, err := b.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	// The first write is held at the gate (with the first request, or with
	// all of them); the rest waited behind it and go out in one more.
	close(cw.gate)
	b.mu.Lock()
	for b.writing {
		b.cond.Wait()
	}
	b.mu.Unlock()
	if got := cw.buf.String(); got != want.String() {
		t.Fatalf("the stream got %q", got)
	}
	if cw.writes > 2 {
		t.Errorf("%d writes for 100 requests queued behind one; want at most 2", cw.writes)
	}
}

// TestBatchWriterFailsAfterError: once the stream fails, every later
// Write fails too (pkg/sftp then sees the connection gone).
func TestBatchWriterFailsAfterError(t *testing.T) {
	boom := errors.New("boom")
	cw := &countingWriter{fail: boom}
	b := newBatchWriter(cw)
	b.Write([]byte("x"))
	b.mu.Lock()
	for b.writing {
		b.cond.Wait()
	}
	b.mu.Unlock()
	if _, err := b.Write([]byte("y")); !errors.Is(err, boom) {
		t.Fatalf("Write after a failed write: %v; want %v", err, boom)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("z")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	<-b.done // the writing goroutine ended with the first error
}

// TestBatchWriterOneGoroutine: the writing goroutine outlives each burst
// (each written on its own, in order) and ends with Close, after which
// nothing is written.
func TestBatchWriterOneGoroutine(t *testing.T) {
	cw := &countingWriter{}
	b := newBatchWriter(cw)
	for i := range 3 {
		b.Write(fmt.Appendf(nil, "burst %d;", i))
		b.mu.Lock()
		for b.writing {
			b.cond.Wait()
		}
		b.mu.Unlock()
	}
	select {
	case <-b.done:
		t.Fatal("the writing goroutine ended before Close")
	default:
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	<-b.done
	if got := cw.buf.String(); got != "burst 0;burst 1;burst 2;" {
		t.Fatalf("the stream got %q", got)
	}
	if _, err := b.Write([]byte("late")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	if cw.writes != 3 {
		t.Errorf("%d writes for three bursts written one after another; want 3", cw.writes)
	}
}

var _ io.WriteCloser = (*batchWriter)(nil)
