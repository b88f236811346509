package durable

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"

	"github.com/handoff-sync/handoff/internal/fanout"
)

// Writer creates, writes and fsyncs new files under temporary names in the
// background: one goroutine creates and writes them in turn (creating
// files in one directory takes its lock, and many creators at once spin
// on it), and up to a bound fsync them at once, so that the fsyncs overlap
// each other (the file system commits concurrent fsyncs together) and the
// caller's own work. At most twice the bound, plus one, are open at once.
// Each Write returns a Pending; its Temp, once ready, is put in place by
// the caller (Rename or Swap), whose directories are then fsynced once
// each (SyncDirs). The spool and the ingester write their batches through
// it.
type Writer struct {
	root *os.Root
	jobs chan *Pending
	wg   sync.WaitGroup
}

// Pending is one file a Writer is writing.
type Pending struct {
	dirs *Dirs // nil: through the Writer's root
	name string
	data []byte
	perm fs.FileMode
	done chan struct{}
	tmp  *Temp
	err  error
}

// NewWriter starts a Writer under root that fsyncs up to n files at once.
func NewWriter(root *os.Root, n int) *Writer {
	w := &Writer{root: root, jobs: make(chan *Pending, n)}
	syncq := make(chan *Pending, n)
	w.wg.Go(func() {
		defer close(syncq)
		for p := range w.jobs {
			if p.dirs != nil {
				p.tmp, p.err = OpenTempIn(p.dirs, p.name, p.data, p.perm)
			} else {
				p.tmp, p.err = OpenTemp(w.root, p.name, p.data, p.perm)
			}
			p.data = nil
			if p.err != nil {
				close(p.done)
				continue
			}
			syncq <- p
		}
	})
	for range max(n, 1) {
		w.wg.Go(func() {
			for p := range syncq {
				if p.err = p.tmp.Sync(); p.err != nil {
					p.tmp = nil
				}
				close(p.done)
			}
		})
	}
	return w
}

// Write queues data for name (relative to the Writer's root); it waits only
// while every worker is busy and the queue full.
func (w *Writer) Write(name string, data []byte, perm fs.FileMode) *Pending {
	return w.WriteIn(nil, name, data, perm)
}

// WriteIn is Write with the file created in its directory's handle in d
// (OpenTempIn); d must stay open until the file is used up.
func (w *Writer) WriteIn(d *Dirs, name string, data []byte, perm fs.FileMode) *Pending {
	p := &Pending{dirs: d, name: name, data: data, perm: perm, done: make(chan struct{})}
	w.jobs <- p
	return p
}

// Close waits for the queued files and stops the workers. Write must not
// be called after it.
func (w *Writer) Close() {
	close(w.jobs)
	w.wg.Wait()
}

// Wait returns the file written and fsynced under its temporary name, or
// why it could not be (then nothing of it is left on disk).
func (p *Pending) Wait() (*Temp, error) {
	<-p.done
	return p.tmp, p.err
}

// SyncDirs fsyncs each of dirs (relative to root) once, at most n at once,
// and returns every failure.
func SyncDirs(root *os.Root, dirs []string, n int) error {
	return eachDir(dirs, n, func(dir string) error { return SyncDir(root, dir) })
}

// eachDir calls sync for each of dirs, at most n at once, and returns
// every failure.
func eachDir(dirs []string, n int, sync func(dir string) error) error {
	errs := make([]error, len(dirs))
	fanout.Each(context.Background(), len(dirs), n, func(_ context.Context, i int) error {
		errs[i] = sync(dirs[i])
		return nil
	})
	return errors.Join(errs...)
}
