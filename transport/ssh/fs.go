package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/handoff-sync/handoff/transport"
)

// readChunk is the most one SFTP read asks for (the protocol's portable
// packet size).
const readChunk = 32 * 1024

// readsPerFile is how many READ requests one ReadFile keeps in flight: a
// file of up to 2 MiB is read in one round trip.
const readsPerFile = 64

// maxReadRegular bounds how many names Rename remembers ReadFile found
// regular (for its one-round-trip path on OpenSSH).
const maxReadRegular = 4096

// maxPendingCloses bounds the CLOSE requests ReadFile leaves in flight
// without waiting for their answers.
const maxPendingCloses = 512

// errClosed is the cause recorded when the caller closes the FS.
var errClosed = errors.New("the FS was closed")

// FS is a transport.FS on one SFTP session. Its methods may be called from
// any number of goroutines at once: pkg/sftp sends their requests on the one
// session and matches the replies by id, and the guard follows each listing
// by id and handle. Once a call's context ends mid-call, or the keepalive
// finds the peer dead, or Close is called, the connection is gone and every
// call fails.
type FS struct {
	cfg   Config
	log   *slog.Logger
	sftp  *sftp.Client
	guard *listGuard
	gw    *guardWriter // the guard's own requests (LstatAll) go out through it

	client *ssh.Client // for keepalives; nil in tests that speak SFTP over a pipe
	// closers tear the connection down, innermost first: the target's SSH
	// client, then the jump hosts' (last hop first). pkg/sftp closes the
	// SFTP stream itself.
	closers []io.Closer

	reader *guardReader // knows why the stream was cut, if the guard cut it

	// handles bounds the handles open on the server at once (handles.go).
	handles *handleLimit

	// openSSH: the server is OpenSSH's sshd with its own sftp-server,
	// whose rename of a regular file never replaces (see Rename).
	// readRegular holds the names ReadFile last found to be regular
	// files. lstatSafe: openSSH, and not on Windows (LstatNoFollow).
	openSSH     bool
	readRegular *nameSet
	lstatSafe   bool

	closeSem chan struct{}  // a token per CLOSE in flight (closeFile)
	closeMu  sync.Mutex     // guards closed and closing.Add
	closed   bool           // Close is waiting for the CLOSEs in flight
	closing  sync.WaitGroup // CLOSEs in flight

	homeMu sync.Mutex
	home   string // the login directory, once asked

	closeOnce sync.Once
	done      chan struct{} // closed when the connection is torn down
	errMu     sync.Mutex
	closedErr error // why the connection is gone
}

var _ transport.FS = (*FS)(nil)

// newFS starts pkg/sftp on an SFTP stream. Options keep memory bounded:
// 32 KiB packets; concurrent reads, which split one File.ReadAt into up to
// readsPerFile chunk requests in flight, always into a buffer readFile
// sized itself. Nothing here may call File.Read, File.WriteTo or
// File.ReadFrom (or io.Copy and io.ReadAll on a File): with concurrent
// reads those size their work from what the server claims a file holds
// (TestNoServerSizedReads checks).
//
// With limitsEarly (the SSH banner says OpenSSH), the limits@openssh.com
// request follows INIT at once instead of waiting for the VERSION that
// says the server has it: its answer then comes with the VERSION, before
// the first wave of listings, which would otherwise be bounded to
// defaultHandles for a round trip. A server without it answers with an
// error status, which the guard takes out of the stream like the answer.
func newFS(rd io.Reader, wr io.WriteCloser, cfg Config, log *slog.Logger, limitsEarly bool, closers ...io.Closer) (*FS, error) {
	g := newListGuard()
	g.handles = newHandleLimit(defaultHandles)
	gr := newGuardReader(rd, g)
	bw := newBatchWriter(wr)
	gw := &guardWriter{w: bw, g: g, watch: newSentWatch()}
	if limitsEarly {
		gw.afterInit = g.limitsRequest()
	}
	c, err := sftp.NewClientPipe(gr, gw,
		sftp.MaxPacketChecked(readChunk),
		sftp.UseConcurrentReads(true),
		sftp.UseConcurrentWrites(false),
		sftp.MaxConcurrentRequestsPerFile(readsPerFile),
	)
	if err != nil {
		bw.Close() // ends its writing goroutine
		return nil, err
	}
	if isOpenSSHSFTP(c) {
		// Read ahead in listings (guard.go): nothing has listed yet.
		g.mu.Lock()
		g.out = gw
		g.mu.Unlock()
	}
	f := &FS{cfg: cfg, log: log, sftp: c, guard: g, gw: gw, reader: gr, closers: closers, done: make(chan struct{}),
		closeSem: make(chan struct{}, maxPendingCloses), readRegular: newNameSet(maxReadRegular), handles: g.handles}
	// Nothing else writes to the stream yet: ask for the server's limits
	// now, and raise the bound when the answer comes.
	if _, ok := c.HasExtension("limits@openssh.com"); ok && !limitsEarly {
		if err := g.askLimits(bw); err != nil {
			c.Close()
			return nil, fmt.Errorf("sftp: ask for limits: %w", err)
		}
	}
	// When the SFTP session ends on its own (the peer hung up, or the guard
	// cut off a protocol violation), mark the FS broken at once with the
	// real cause, so that every later call fails with ErrBroken instead of
	// each reporting a vague "connection lost".
	go func() {
		cause := c.Wait()
		if gerr := gr.failure(); gerr != nil {
			cause = gerr
		}
		if cause == nil {
			cause = errors.New("the SFTP session ended")
		}
		f.abort(cause)
	}()
	return f, nil
}

// abort tears the connection down, recording why. Safe to call many times
// and from any goroutine; it never waits on the peer.
func (f *FS) abort(cause error) {
	f.closeOnce.Do(func() {
		f.errMu.Lock()
		f.closedErr = cause
		f.errMu.Unlock()
		close(f.done)
		// Close the transport first: that fails every pending SFTP request
		// at once, so closing the SFTP client cannot wait on a silent peer.
		for _, c := range f.closers {
			c.Close()
		}
		f.sftp.Close()
		f.reader.stop()
	})
}

// broken returns the error every call gets once the connection is gone.
func (f *FS) broken() error {
	select {
	case <-f.done:
	default:
		return nil
	}
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return fmt.Errorf("ssh: %s: %w: %w", f.cfg.Alias, transport.ErrBroken, f.closedErr)
}

// call runs op under ctx: if ctx ends while op is in flight, the whole
// connection is closed so that op returns at once. A context that is
// already done fails the call without touching the connection.
func (f *FS) call(ctx context.Context, op func() error) error {
	if err := f.broken(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() {
		f.log.Info("ssh: context ended mid-call; closing the connection", "host", f.cfg.Alias, "cause", context.Cause(ctx))
		f.abort(fmt.Errorf("context ended during a call: %w", context.Cause(ctx)))
	})
	err := op()
	stop()
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if errors.Is(err, sftp.ErrSSHFxConnectionLost) {
			// The session is gone; do not wait for the watcher to notice.
			cause := err
			if gerr := f.reader.failure(); gerr != nil {
				cause = gerr
			}
			f.abort(cause)
		}
		if berr := f.broken(); berr != nil {
			return fmt.Errorf("%w (%w)", berr, err)
		}
	}
	return err
}

// Close closes the SFTP session, the SSH connection and any jump hosts',
// and waits for the goroutines that were sending CLOSEs (which fail at once
// on the closed connection). It is safe to call more than once, and
// concurrently with other calls, which then fail with ErrBroken.
func (f *FS) Close() error {
	f.abort(errClosed)
	f.closeMu.Lock()
	f.closed = true
	f.closeMu.Unlock()
	f.closing.Wait()
	return nil
}

// Home is the SFTP login directory. It is asked for once per session:
// the login directory does not change.
func (f *FS) Home(ctx context.Context) (string, error) {
	if err := f.broken(); err != nil {
		return "", fmt.Errorf("sftp: home: %w", err)
	}
	f.homeMu.Lock()
	defer f.homeMu.Unlock()
	if f.home != "" {
		return f.home, nil
	}
	var home string
	err := f.call(ctx, func() error {
		var err error
		home, err = f.sftp.RealPath(".")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("sftp: home: %w", err)
	}
	if !path.IsAbs(home) {
		return "", fmt.Errorf("sftp: home: the server answered %q, not an absolute path", home)
	}
	f.home = path.Clean(home)
	return f.home, nil
}

var (
	_ transport.Resolver   = (*FS)(nil)
	_ transport.TailReader = (*FS)(nil)
)

// RealPath asks the server to resolve name (REALPATH): the absolute path
// with its symlinks followed, as the server sees it.
func (f *FS) RealPath(ctx context.Context, name string) (string, error) {
	var real string
	err := f.call(ctx, func() error {
		var err error
		real, err = f.sftp.RealPath(name)
		return err
	})
	if err != nil {
		return "", opErr("realpath", name, err)
	}
	return real, nil
}

// LstatNoFollow reports whether the server is known to be OpenSSH's own
// sftp-server on a system whose LSTAT is lstat(2). Another server's LSTAT
// may follow symlinks (ProFTPD's does), and Win32-OpenSSH emulates lstat
// over junctions and reparse points, so for them it says false.
func (f *FS) LstatNoFollow() bool { return f.lstatSafe }

// Lstat describes name without following a final symlink.
func (f *FS) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	var fi transport.FileInfo
	err := f.call(ctx, func() error {
		var err error
		fi, err = f.lstat(name)
		return err
	})
	if err != nil {
		return transport.FileInfo{}, opErr("lstat", name, err)
	}
	return fi, nil
}

func (f *FS) lstat(name string) (transport.FileInfo, error) {
	fi, err := f.sftp.Lstat(name)
	if err != nil {
		return transport.FileInfo{}, err
	}
	return fromOS(fi), nil
}

// ReadDir lists name with lstat semantics (OpenSSH's READDIR reports each
// entry as lstat(2) does). It fails once more than maxEntries entries
// arrive, holding no more than that (plus "." and "..", and one reply in
// flight) meanwhile. Any number of listings may run at once, each with its
// own budget: a listing cut off leaves the others untouched. Listings of
// one name with different maxEntries take turns.
func (f *FS) ReadDir(ctx context.Context, name string, maxEntries int) ([]transport.FileInfo, error) {
	if maxEntries <= 0 {
		maxEntries = transport.DefaultMaxEntries
	}
	if err := f.broken(); err != nil {
		return nil, opErr("readdir", name, err)
	}
	dir, err := f.guard.begin(ctx, f.done, name, maxEntries+2) // OpenSSH lists "." and ".." too
	if err != nil {
		if berr := f.broken(); berr != nil {
			err = berr
		}
		return nil, opErr("readdir", name, err)
	}
	defer f.guard.end(dir)
	var out []transport.FileInfo
	err = f.call(ctx, func() error {
		ents, err := f.list(ctx, name)
		if f.guard.cut(err) || len(ents) > maxEntries {
			return fmt.Errorf("more than %d entries", maxEntries)
		}
		if err != nil {
			return err
		}
		out = make([]transport.FileInfo, len(ents))
		for i, e := range ents {
			out[i] = fromOS(e)
			out[i].Name = f.guard.unmask(dir, out[i].Name)
		}
		return nil
	})
	if err != nil {
		return nil, opErr("readdir", name, err)
	}
	return out, nil
}

// list lists name holding one of the session's handles (if the guard
// answers the listing's CLOSE itself, the handle stays counted until the
// server answers too). A listing that fails while many handles are open
// is, like a failed OPEN, tried again with a lower bound.
func (f *FS) list(ctx context.Context, name string) ([]os.FileInfo, error) {
	for try := 1; ; try++ {
		if err := f.handles.acquire(ctx, f.done); err != nil {
			return nil, err
		}
		ents, err := f.sftp.ReadDirContext(ctx, name)
		retry := err != nil && !f.guard.cut(err) && try < openTries && f.handles.exhausted(err)
		f.handles.release()
		if !retry {
			return ents, err
		}
		f.logExhausted("opendir", name, err)
	}
}

// ReadFile reads a regular file of at most limit bytes. It refuses anything
// Lstat does not call a regular file before opening it (an SFTP open
// follows symlinks and blocks on a FIFO), checks the open handle is still
// that file, reads it into a buffer of its size plus one byte, and returns
// the data with a stat of the handle taken after the read.
//
// Round trips: LSTAT, OPEN, FSTAT, the READs, FSTAT: five, whatever the
// size up to readsPerFile chunks, since the READs are sent together (the
// data in 32 KiB chunks, and one byte at the size, which must find the
// end). On OpenSSH's own sftp-server a file of up to one chunk takes
// three: the READs and one FSTAT after them go out together once the
// OPEN has answered (readPipelined). The CLOSE is sent without waiting
// for its answer.
func (f *FS) ReadFile(ctx context.Context, name string, limit int64) ([]byte, transport.FileInfo, error) {
	if limit < 0 {
		limit = 0
	}
	var data []byte
	var after transport.FileInfo
	err := f.call(ctx, func() error {
		var err error
		data, after, err = f.readFile(name, limit)
		return err
	})
	if err != nil {
		return nil, transport.FileInfo{}, opErr("read", name, err)
	}
	return data, after, nil
}

// ReadListed is ReadFile for a name the caller has just listed: listed,
// the listing's entry (READDIR answers with lstat semantics), stands in
// for the LSTAT ReadFile sends before opening, so the read costs four round
// trips (two, pipelined). Everything else ReadFile checks still holds,
// against listed: the open handle must be a regular file of the listed
// size and modification time, and no more than min(listed size, limit)+1
// bytes are ever held.
// What the listing cannot vouch for is the instant between it and the
// OPEN: a name swapped for a FIFO then makes the server's OPEN wait for a
// writer, which stalls this connection until the host's deadline (no
// other host is affected, nothing is read or lost).
func (f *FS) ReadListed(ctx context.Context, name string, listed transport.FileInfo, limit int64) ([]byte, transport.FileInfo, error) {
	if limit < 0 {
		limit = 0
	}
	var data []byte
	var after transport.FileInfo
	err := f.call(ctx, func() error {
		var err error
		f.readRegular.forget(name)
		data, after, err = f.readOpened(name, listed, limit)
		return err
	})
	if err != nil {
		return nil, transport.FileInfo{}, opErr("read", name, err)
	}
	return data, after, nil
}

func (f *FS) readFile(name string, limit int64) ([]byte, transport.FileInfo, error) {
	f.readRegular.forget(name)
	before, err := f.lstat(name)
	if err != nil {
		return nil, transport.FileInfo{}, err
	}
	return f.readOpened(name, before, limit)
}

// readOpened opens name, which before (an lstat or a listing entry) says is
// a regular file, and reads it.
func (f *FS) readOpened(name string, before transport.FileInfo, limit int64) ([]byte, transport.FileInfo, error) {
	if !before.IsRegular() {
		return nil, transport.FileInfo{}, fmt.Errorf("%w (a %s)", transport.ErrNotRegular, transport.Kind(before.Mode))
	}
	if before.Size > limit || before.Size < 0 {
		return nil, transport.FileInfo{}, fmt.Errorf("%w (%d bytes, limit %d)", transport.ErrTooLarge, before.Size, limit)
	}
	if f.pipelined(before.Size) {
		return f.readPipelined(name, before)
	}
	return f.readOpenedInTurn(name, before)
}

// readOpenedInTurn is readOpened with each request waiting for the answer
// to the one before: OPEN, FSTAT, the READs with the probe, FSTAT.
func (f *FS) readOpenedInTurn(name string, before transport.FileInfo) ([]byte, transport.FileInfo, error) {
	file, opened, err := f.openStat(name)
	if err != nil {
		return nil, transport.FileInfo{}, err
	}
	defer f.closeFile(file)
	if err := f.checkOpened(name, before, opened); err != nil {
		return nil, transport.FileInfo{}, err
	}
	data, err := readSized(file, before.Size)
	if err != nil {
		return nil, transport.FileInfo{}, err
	}
	st, err := file.Stat()
	return statAfter(data, before, st, err)
}

// checkOpened checks a stat of a handle opened on name (before its READs,
// or after them on the pipelined path) against before, the lstat or
// listing that had it a regular file: it must still be one, of the same
// size and modification time.
func (f *FS) checkOpened(name string, before transport.FileInfo, opened os.FileInfo) error {
	if !opened.Mode().IsRegular() {
		return fmt.Errorf("%w: the open handle is a %s", transport.ErrNotRegular, transport.Kind(opened.Mode()))
	}
	if opened.Size() != before.Size || !opened.ModTime().Equal(before.ModTime) {
		return fmt.Errorf("%w: lstat said %d bytes, the open handle %d", ErrChanged, before.Size, opened.Size())
	}
	f.readRegular.add(name) // LSTAT and the handle agree: a regular file
	return nil
}

// statAfter returns data with st, the stat of its handle taken after
// every READ, named as before. A file shorter than its stat said is
// returned as read: the stat tells the caller it changed.
func statAfter(data []byte, before transport.FileInfo, st os.FileInfo, err error) ([]byte, transport.FileInfo, error) {
	if err != nil {
		return nil, transport.FileInfo{}, fmt.Errorf("fstat: %w", err)
	}
	after := fromOS(st)
	after.Name = before.Name
	return data, after, nil
}

// ReadContent reads a regular file's bytes for a caller that only compares
// them with bytes it already holds (the read-back after an archive rename).
// It keeps ReadFile's bounds (it never opens what Lstat does not call a
// regular file, and never holds more than limit+1 bytes, whatever the
// server sends) but takes no stat of the open handle: a file that changes
// during the read simply compares unequal. It costs three round trips
// (LSTAT, OPEN, READ with its EOF probe; the CLOSE is not waited for)
// where ReadFile costs five.
func (f *FS) ReadContent(ctx context.Context, name string, limit int64) ([]byte, error) {
	if limit < 0 {
		limit = 0
	}
	var data []byte
	err := f.call(ctx, func() error {
		fi, err := f.lstat(name)
		if err != nil {
			return err
		}
		if !fi.IsRegular() {
			return fmt.Errorf("%w (a %s)", transport.ErrNotRegular, transport.Kind(fi.Mode))
		}
		if fi.Size > limit || fi.Size < 0 {
			return fmt.Errorf("%w (%d bytes, limit %d)", transport.ErrTooLarge, fi.Size, limit)
		}
		file, err := f.open(name)
		if err != nil {
			return err
		}
		defer f.closeFile(file)
		data, err = readSized(file, fi.Size)
		return err
	})
	if err != nil {
		return nil, opErr("read", name, err)
	}
	return data, nil
}

// ReadTail reads the n bytes that end at listed.Size, for a caller that
// compares them with bytes it holds (a git index's trailing checksum). It
// sends OPEN and one READ, and does not wait for the CLOSE: one round trip
// fewer than ReadContent, and n bytes on the wire whatever the file's
// size. No more than n bytes are held, whatever the server sends.
func (f *FS) ReadTail(ctx context.Context, name string, listed transport.FileInfo, n int64) ([]byte, error) {
	if !listed.IsRegular() {
		return nil, opErr("read", name, fmt.Errorf("%w (a %s)", transport.ErrNotRegular, transport.Kind(listed.Mode)))
	}
	if n < 0 || listed.Size < n {
		return nil, opErr("read", name, fmt.Errorf("%w: %d bytes, fewer than %d", ErrChanged, listed.Size, n))
	}
	buf := make([]byte, n)
	err := f.call(ctx, func() error {
		file, err := f.open(name)
		if err != nil {
			return err
		}
		defer f.closeFile(file)
		got, err := file.ReadAt(buf, listed.Size-n)
		switch {
		case int64(got) == n:
			return nil // io.ReaderAt may say EOF with the last byte
		case err == nil || errors.Is(err, io.EOF):
			return fmt.Errorf("%w: shorter than the %d bytes listed", ErrChanged, listed.Size)
		}
		return err
	})
	if err != nil {
		return nil, opErr("read", name, err)
	}
	return buf, nil
}

// readSized reads a file whose stat says it holds size bytes (size already
// checked against the caller's limit). The buffer is sized here, so that
// whatever the server sends, never more than size+1 bytes are held. Its
// last byte is a probe at the size, sent alongside the data: a file longer
// than its stat answers it with data instead of EOF, and fails with
// ErrChanged. A file shorter than its stat is returned as read.
func readSized(file *sftp.File, size int64) ([]byte, error) {
	buf := make([]byte, size+1)
	var probeN int
	var probeErr error
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		probeN, probeErr = file.ReadAt(buf[size:], size)
	}()
	n, err := readAt(file, buf[:size])
	<-probed
	return probedData(buf, n, err, probeN, probeErr)
}

// probedData returns the n bytes read into buf, whose last byte is the
// probe's: a read error fails it, and so does a probe that found data
// past the size the stat said, or anything but the end of the file.
func probedData(buf []byte, n int, err error, probeN int, probeErr error) ([]byte, error) {
	if err != nil && err != io.EOF {
		return nil, err
	}
	if probeN > 0 || probeErr == nil {
		return nil, fmt.Errorf("%w: the server sent more than the %d bytes its stat said", ErrChanged, len(buf)-1)
	}
	if probeErr != io.EOF {
		return nil, probeErr
	}
	return buf[:n:n], nil
}

// readAt fills b from the start of file. pkg/sftp sends a read longer than
// one packet as concurrent chunk requests (at most readsPerFile at once)
// and takes a short chunk for the end of the file. A server may also
// answer short in the middle (the protocol allows it), so after a short
// chunk the rest is read again a chunk at a time, until the server itself
// says EOF: an honest server sends at most twice len(b) bytes in all.
func readAt(file *sftp.File, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := file.ReadAt(b, 0)
	if err != io.EOF || len(b) <= readChunk {
		return n, err // up to one chunk, pkg/sftp asks again after a short reply
	}
	for n < len(b) {
		m, err := file.ReadAt(b[n:min(len(b), n+readChunk)], int64(n))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// closeFile closes a file ReadFile has done with. The CLOSE is sent from a
// goroutine, so that the caller does not wait a round trip for its answer;
// at most maxPendingCloses wait at once (past that, the caller waits), and
// FS.Close waits for them all, which is prompt since it has cut the
// connection first.
func (f *FS) closeFile(file *sftp.File) {
	select {
	case f.closeSem <- struct{}{}:
	default:
		f.closeNow(file)
		return
	}
	f.closeMu.Lock()
	if f.closed {
		f.closeMu.Unlock()
		<-f.closeSem
		f.closeNow(file)
		return
	}
	f.closing.Add(1)
	f.closeMu.Unlock()
	go func() {
		defer f.closing.Done()
		defer func() { <-f.closeSem }()
		f.closeNow(file)
	}()
}

func (f *FS) closeNow(file *sftp.File) {
	defer f.handles.release()
	if err := file.Close(); err != nil && f.broken() == nil {
		f.log.Debug("sftp: close failed", "host", f.cfg.Alias, "file", file.Name(), "err", err)
	}
}

// open opens name for reading, holding one of the session's handles until
// closeFile has closed it. An OPEN that fails while many handles are open
// is taken for the server running out of them: the bound is lowered and
// the OPEN tried again once fewer are open.
func (f *FS) open(name string) (*sftp.File, error) {
	for try := 1; ; try++ {
		if err := f.handles.acquire(context.Background(), f.done); err != nil {
			return nil, err
		}
		file, err := f.sftp.Open(name)
		if err == nil {
			return file, nil
		}
		retry := try < openTries && f.handles.exhausted(err)
		f.handles.release()
		if !retry {
			return nil, err
		}
		f.logExhausted("open", name, err)
	}
}

// openStat opens name and stats the open handle. A handle the server does
// not know (its FSTAT fails) while many are open is, like a failed OPEN,
// taken for the server running out of handles: it is closed, the bound
// lowered, and both tried again.
func (f *FS) openStat(name string) (*sftp.File, os.FileInfo, error) {
	for try := 1; ; try++ {
		file, err := f.open(name)
		if err != nil {
			return nil, nil, err
		}
		opened, err := file.Stat()
		if err == nil {
			return file, opened, nil
		}
		retry := try < openTries && f.handles.exhausted(err)
		f.closeFile(file)
		if !retry {
			return nil, nil, fmt.Errorf("fstat: %w", err)
		}
		f.logExhausted("fstat", name, err)
	}
}

func (f *FS) logExhausted(op, name string, err error) {
	limit, _ := f.handles.stats()
	f.log.Info("sftp: the server seems out of handles; fewer at once", "host", f.cfg.Alias, "op", op, "file", name, "err", err, "bound", limit)
}

// Rename moves oldname to newname and never replaces newname: if newname
// exists it returns ErrExist and changes nothing. It uses the plain SFTP
// rename, never posix-rename@openssh.com (which replaces): after an LSTAT
// that finds newname free, or alone on OpenSSH's own sftp-server when
// ReadFile just found oldname to be a regular file, since that server
// renames a regular file with link(2). See docs/design.md, "Renames".
func (f *FS) Rename(ctx context.Context, oldname, newname string) error {
	err := f.call(ctx, func() error {
		if f.openSSH && f.readRegular.forget(oldname) {
			err := f.sftp.Rename(oldname, newname)
			if err == nil {
				return nil
			}
			return f.renameFailed(err, newname)
		}
		if _, err := f.sftp.Lstat(newname); err == nil {
			return transport.ErrExist
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("lstat destination: %w", err)
		}
		err := f.sftp.Rename(oldname, newname)
		if err == nil {
			return nil
		}
		return f.renameFailed(err, newname)
	})
	if err != nil {
		// A server's status message can be as long as a packet: keep the
		// error's text short, as opErr does.
		return &capped{msg: clipText(fmt.Sprintf("sftp: rename %q to %q: %v", oldname, newname, err), maxErrText), err: err}
	}
	return nil
}

// renameFailed classifies a failed rename: ErrExist if newname is there.
func (f *FS) renameFailed(err error, newname string) error {
	if errors.Is(err, os.ErrNotExist) {
		return err
	}
	if _, lerr := f.sftp.Lstat(newname); lerr == nil {
		return fmt.Errorf("%w (%v)", transport.ErrExist, err)
	}
	return err
}

// isOpenSSH reports whether an SSH version banner ("SSH-2.0-OpenSSH_9.2p1
// Debian-2") names OpenSSH, on any platform.
func isOpenSSH(banner string) bool {
	for _, proto := range []string{"SSH-2.0-", "SSH-1.99-"} {
		if rest, ok := strings.CutPrefix(banner, proto); ok {
			return strings.HasPrefix(rest, "OpenSSH_")
		}
	}
	return false
}

// isWindowsOpenSSH reports whether an OpenSSH banner is Win32-OpenSSH's
// ("SSH-2.0-OpenSSH_for_Windows_9.5").
func isWindowsOpenSSH(banner string) bool {
	return isOpenSSH(banner) && strings.Contains(banner, "OpenSSH_for_Windows")
}

// isOpenSSHSFTP reports whether the SFTP server behind an OpenSSH banner
// is OpenSSH's own sftp-server: sshd may run another (Green End's, say) as
// its sftp subsystem, and only OpenSSH's is known to rename with link(2).
// OpenSSH's sends no vendor-id and, since 8.0, lsetstat@openssh.com;
// Green End's sends a vendor-id and no lsetstat.
func isOpenSSHSFTP(c *sftp.Client) bool {
	_, vendor := c.HasExtension("vendor-id")
	_, lsetstat := c.HasExtension("lsetstat@openssh.com")
	return lsetstat && !vendor
}

// nameSet is a bounded set of names: past its size, the oldest go first.
type nameSet struct {
	mu    sync.Mutex
	names map[string]struct{}
	ring  []string
	next  int
}

func newNameSet(size int) *nameSet {
	return &nameSet{names: make(map[string]struct{}), ring: make([]string, size)}
}

// add puts name in the set.
func (s *nameSet) add(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.names[name]; ok {
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.names, old)
	}
	s.ring[s.next] = name
	s.next = (s.next + 1) % len(s.ring)
	s.names[name] = struct{}{}
}

// forget takes name out of the set, reporting whether it was there.
func (s *nameSet) forget(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.names[name]
	delete(s.names, name) // its ring slot is reused in turn (evicting a
	// later add of the same name early, which only costs a round trip)
	return ok
}

// Mkdir creates one directory and restricts it to mode 0700 (SFTP's mkdir
// carries no mode through pkg/sftp).
func (f *FS) Mkdir(ctx context.Context, name string) error {
	f.readRegular.forget(name)
	err := f.call(ctx, func() error {
		err := f.sftp.Mkdir(name)
		if err != nil {
			if _, lerr := f.sftp.Lstat(name); lerr == nil {
				return fmt.Errorf("%w (%v)", transport.ErrExist, err)
			}
			return err
		}
		if err := f.sftp.Chmod(name, 0o700); err != nil {
			f.log.Debug("sftp: chmod 0700 after mkdir failed", "host", f.cfg.Alias, "dir", name, "err", err)
		}
		return nil
	})
	return opErr("mkdir", name, err)
}

// Remove deletes a file, symlink or empty directory; SFTP's remove and
// rmdir never follow a symlink.
func (f *FS) Remove(ctx context.Context, name string) error {
	f.readRegular.forget(name)
	err := f.call(ctx, func() error { return f.sftp.Remove(name) })
	return opErr("remove", name, err)
}

// opErr prefixes err with the operation and name; nil stays nil.
func opErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Path == name {
		err = pe.Err // pkg/sftp's own prefix would repeat ours
	}
	return &capped{msg: clipText(fmt.Sprintf("sftp: %s %q: %v", op, name, err), maxErrText), err: err}
}

// maxErrText bounds an error message: servers choose the text of their
// status replies, and a hostile one must not make reports grow.
const maxErrText = 512

// capped is an error whose message is clipped; errors.Is still sees the
// cause.
type capped struct {
	msg string
	err error
}

func (e *capped) Error() string { return e.msg }
func (e *capped) Unwrap() error { return e.err }

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func fromOS(fi os.FileInfo) transport.FileInfo {
	return transport.FileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// keepalive asks the server for a reply every interval, one request at a
// time. When a request is still unanswered max intervals after it was
// sent, it closes the connection, so that every pending call fails instead
// of waiting on a dead peer.
func (f *FS) keepalive(interval time.Duration, max int) {
	if f.client == nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	replies := make(chan error, 1)
	waiting, missed := false, 0
	for {
		select {
		case <-f.done:
			return
		case err := <-replies:
			waiting = false
			if err != nil {
				f.abort(fmt.Errorf("keepalive: %w", err))
				return
			}
			missed = 0
		case <-t.C:
			if waiting {
				missed++
				if missed >= max {
					f.log.Warn("ssh: peer stopped answering keepalives; closing the connection", "host", f.cfg.Alias, "unanswered", missed, "interval", interval)
					f.abort(fmt.Errorf("no answer to %d keepalives %s apart", missed, interval))
					return
				}
				continue
			}
			waiting = true
			go func() {
				// Any reply, even a refusal, proves the peer alive.
				_, _, err := f.client.SendRequest("keepalive@openssh.com", true, nil)
				replies <- err
			}()
		}
	}
}
