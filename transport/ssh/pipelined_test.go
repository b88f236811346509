package ssh

import (
	"bytes"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/transport"
)

// TestFileHandle: fileHandle finds the handle pkg/sftp keeps unexported.
// If a pkg/sftp upgrade moves it, this fails, and until it is mended every
// read goes request by request (correct, two round trips slower).
func TestFileHandle(t *testing.T) {
	t.Parallel()
	fk := &fakeSFTP{attrs: func(byte) (uint64, fs.FileMode) { return 1, 0o600 }, read: func(uint64, uint32) []byte { return nil }}
	f := fk.start(t)
	file, err := f.sftp.Open("/inbox/a.md")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if h := fileHandle(file); h != "h1" {
		t.Fatalf("fileHandle = %q, want the server's handle h1", h)
	}
}

// TestReadPipelinedRoundTrips: on OpenSSH's sftp-server, a file just
// listed is read in two round trips (ReadFile, with its LSTAT, in three):
// OPEN, then READ, the probe and FSTAT sent together. Invariant: they
// reach the server in that order, so the server, which carries requests
// out in order, stats the handle after it has read it.
func TestReadPipelinedRoundTrips(t *testing.T) {
	t.Parallel()
	serve := openSSHServer(t)
	name, want, listed := listedFile(t, serve)
	for _, tc := range []struct {
		name   string
		read   func(f *FS) ([]byte, transport.FileInfo, error)
		rounds int
		seq    string
	}{
		{"listed", func(f *FS) ([]byte, transport.FileInfo, error) { return f.ReadListed(ctxT(t), name, listed, 1<<20) },
			2, "OPEN READ READ FSTAT CLOSE"},
		{"file", func(f *FS) ([]byte, transport.FileInfo, error) { return f.ReadFile(ctxT(t), name, 1<<20) },
			3, "LSTAT OPEN READ READ FSTAT CLOSE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second, holdCloses: true}
			f := startRelayed(t, r, serve)
			f.openSSH = true
			got, fi, err := tc.read(f)
			if err != nil || !bytes.Equal(got, want) || fi.Size != int64(len(want)) {
				t.Fatalf("read: %d bytes, %+v, %v", len(got), fi, err)
			}
			s := r.closeUnawaited(t, "the read")
			if s.rounds != tc.rounds || s.seq != tc.seq {
				t.Errorf("%s; want %d round trips: %s", s, tc.rounds, tc.seq)
			}
		})
	}
}

// startPipelined serves fk and returns an FS that takes it for OpenSSH's
// sftp-server, so that small files are read pipelined.
func startPipelined(t *testing.T, fk *fakeSFTP) *FS {
	f := fk.start(t)
	f.openSSH = true
	return f
}

// Invariant: a handle that is not a regular file yields no bytes, though
// the READ went out before its FSTAT: a name swapped for a FIFO or device
// after it was listed is never stored.
func TestReadPipelinedNotRegular(t *testing.T) {
	t.Parallel()
	fk := &fakeSFTP{
		attrs: func(typ byte) (uint64, fs.FileMode) {
			if typ == reqFstat {
				return 5, fs.ModeNamedPipe | 0o600
			}
			return 5, 0o600
		},
		read: func(off uint64, n uint32) []byte { return []byte("abcdef")[off:min(6, off+uint64(n))] },
	}
	f := startPipelined(t, fk)
	data, _, err := f.ReadFile(ctxT(t), "/inbox/a.md", 1<<20)
	if !errors.Is(err, transport.ErrNotRegular) || data != nil {
		t.Fatalf("ReadFile: %q, %v; want ErrNotRegular and no data", data, err)
	}
	if got := fk.served.Load(); got > 6 {
		t.Fatalf("served %d bytes for a 5-byte listing", got)
	}
}

// Invariant: a file that holds more than its stat says fails with
// ErrChanged, and no more than its size plus one byte is asked for.
func TestReadPipelinedLongerThanStat(t *testing.T) {
	t.Parallel()
	fk := &fakeSFTP{
		attrs: func(byte) (uint64, fs.FileMode) { return 10, 0o600 },
		read:  func(_ uint64, n uint32) []byte { return bytes.Repeat([]byte("x"), int(n)) },
	}
	f := startPipelined(t, fk)
	data, _, err := f.ReadFile(ctxT(t), "/inbox/a.md", 1<<20)
	if !errors.Is(err, transport.ErrChanged) || data != nil {
		t.Fatalf("ReadFile: %d bytes, %v; want ErrChanged and no data", len(data), err)
	}
	if got := fk.served.Load(); got != 11 {
		t.Fatalf("served %d bytes for a 10-byte file, want 11 (the file and the probe)", got)
	}
}

// Invariant: the stat a pipelined read is checked against is taken after
// every READ of the file. The server answers the first READ short, pkg/sftp
// asks for the rest after the FSTAT has gone out, and the file grew
// meanwhile: only a second FSTAT, after that READ, sees it, and the read
// must then fail as changed, with no bytes (the claim defers the file).
func TestReadPipelinedShortAnswer(t *testing.T) {
	t.Parallel()
	content := bytes.Repeat([]byte("abcdefghij"), 100)
	fstats := 0
	fk := &fakeSFTP{
		attrs: func(typ byte) (uint64, fs.FileMode) {
			if typ == reqFstat {
				fstats++
				if fstats > 1 {
					return 1001, 0o600
				}
			}
			return 1000, 0o600
		},
		read: func(off uint64, n uint32) []byte {
			switch {
			case off >= 1000:
				return nil
			case off == 0:
				return content[:100]
			}
			return content[off:min(1000, off+uint64(n))]
		},
	}
	f := startPipelined(t, fk)
	data, _, err := f.ReadFile(ctxT(t), "/inbox/a.md", 1<<20)
	if !errors.Is(err, transport.ErrChanged) || data != nil {
		t.Fatalf("ReadFile: %d bytes, %v; want ErrChanged and no data, from the FSTAT after the last READ", len(data), err)
	}
	log := fk.requests()
	last := -1
	for i, r := range log {
		if strings.HasPrefix(r, "READ") {
			last = i
		}
	}
	if !slices.Contains(log[last+1:], "FSTAT") {
		t.Errorf("no FSTAT after the last READ: %v", log)
	}
}

// Invariant: with no stat before the READ, a file that changed between
// its listing and the read is still never stored: the stat after the
// READs must match the listing's size and time, or the read fails as
// changed with no bytes (the claim defers the file).
func TestReadPipelinedChangedSinceListing(t *testing.T) {
	t.Parallel()
	fk := &fakeSFTP{
		attrs: func(byte) (uint64, fs.FileMode) { return 5, 0o600 }, // mtime 1,700,000,000
		read: func(off uint64, n uint32) []byte {
			if off >= 5 {
				return nil
			}
			return []byte("abcde")[off:min(5, off+uint64(n))]
		},
	}
	f := startPipelined(t, fk)
	listed := transport.FileInfo{Name: "a.md", Size: 5, Mode: 0o600, ModTime: time.Unix(1_700_000_000, 0)}
	data, _, err := f.ReadListed(ctxT(t), "/inbox/a.md", listed, 1<<20)
	if err != nil || string(data) != "abcde" {
		t.Fatalf("unchanged file: %q, %v", data, err)
	}
	for _, tc := range []struct {
		name   string
		listed transport.FileInfo
	}{
		{"newer since", transport.FileInfo{Name: "a.md", Size: 5, Mode: 0o600, ModTime: time.Unix(1_699_999_990, 0)}},
		{"resized since", transport.FileInfo{Name: "a.md", Size: 4, Mode: 0o600, ModTime: time.Unix(1_700_000_000, 0)}},
	} {
		data, _, err := f.ReadListed(ctxT(t), "/inbox/a.md", tc.listed, 1<<20)
		if !errors.Is(err, transport.ErrChanged) || data != nil {
			t.Errorf("%s: %q, %v; want ErrChanged and no data", tc.name, data, err)
		}
	}
	if log := fk.requests(); slices.Index(log, "FSTAT") < slices.IndexFunc(log, func(r string) bool { return strings.HasPrefix(r, "READ") }) {
		t.Errorf("an FSTAT before the first READ: %v", log)
	}
}
