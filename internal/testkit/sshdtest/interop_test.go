package sshdtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pkg/sftp"
)

// interopStarters are the servers of interop.go, by name.
var interopStarters = []struct {
	name  string
	start func(testing.TB, Options) *Server
}{
	{"gesftpserver", StartGreenEnd},
	{"proftpd", StartProFTPD},
	{"dropbear", StartDropbear},
	{"openssh-chroot", StartOpenSSHChroot},
	{"asyncssh", StartAsyncSSH},
}

// sftpClient logs in to srv with its own identity file and known_hosts
// (so the host keys it advertises are the ones it serves) and starts SFTP.
func sftpClient(t *testing.T, srv *Server) *sftp.Client {
	t.Helper()
	sc, err := sftp.NewClient(dial(t, srv))
	if err != nil {
		t.Fatalf("sftp: %v", err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc
}

// Each interop server must accept the client key it hands out, present
// the host keys its known_hosts trusts, and serve SFTP on the local file
// system (under Root, at ClientPath): a directory lists with exactly the
// entries written and a file reads back byte for byte.
func TestInteropServers(t *testing.T) {
	for _, tc := range interopStarters {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := tc.start(t, Options{})
			if len(srv.HostKeys) != 2 || srv.Host != "127.0.0.1" || srv.Port == 0 {
				t.Fatalf("server %s:%d with %d host keys, want 127.0.0.1 and 2", srv.Host, srv.Port, len(srv.HostKeys))
			}
			sc := sftpClient(t, srv)
			dir, err := os.MkdirTemp(srv.Root(), "interop-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			want := map[string][]byte{"a.md": []byte("alpha\n"), "b.md": bytes.Repeat([]byte("b"), 100000)}
			for n, c := range want {
				if err := os.WriteFile(filepath.Join(dir, n), c, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			remote := srv.ClientPath(dir)
			ents, err := sc.ReadDir(remote)
			if err != nil {
				t.Fatalf("readdir %s: %v", remote, err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
				if !e.Mode().IsRegular() || e.Size() != int64(len(want[e.Name()])) {
					t.Errorf("%s listed as %v, %d bytes", e.Name(), e.Mode(), e.Size())
				}
			}
			sort.Strings(names)
			if strings.Join(names, " ") != "a.md b.md" {
				t.Errorf("listing %v, want a.md b.md", names)
			}
			for n, c := range want {
				f, err := sc.Open(remote + "/" + n)
				if err != nil {
					t.Fatalf("open %s: %v", n, err)
				}
				got, err := io.ReadAll(f)
				f.Close()
				if err != nil || !bytes.Equal(got, c) {
					t.Errorf("read %s: %d bytes, %v; want %d bytes", n, len(got), err, len(c))
				}
			}
			if tc.name == "gesftpserver" {
				// The reads and the listing above opened three handles,
				// one at a time, and closed them all.
				hs := srv.Handles(t)
				if hs.Sessions != 1 || hs.Opens != 3 || hs.Closes != 3 || hs.Peak != 1 || hs.Current != 0 {
					t.Errorf("handle counter: %+v, want 1 session, 3 opens and closes, peak 1, none open", hs)
				}
			}
		})
	}
}

// The handle counter counts exactly what gesftpserver holds, and
// GreenEndMaxHandles is gesftpserver's real limit. Invariants: with
// GreenEndMaxHandles files open at once, every handle reads its own file
// and the counter says peak = current = that many; closing them brings
// current back to 0 and keeps the peak. One handle more is counted (the
// server does answer the OPEN with a handle) and the server misbehaves:
// some handle of the session no longer reads its file.
func TestGreenEndHandleLimit(t *testing.T) {
	srv := StartGreenEnd(t, Options{})
	dir := t.TempDir()
	n := GreenEndMaxHandles + 1
	for i := range n {
		mustWriteFile(t, filepath.Join(dir, fmt.Sprint("f", i)), fmt.Sprint("content ", i))
	}
	// openAll opens the first k files in a new session and reports how
	// many of them then failed to read back their own bytes.
	openAll := func(k int) (files []*sftp.File, bad int, first error) {
		sc := sftpClient(t, srv)
		for i := range k {
			f, err := sc.Open(filepath.Join(dir, fmt.Sprint("f", i)))
			if err != nil {
				t.Fatalf("open #%d: %v", i+1, err)
			}
			files = append(files, f)
		}
		for i, f := range files {
			b, err := io.ReadAll(f)
			if err == nil && string(b) != fmt.Sprint("content ", i) {
				err = fmt.Errorf("read %q", b)
			}
			if err != nil {
				bad++
				if first == nil {
					first = fmt.Errorf("handle #%d: %w", i+1, err)
				}
			}
		}
		return files, bad, first
	}

	files, bad, err := openAll(GreenEndMaxHandles)
	if bad != 0 {
		t.Fatalf("with %d handles open, %d reads failed: %v", GreenEndMaxHandles, bad, err)
	}
	if hs := srv.Handles(t); hs.Peak != GreenEndMaxHandles || hs.Current != GreenEndMaxHandles || hs.Opens != GreenEndMaxHandles {
		t.Fatalf("with %d handles open the counter says %+v", GreenEndMaxHandles, hs)
	}
	for i, f := range files {
		if err := f.Close(); err != nil {
			t.Fatalf("close #%d: %v", i+1, err)
		}
	}
	want := HandleStats{Sessions: 1, Peak: GreenEndMaxHandles, Opens: GreenEndMaxHandles, Closes: GreenEndMaxHandles}
	if hs := srv.Handles(t); hs != want {
		t.Fatalf("after closing them the counter says %+v, want %+v", hs, want)
	}

	files, bad, err = openAll(n)
	if hs := srv.Handles(t); hs.Sessions != 2 || hs.Peak != n {
		t.Errorf("with %d handles open the counter says %+v, want peak %d", n, hs, n)
	}
	if bad == 0 {
		t.Fatalf("gesftpserver read all %d handles right: its limit is not %d", n, GreenEndMaxHandles)
	}
	t.Logf("gesftpserver with %d handles open: %d of them fail to read, first %v", n, bad, err)
	for _, f := range files {
		f.Close() // the session may be gone already
	}
}

// ProFTPD's SFTP follows symlinks where OpenSSH does not: the quirk the
// e2e symlink test relies on, shown here on files of a temporary
// directory only. LSTAT of a symlink reports its target (a regular file
// or a directory), READLINK still names the target, a listing (READDIR)
// reports the symlinks as symlinks, OPENDIR of a symlinked directory lists
// the target, RENAME (plain and posix-rename) moves the target and leaves
// the symlink, dangling, where it was; REMOVE unlinks the symlink itself.
func TestProFTPDFollowsSymlinks(t *testing.T) {
	srv := StartProFTPD(t, Options{})
	sc := sftpClient(t, srv)
	base := t.TempDir()
	in, out := filepath.Join(base, "in"), filepath.Join(base, "out")
	for _, d := range []string{in, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(out, "target.txt")
	mustWriteFile(t, target, "outside\n")
	mustSymlink(t, target, filepath.Join(in, "link.md"))
	mustSymlink(t, out, filepath.Join(in, "dirlink"))

	observe := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	fi, err := sc.Lstat(filepath.Join(in, "link.md"))
	observe("LSTAT link.md (err)", err, nil)
	if err == nil {
		observe("LSTAT link.md reports", fi.Mode().Type(), os.FileMode(0)) // a regular file
		observe("LSTAT link.md size", fi.Size(), 8)
	}
	fi, err = sc.Lstat(filepath.Join(in, "dirlink"))
	if err == nil {
		observe("LSTAT dirlink reports", fi.Mode().Type(), os.ModeDir)
	} else {
		t.Errorf("LSTAT dirlink: %v", err)
	}
	s, err := sc.ReadLink(filepath.Join(in, "link.md"))
	observe("READLINK link.md", s+fmt.Sprint(err), target+"<nil>")
	ents, err := sc.ReadDir(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		observe("READDIR's "+e.Name(), e.Mode().Type(), os.ModeSymlink)
	}
	ents, err = sc.ReadDir(filepath.Join(in, "dirlink"))
	if err != nil || len(ents) != 1 || ents[0].Name() != "target.txt" {
		t.Errorf("OPENDIR dirlink: %v %v, want the target's listing", ents, err)
	}

	observe("RENAME link.md", sc.Rename(filepath.Join(in, "link.md"), filepath.Join(in, "moved.md")), nil)
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after RENAME the target is still in place (%v): the server did not follow", err)
	}
	if b, err := os.ReadFile(filepath.Join(in, "moved.md")); err != nil || string(b) != "outside\n" {
		t.Errorf("after RENAME moved.md: %q %v, want the target's bytes", b, err)
	}
	if _, err := os.Lstat(filepath.Join(in, "link.md")); err != nil {
		t.Errorf("after RENAME the symlink is gone: %v", err)
	}
	// Put the target back, then posix-rename.
	if err := os.Rename(filepath.Join(in, "moved.md"), target); err != nil {
		t.Fatal(err)
	}
	observe("posix-rename link.md", sc.PosixRename(filepath.Join(in, "link.md"), filepath.Join(in, "moved.md")), nil)
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after posix-rename the target is still in place (%v)", err)
	}
	if err := os.Rename(filepath.Join(in, "moved.md"), target); err != nil {
		t.Fatal(err)
	}

	observe("REMOVE link.md", sc.Remove(filepath.Join(in, "link.md")), nil)
	if _, err := os.Lstat(filepath.Join(in, "link.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after REMOVE the symlink is still there (%v)", err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "outside\n" {
		t.Errorf("after REMOVE of the symlink the target: %q %v", b, err)
	}
}

func mustWriteFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
