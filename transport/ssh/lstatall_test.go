package ssh

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/transport"
)

// TestLstatAllAgreesWithLstat: LstatAll answers each name as Lstat does
// (the same size, mode, time and name, the same kind of error), and sends
// its LSTATs together: one round trip for all, whatever their number.
// Invariant: discovery sees the same tree through either, so batching
// can neither hide an inbox nor show one that is not there.
func TestLstatAllAgreesWithLstat(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			serve := srv.serve(t)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte("hello"), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("a.md", filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
				t.Fatal(err)
			}
			names := []string{"a.md", "sub", "link", "fifo", "missing", "sub/missing", "a.md/under-a-file"}
			for i := range 40 {
				names = append(names, fmt.Sprintf("absent-%d", i))
			}
			for i, n := range names {
				names[i] = filepath.Join(dir, n)
			}
			r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second}
			f := startRelayed(t, r, serve)
			fis, errs := f.LstatAll(ctxT(t), names)
			s := r.snapshot(t)
			if s.byType[reqLstat] != len(names) || s.rounds != 1 {
				t.Errorf("%d LSTATs in %d round trips, want %d in 1", s.byType[reqLstat], s.rounds, len(names))
			}
			for i, n := range names {
				fi, err := f.Lstat(ctxT(t), n)
				if (err == nil) != (errs[i] == nil) || errors.Is(err, fs.ErrNotExist) != errors.Is(errs[i], fs.ErrNotExist) {
					t.Errorf("%s: LstatAll says %v, Lstat %v", n, errs[i], err)
					continue
				}
				if err == nil && fis[i] != fi {
					t.Errorf("%s: LstatAll says %+v, Lstat %+v", n, fis[i], fi)
				}
				if err != nil && errs[i].Error() != err.Error() {
					t.Errorf("%s: LstatAll's error %q, Lstat's %q", n, errs[i], err)
				}
			}
			if !fis[0].IsRegular() || fis[0].Size != 5 || !fis[1].IsDir() || !fis[2].IsSymlink() || fis[3].Mode&fs.ModeNamedPipe == 0 {
				t.Errorf("kinds: %v %v %v %v", fis[0].Mode, fis[1].Mode, fis[2].Mode, fis[3].Mode)
			}
			// The session goes on: pkg/sftp never saw the guard's replies.
			if got, _, err := f.ReadFile(ctxT(t), names[0], 100); err != nil || string(got) != "hello" {
				t.Fatalf("ReadFile after LstatAll: %q, %v", got, err)
			}
		})
	}
}

// TestLstatAllStreamEnds: a server that stops answering part way ends
// every name still waiting with an error, at once (invariant: never hang),
// and each error says the connection broke.
func TestLstatAllStreamEnds(t *testing.T) {
	t.Parallel()
	fk := &fakeSFTP{
		attrs:       func(byte) (uint64, fs.FileMode) { return 0, fs.ModeDir | 0o700 },
		hangUpAfter: 3,
	}
	f := fk.start(t)
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("/inbox/n%d", i)
	}
	done := make(chan struct{})
	var errs []error
	go func() {
		defer close(done)
		_, errs = f.LstatAll(ctxT(t), names)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("invariant violated (never hang): LstatAll did not return after the server hung up")
	}
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if !errors.Is(err, transport.ErrBroken) && !strings.Contains(err.Error(), "closed") {
				t.Errorf("error %q does not say the connection broke", err)
			}
		}
	}
	if failed == 0 {
		t.Fatal("every name answered, though the server hung up")
	}
}

// TestLstatAllFailsEveryName: a call that fails before its LSTATs go out
// (its context already done, or the connection closed) gives every name
// an error. Invariant: a name is never described as a file (the zero
// FileInfo, a regular file) for want of an answer.
func TestLstatAllFailsEveryName(t *testing.T) {
	t.Parallel()
	names := []string{"/inbox/a", "/inbox/b", "/inbox/c"}
	fk := &fakeSFTP{attrs: func(byte) (uint64, fs.FileMode) { return 0, fs.ModeDir | 0o700 }}
	f := fk.start(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	_, errs := f.LstatAll(ctx, names)
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a done context: %v, want context.Canceled", names[i], err)
		}
	}
	f.Close()
	_, errs = f.LstatAll(ctxT(t), names)
	for i, err := range errs {
		if !errors.Is(err, transport.ErrBroken) {
			t.Errorf("%s on a closed connection: %v, want ErrBroken", names[i], err)
		}
	}
}

// TestParseLstatReply: whatever a server sends in reply to an LSTAT is an
// answer or an error for that name, never a panic or a description made
// of bytes past the reply (hostile input).
func TestParseLstatReply(t *testing.T) {
	attrs := func(flags uint32, fields ...uint32) []byte {
		b := []byte{fxpAttrs, 0, 0, 0, 1}
		b = binary.BigEndian.AppendUint32(b, flags)
		for _, f := range fields {
			b = binary.BigEndian.AppendUint32(b, f)
		}
		return b
	}
	status := func(code uint32, msg string) []byte {
		return statusFrame(nil, 1, code, msg)[4:]
	}
	full := attrs(attrSize|attrPerms|attrACModTim, 0, 42, 0o100644, 7, 1700000000)
	fi, err := parseLstatReply(full, "/x/a.md")
	if err != nil || fi.Name != "a.md" || fi.Size != 42 || !fi.IsRegular() || fi.Mode.Perm() != 0o644 || fi.ModTime.Unix() != 1700000000 {
		t.Fatalf("full ATTRS: %+v, %v", fi, err)
	}
	for i := 5; i < len(full); i++ {
		if _, err := parseLstatReply(full[:i], "/x/a.md"); err == nil {
			t.Errorf("ATTRS cut to %d of %d bytes accepted", i, len(full))
		}
	}
	for _, tc := range []struct {
		body []byte
		is   error
	}{
		{status(fxNoSuchFile, "No such file"), fs.ErrNotExist},
		{status(fxPermissionDenied, "Permission denied"), fs.ErrPermission},
		{status(fxEOF, ""), io.EOF},
	} {
		if _, err := parseLstatReply(tc.body, "/x"); !errors.Is(err, tc.is) {
			t.Errorf("status %v: %v, want %v", tc.body[5:9], err, tc.is)
		}
	}
	long := strings.Repeat("x", 10000)
	if _, err := parseLstatReply(status(fxFailure, long), "/x"); err == nil || len(err.Error()) > maxErrText+100 {
		t.Errorf("failure status: %d-byte error", len(err.Error()))
	}
	for _, body := range [][]byte{
		{fxpStatus, 0, 0, 0, 1},
		{fxpStatus, 0, 0, 0, 1, 0, 0},
		{fxpHandle, 0, 0, 0, 1, 0, 0, 0, 1, 'h'},
		{fxpName, 0, 0, 0, 1, 0, 0, 0, 0},
		status(fxOK, ""),
	} {
		if _, err := parseLstatReply(body, "/x"); err == nil {
			t.Errorf("reply % x taken for an answer", body)
		}
	}
	if !bytes.Equal(status(1, "")[:1], []byte{fxpStatus}) {
		t.Fatal("status helper")
	}
}
