package ssh

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/transport"
)

// Invariant: every call returns promptly once its context ends, even when
// the server has stopped answering; afterwards the FS fails clearly.
func TestCanceledDuringStalledRead(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{
		Stall: func(typ byte) bool { return typ == sshdtest.PacketRead },
	})
	f := dialT(t, configFor(srv))
	name := filepath.Join(t.TempDir(), "a.md")
	if err := os.WriteFile(name, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		_, _, err := f.ReadFile(ctx, name, 100)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ReadFile: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile still blocked 5s after its context was canceled")
	}
	_, err := f.Lstat(ctxT(t), name)
	if !errors.Is(err, transport.ErrBroken) {
		t.Fatalf("Lstat after a canceled call: %v, want ErrBroken", err)
	}
}

// Invariant: a dead peer cannot hang a call that has no deadline of its
// own: unanswered keepalives close the connection.
func TestKeepaliveClosesDeadConnection(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{
		Stall:            func(typ byte) bool { return typ == sshdtest.PacketRead },
		IgnoreKeepalives: true,
	})
	cfg := configFor(srv)
	cfg.ServerAliveInterval = 100 * time.Millisecond
	cfg.ServerAliveCountMax = 2
	f := dialT(t, cfg)
	name := filepath.Join(t.TempDir(), "a.md")
	if err := os.WriteFile(name, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := f.ReadFile(context.Background(), name, 100)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "keepalive") {
			t.Fatalf("ReadFile: %v, want a keepalive failure", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile on a dead peer still blocked after 5s")
	}
}

// A live peer answers keepalives (OpenSSH with a refusal, which counts as
// an answer): the connection survives many intervals.
func TestKeepaliveKeepsLiveConnection(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	cfg := configFor(srv)
	cfg.ServerAliveInterval = 200 * time.Millisecond
	cfg.ServerAliveCountMax = 5
	f := dialT(t, cfg)
	time.Sleep(1500 * time.Millisecond)
	if _, err := f.Home(ctxT(t)); err != nil {
		t.Fatalf("Home after keepalives: %v", err)
	}
}

// The SFTP rename OpenSSH implements refuses to replace, so a destination
// created between Rename's check and the rename itself survives. This pins
// down the assumption Rename relies on (posix-rename would replace).
func TestOpenSSHPlainRenameRefusesToReplace(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartOpenSSH(t, sshdtest.Options{SFTPOnly: true})
	f := dialT(t, configFor(srv))
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md")
	os.WriteFile(src, []byte("new"), 0o600)
	os.WriteFile(dst, []byte("old"), 0o600)
	if err := f.sftp.Rename(src, dst); err == nil {
		t.Fatal("SSH_FXP_RENAME replaced an existing file")
	}
	if b, _ := os.ReadFile(dst); string(b) != "old" {
		t.Fatalf("destination now holds %q", b)
	}
}

// Rename takes its one-round-trip path on OpenSSH, told by the banner,
// and only there; only there is LSTAT vouched for (no REALPATH beside it).
func TestRenameServerDetection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		srv  func(*testing.T) *sshdtest.Server
		want bool
	}{
		{"openssh", func(t *testing.T) *sshdtest.Server { return sshdtest.StartOpenSSH(t, sshdtest.Options{SFTPOnly: true}) }, true},
		{"embedded", func(t *testing.T) *sshdtest.Server { return sshdtest.StartEmbedded(t, sshdtest.Options{}) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := dialT(t, configFor(tc.srv(t)))
			if f.openSSH != tc.want {
				t.Fatalf("banner %q: openSSH %v, want %v", f.client.ServerVersion(), f.openSSH, tc.want)
			}
			if f.LstatNoFollow() != tc.want {
				t.Fatalf("banner %q: LstatNoFollow %v, want %v", f.client.ServerVersion(), f.LstatNoFollow(), tc.want)
			}
		})
	}
}

// fakeSFTP is a scripted SFTP server on a pipe, for replies no honest
// server sends.
type fakeSFTP struct {
	attrs   func(typ byte) (size uint64, mode fs.FileMode) // LSTAT, STAT, FSTAT
	read    func(off uint64, n uint32) []byte              // nil: EOF
	readdir func(handle string, n int) uint32              // entries in the nth NAME reply on handle; 0: EOF
	served  atomic.Int64                                   // bytes of READ data or entries of READDIR sent
	replies atomic.Int64                                   // READ or READDIR replies sent

	// holdOpendirs, if set, holds the replies to OPENDIR until that many
	// have arrived (or 5s have passed: heldTimeout).
	holdOpendirs int
	heldTimeout  atomic.Bool
	// handle, if set, is the handle every OPEN and OPENDIR gets (an honest
	// server gives each open handle its own).
	handle string
	// hangUpAfter, if set, closes the connection on the request after
	// that many LSTATs have been answered.
	hangUpAfter int

	logMu sync.Mutex
	log   []string // the requests in the order served: "FSTAT", "READ@off", ...
}

// requests returns the requests served so far, in order.
func (fk *fakeSFTP) requests() []string {
	fk.logMu.Lock()
	defer fk.logMu.Unlock()
	return slices.Clone(fk.log)
}

// start serves f on one end of a pipe and returns an FS on the other.
func (fk *fakeSFTP) start(t *testing.T) *FS {
	t.Helper()
	client, server := net.Pipe()
	go fk.serve(server)
	f, err := newFS(client, client, Config{Alias: "fake"}, slog.New(slog.DiscardHandler), false, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); server.Close() })
	return f
}

func (fk *fakeSFTP) serve(c net.Conn) {
	defer c.Close()
	var wmu sync.Mutex
	send := func(out []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		if _, err := c.Write(u32(nil, uint32(len(out)))); err != nil {
			return err
		}
		_, err := c.Write(out)
		return err
	}
	handles := 0
	listed := map[string]int{} // NAME replies so far, by handle
	var held [][]byte
	var release *time.Timer
	for {
		var lb [4]byte
		if _, err := io.ReadFull(c, lb[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(lb[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		typ, id := body[0], binary.BigEndian.Uint32(body[1:5])
		entry := reqNames[typ]
		if typ == 5 && len(body) >= 9 {
			if hl := binary.BigEndian.Uint32(body[5:9]); uint64(len(body)) >= 17+uint64(hl) {
				entry += "@" + itoa(int(binary.BigEndian.Uint64(body[9+hl:])))
			}
		}
		fk.logMu.Lock()
		fk.log = append(fk.log, entry)
		fk.logMu.Unlock()
		var out []byte
		switch typ {
		case 1: // INIT
			out = append([]byte{2}, 0, 0, 0, 3)
		case 7, 17, 8: // LSTAT, STAT, FSTAT
			if typ == 7 && fk.hangUpAfter > 0 {
				if fk.hangUpAfter == 1 {
					return
				}
				fk.hangUpAfter--
			}
			size, mode := fk.attrs(typ)
			out = attrs(u32([]byte{105}, id), size, mode)
		case 3, 11: // OPEN, OPENDIR
			handles++
			h := "h" + itoa(handles)
			if fk.handle != "" {
				h = fk.handle
			}
			out = str(u32([]byte{102}, id), h)
			if typ == 11 && fk.holdOpendirs > 0 {
				held = append(held, out)
				switch {
				case len(held) == fk.holdOpendirs:
					if release != nil {
						release.Stop()
					}
					for _, h := range held {
						if send(h) != nil {
							return
						}
					}
					held = nil
				case len(held) == 1:
					first := held[0]
					release = time.AfterFunc(5*time.Second, func() {
						fk.heldTimeout.Store(true)
						send(first)
					})
				}
				continue
			}
		case 5: // READ
			hl := binary.BigEndian.Uint32(body[5:9]) // handle, then offset and length
			off := binary.BigEndian.Uint64(body[9+hl:])
			n := binary.BigEndian.Uint32(body[17+hl:])
			data := fk.read(off, n)
			if data == nil {
				out = status(id, 1)
				break
			}
			fk.replies.Add(1)
			fk.served.Add(int64(len(data)))
			out = str(u32([]byte{103}, id), string(data))
		case 12: // READDIR
			hl := binary.BigEndian.Uint32(body[5:9])
			h := string(body[9 : 9+hl])
			n := fk.readdir(h, listed[h])
			listed[h]++
			if n == 0 {
				out = status(id, 1)
				break
			}
			fk.replies.Add(1)
			fk.served.Add(int64(n))
			out = u32(u32([]byte{104}, id), n)
			for i := uint32(0); i < n; i++ {
				out = str(out, "f"+itoa(int(fk.served.Load())+int(i))+".md")
				out = str(out, "")
				out = attrs(out, 1, 0o600)
			}
		case 4: // CLOSE
			out = status(id, 0)
		default:
			out = status(id, 8)
		}
		if send(out) != nil {
			return
		}
	}
}

func u32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func str(b []byte, s string) []byte { return append(u32(b, uint32(len(s))), s...) }
func status(id, code uint32) []byte { return str(str(u32(u32([]byte{101}, id), code), "x"), "") }

// attrs appends SFTP v3 attributes: size, permissions and times.
func attrs(b []byte, size uint64, mode fs.FileMode) []byte {
	b = u32(b, 0x1|0x4|0x8)
	b = binary.BigEndian.AppendUint64(b, size)
	perm := uint32(mode.Perm())
	switch {
	case mode.IsDir():
		perm |= 0o040000
	case mode&fs.ModeNamedPipe != 0:
		perm |= 0o010000
	case mode&fs.ModeSymlink != 0:
		perm |= 0o120000
	default:
		perm |= 0o100000
	}
	b = u32(b, perm)
	return u32(u32(b, 1_700_000_000), 1_700_000_000)
}

// Invariant: no reply can make ReadFile read more than the file's own size
// plus one byte (and so never more than limit+1). The server claims a
// 10-byte file and then never stops sending data: the file "changed".
func TestReadFileEndlessData(t *testing.T) {
	t.Parallel()
	fk := &fakeSFTP{
		attrs: func(byte) (uint64, fs.FileMode) { return 10, 0o600 },
		read:  func(_ uint64, n uint32) []byte { return bytes.Repeat([]byte("x"), int(n)) },
	}
	f := fk.start(t)
	const limit = 100_000
	data, _, err := f.ReadFile(ctxT(t), "/inbox/a.md", limit)
	if !errors.Is(err, transport.ErrChanged) || data != nil {
		t.Fatalf("ReadFile: %d bytes, %v; want ErrChanged and no data", len(data), err)
	}
	if got := fk.served.Load(); got > 10+readChunk {
		t.Fatalf("served %d bytes for a 10-byte file (limit %d): the read was not bounded by the size", got, limit)
	}
}

// Invariant: a server cannot keep ReadFile spinning with empty data
// replies (pkg/sftp would ask again forever); the read fails instead.
func TestReadFileEmptyDataReplies(t *testing.T) {
	t.Parallel()
	fk := &fakeSFTP{
		attrs: func(byte) (uint64, fs.FileMode) { return 10, 0o600 },
		read:  func(uint64, uint32) []byte { return []byte{} },
	}
	f := fk.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := f.ReadFile(ctx, "/inbox/a.md", 1000)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadFile: %v, want a prompt failure", err)
	}
	// One reply per READ sent: the data read and the probe at the size go
	// together, and neither is asked again.
	if n := fk.replies.Load(); n != 2 {
		t.Fatalf("%d empty replies served, want 2", n)
	}
}

// ReadFile checks the open handle against the Lstat: a handle that is not
// a regular file, or whose size differs, is refused before any read.
func TestReadFileHandleMismatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		fstat   fs.FileMode
		size    uint64
		wantErr error
	}{
		{"fifo-after-open", fs.ModeNamedPipe | 0o600, 10, transport.ErrNotRegular},
		{"dir-after-open", fs.ModeDir | 0o700, 10, transport.ErrNotRegular},
		{"grew", 0o600, 20, ErrChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fk := &fakeSFTP{
				attrs: func(typ byte) (uint64, fs.FileMode) {
					if typ == 8 { // FSTAT
						return tc.size, tc.fstat
					}
					return 10, 0o600
				},
				read: func(uint64, uint32) []byte { return []byte("data") },
			}
			f := fk.start(t)
			_, _, err := f.ReadFile(ctxT(t), "/inbox/a.md", 1000)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ReadFile: %v, want %v", err, tc.wantErr)
			}
			if fk.replies.Load() != 0 {
				t.Fatalf("%d reads served before the handle check", fk.replies.Load())
			}
		})
	}
}

// Invariant: a server that never ends a listing cannot make ReadDir hold
// more than maxEntries entries (plus "." and ".."): the listing is cut off
// and the connection stays usable.
func TestReadDirEndlessListing(t *testing.T) {
	t.Parallel()
	fk := &fakeSFTP{
		attrs:   func(byte) (uint64, fs.FileMode) { return 0, fs.ModeDir | 0o700 },
		readdir: func(string, int) uint32 { return 100 },
	}
	f := fk.start(t)
	const max = 1000
	_, err := f.ReadDir(ctxT(t), "/inbox", max)
	if err == nil || !strings.Contains(err.Error(), "more than 1000 entries") {
		t.Fatalf("ReadDir: %v, want a too-many-entries error", err)
	}
	// Entries handed to pkg/sftp: at most max+2, so the server sent at most
	// the replies the guard's read-ahead had in flight more than that needs.
	if got := fk.served.Load(); got > max+2+readAhead*100 {
		t.Fatalf("server sent %d entries before ReadDir stopped", got)
	}
	if _, err := f.Lstat(ctxT(t), "/inbox"); err != nil {
		t.Fatalf("Lstat after a cut-off listing: %v", err)
	}
}

// The guard finds requests, and the handles in them, however pkg/sftp's
// writes are split.
func TestGuardWriterSplitWrites(t *testing.T) {
	g := newListGuard()
	d, err := g.begin(context.Background(), nil, "/d", 10)
	if err != nil {
		t.Fatal(err)
	}
	w := &guardWriter{w: nopWriteCloser{io.Discard}, g: g}
	send := func(reqs ...[]byte) {
		var stream []byte
		for _, body := range reqs {
			stream = append(u32(stream, uint32(len(body))), body...)
		}
		for i := range stream {
			w.Write(stream[i : i+1])
		}
	}
	send(str(u32([]byte{fxpOpendir}, 1), "/d"), str(u32([]byte{7}, 2), "/d"))
	if g.opendirs[1] != d || len(g.opendirs) != 1 {
		t.Fatalf("OPENDIR not attributed to /d's budget: %v", g.opendirs)
	}
	if v, _ := g.received(str(u32([]byte{fxpHandle}, 1), "h")); v != opened || g.listings["h"] == nil || g.listings["h"].dir != d {
		t.Fatalf("HANDLE reply: verdict %v, listings %v", v, g.listings)
	}
	send(str(u32([]byte{fxpReaddir}, 3), "h"), str(u32([]byte{fxpReaddir}, 4), "h"), str(u32([]byte{fxpClose}, 5), "h"))
	if g.readdirs[3] != g.readdirs[4] || g.readdirs[3] == nil || g.readdirs[3].dir != d || len(g.readdirs) != 2 {
		t.Errorf("READDIR ids not attributed to the listing: %v", g.readdirs)
	}
	if len(g.listings) != 0 {
		t.Errorf("CLOSE did not end the listing: %v", g.listings)
	}
	g.end(d)
	if len(g.paths) != 0 {
		t.Errorf("registration left after end: %v", g.paths)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// endlessFrames serves one STATUS frame after another, forever, and
// counts them.
type endlessFrames struct {
	n    atomic.Int64
	rest []byte
}

func (e *endlessFrames) Read(p []byte) (int, error) {
	if len(e.rest) == 0 {
		id := uint32(e.n.Add(1))
		e.rest = statusFrame(nil, id, fxOK, "")
	}
	n := copy(p, e.rest)
	e.rest = e.rest[n:]
	return n, nil
}

// The pump reads ahead of pkg/sftp, so that a burst of replies is handed
// on without a wake-up for each, but holds at most pumpAhead frames that
// were not taken: a server that sends without end fills no more memory
// than that.
func TestGuardReaderPumpsAheadBounded(t *testing.T) {
	src := &endlessFrames{}
	r := newGuardReader(src, newListGuard())
	defer r.stop()
	buf := make([]byte, maxSFTPFrame)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for src.n.Load() < pumpAhead+1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the pump run on if it would
	// One frame taken, pumpAhead waiting, one read and blocked in the send.
	if got := src.n.Load(); got < pumpAhead+1 || got > pumpAhead+2 {
		t.Fatalf("the pump read %d frames with one taken, want %d to %d", got, pumpAhead+1, pumpAhead+2)
	}
}
