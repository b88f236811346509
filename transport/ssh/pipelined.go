package ssh

import (
	"encoding/binary"
	"fmt"
	"os"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/pkg/sftp"

	"github.com/handoff-sync/handoff/transport"
)

// fxpRead is SFTP's READ packet type (draft-ietf-secsh-filexfer-02).
const fxpRead = 5

// sentWatch lets a caller wait until a request of its own has been queued
// on the stream, so that it can send the next one behind it without
// waiting for an answer: a server that answers in order (OpenSSH's
// sftp-server) then carries them out in that order. The guard's writer
// shows it every READ while a watch is on (pipelined reads).
type sentWatch struct {
	on atomic.Int32 // handles watched; 0: the writer does not look

	mu      sync.Mutex
	waiting map[sentKey]chan struct{}
	reads   map[string]int // READs seen on each watched handle
}

// sentKey names one READ: its handle and its offset (a pipelined read asks
// each offset of a handle once).
type sentKey struct {
	handle string
	off    uint64
}

func newSentWatch() *sentWatch {
	return &sentWatch{waiting: map[sentKey]chan struct{}{}, reads: map[string]int{}}
}

// watching reports whether any handle is watched: the writer keeps a
// READ's fields for saw only then.
func (w *sentWatch) watching() bool { return w.on.Load() > 0 }

// begin starts counting the READs on handle h; end stops, and returns how
// many there were.
func (w *sentWatch) begin(h string) {
	w.mu.Lock()
	w.reads[h] = 0
	w.mu.Unlock()
	w.on.Add(1)
}

func (w *sentWatch) end(h string) int {
	w.on.Add(-1)
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.reads[h]
	delete(w.reads, h)
	return n
}

// saw is told of each READ frame (body: the frame after its length) as
// the writer queues it.
func (w *sentWatch) saw(body []byte) {
	h, ok := sshString(body[5:])
	if !ok {
		return
	}
	rest := body[5+4+len(h):]
	if len(rest) < 8 {
		return
	}
	k := sentKey{handle: string(h), off: binary.BigEndian.Uint64(rest[:8])}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.reads[k.handle]; ok {
		w.reads[k.handle]++
	}
	if ch := w.waiting[k]; ch != nil {
		close(ch)
		delete(w.waiting, k)
	}
}

// send runs op, which sends the request k and waits for its answer, in a
// goroutine of wg, and returns once the request is queued on the stream
// (or op has returned without sending it).
func (w *sentWatch) send(wg *sync.WaitGroup, k sentKey, op func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiting[k] = ch
	w.mu.Unlock()
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		op()
	})
	select {
	case <-ch:
	case <-done:
		w.mu.Lock()
		delete(w.waiting, k)
		w.mu.Unlock()
	}
}

// fileHandle is the SFTP handle of an open pkg/sftp File, which pkg/sftp
// keeps unexported; "" if a pkg/sftp of another shape keeps it elsewhere
// (TestFileHandle fails then), and reads go request by request.
func fileHandle(file *sftp.File) string {
	v := reflect.ValueOf(file).Elem().FieldByName("handle")
	if !v.IsValid() || v.Kind() != reflect.String {
		return ""
	}
	return v.String()
}

// pipelined is whether a file of size bytes is read with its requests in
// flight together (readPipelined): only on OpenSSH's own sftp-server,
// which carries out a session's requests one at a time and in order, and
// only for a file that one READ holds.
func (f *FS) pipelined(size int64) bool {
	return f.openSSH && f.gw != nil && size <= readChunk
}

// readPipelined opens name, which before says is a regular file of at
// most readChunk bytes, and reads it in two round trips instead of four:
// once the OPEN has answered, the READ, the probe at the size and an
// FSTAT are queued in that order without waiting for each other's
// answers, and the server, which answers in order, reads the handle and
// then stats it. The data is returned only if that stat, taken after
// every READ, is a regular file of the listed size and time (checkOpened)
// and the probe found the end.
//
// The turn-by-turn read also stats the handle before its READ, to stop
// at a handle that is not a regular file before reading it. Here the
// READ goes out before any answer, so that stat would guard nothing: a
// stat after the READs that matches the listing says what the one before
// would have (the inode is the handle's, and a change between the two
// stats moves the modification time away from the listing's, which the
// claim's settle time keeps in the past). A name swapped for a FIFO or a
// device between the listing and the OPEN is read (at most size+1 bytes,
// which are dropped); the OPEN itself already reached it either way.
//
// pkg/sftp asks again after a short READ answer; such a READ may follow
// the FSTAT, so then the handle is stat'ed once more, after it.
func (f *FS) readPipelined(name string, before transport.FileInfo) ([]byte, transport.FileInfo, error) {
	for try := 1; ; try++ {
		file, err := f.open(name)
		if err != nil {
			return nil, transport.FileInfo{}, err
		}
		h := fileHandle(file)
		if h == "" {
			f.closeFile(file)
			return f.readOpenedInTurn(name, before)
		}
		r := f.sendReads(file, h, before.Size)
		if r.afterErr != nil {
			retry := try < openTries && f.handles.exhausted(r.afterErr)
			f.closeFile(file)
			if !retry {
				return nil, transport.FileInfo{}, fmt.Errorf("fstat: %w", r.afterErr)
			}
			f.logExhausted("fstat", name, r.afterErr)
			continue
		}
		data, after, err := f.checkReads(file, name, before, r)
		f.closeFile(file)
		return data, after, err
	}
}

// reads is what sendReads got back.
type reads struct {
	after             os.FileInfo
	afterErr          error
	buf               []byte
	n, probeN         int
	readErr, probeErr error
	sent, expected    int // READs sent on the handle, and those asked for
}

// sendReads queues READ (none for an empty file), the probe and FSTAT on
// file's handle h, each behind the one before, and waits for every
// answer.
func (f *FS) sendReads(file *sftp.File, h string, size int64) *reads {
	r := &reads{buf: make([]byte, size+1), expected: 1}
	w := f.gw.watch
	w.begin(h)
	var wg sync.WaitGroup
	if size > 0 {
		r.expected++
		w.send(&wg, sentKey{handle: h}, func() { r.n, r.readErr = file.ReadAt(r.buf[:size], 0) })
	}
	w.send(&wg, sentKey{handle: h, off: uint64(size)}, func() { r.probeN, r.probeErr = file.ReadAt(r.buf[size:], size) })
	wg.Go(func() { r.after, r.afterErr = file.Stat() })
	wg.Wait()
	r.sent = w.end(h)
	return r
}

// checkReads applies readOpened's checks to the answers of sendReads: the
// stat taken after every READ must be a regular file of the listed size
// and time, and the probe must have found the end.
func (f *FS) checkReads(file *sftp.File, name string, before transport.FileInfo, r *reads) ([]byte, transport.FileInfo, error) {
	st := r.after
	if r.sent != r.expected {
		// A short answer was asked again, perhaps after the FSTAT: stat
		// the handle now, after every READ.
		var err error
		if st, err = file.Stat(); err != nil {
			return nil, transport.FileInfo{}, fmt.Errorf("fstat: %w", err)
		}
	}
	if err := f.checkOpened(name, before, st); err != nil {
		return nil, transport.FileInfo{}, err
	}
	data, err := probedData(r.buf, r.n, r.readErr, r.probeN, r.probeErr)
	if err != nil {
		return nil, transport.FileInfo{}, err
	}
	return statAfter(data, before, st, nil)
}
