// Package transporttest is the conformance suite every transport.FS must
// pass. It builds fixtures with the os package in a local directory that the
// FS under test must see at the same absolute path (true for the local
// transport and for SSH servers on loopback), then checks each promise of
// the transport.FS contract.
package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/transport"
)

// Factory returns an FS to test and a fresh empty directory that it sees at
// the same absolute path. Cleanup is the factory's business (t.Cleanup).
type Factory func(t *testing.T) (transport.FS, string)

// Run runs the whole suite.
func Run(t *testing.T, newFS Factory) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, fsys transport.FS, dir string)
	}{
		{"Home", testHome},
		{"LstatKinds", testLstatKinds},
		{"LstatMissing", testLstatMissing},
		{"ReadDirLstatSemantics", testReadDir},
		{"ReadDirBound", testReadDirBound},
		{"ReadFileWithinLimit", testReadFileLimit},
		{"ReadFileNoFollow", testReadFileNoFollow},
		{"ReadFileFIFONeverBlocks", testReadFileFIFO},
		{"ReadFileDirectory", testReadFileDir},
		{"ReadFileMissing", testReadFileMissing},
		{"ReadTail", testReadTail},
		{"RenameNeverReplaces", testRenameNoReplace},
		{"RenameAfterReadNeverReplaces", testRenameAfterRead},
		{"RenameNeverReplacesDanglingSymlink", testRenameDangling},
		{"RenameMoves", testRename},
		{"MkdirExisting", testMkdir},
		{"Remove", testRemove},
		{"CanceledContext", testCanceled},
		{"Concurrent", testConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := newFS(t)
			tc.fn(t, fsys, dir)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func write(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func testHome(t *testing.T, fsys transport.FS, dir string) {
	home, err := fsys.Home(ctxT(t))
	if err != nil {
		t.Fatalf("Home: %v", err)
	}
	if !filepath.IsAbs(home) {
		t.Fatalf("Home = %q, want an absolute path", home)
	}
}

func testLstatKinds(t *testing.T, fsys transport.FS, dir string) {
	ctx := ctxT(t)
	write(t, filepath.Join(dir, "f.md"), []byte("hello"))
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f.md", filepath.Join(dir, "l.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d", filepath.Join(dir, "ld")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name               string
		regular, dir, link bool
		size               int64
	}{
		{"f.md", true, false, false, 5},
		{"d", false, true, false, -1},
		{"l.md", false, false, true, -1},
		{"ld", false, false, true, -1},
	} {
		fi, err := fsys.Lstat(ctx, filepath.Join(dir, c.name))
		if err != nil {
			t.Fatalf("Lstat %s: %v", c.name, err)
		}
		if fi.IsRegular() != c.regular || fi.IsDir() != c.dir || fi.IsSymlink() != c.link {
			t.Errorf("Lstat %s: mode %v, want regular=%v dir=%v symlink=%v", c.name, fi.Mode, c.regular, c.dir, c.link)
		}
		if c.size >= 0 && fi.Size != c.size {
			t.Errorf("Lstat %s: size %d, want %d", c.name, fi.Size, c.size)
		}
		if fi.Name != c.name {
			t.Errorf("Lstat %s: name %q", c.name, fi.Name)
		}
	}
}

func testLstatMissing(t *testing.T, fsys transport.FS, dir string) {
	_, err := fsys.Lstat(ctxT(t), filepath.Join(dir, "nope"))
	if !errors.Is(err, transport.ErrNotExist) {
		t.Fatalf("Lstat missing: %v, want ErrNotExist", err)
	}
}

func testReadDir(t *testing.T, fsys transport.FS, dir string) {
	ctx := ctxT(t)
	write(t, filepath.Join(dir, "a.md"), []byte("a"))
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	ents, err := fsys.ReadDir(ctx, dir, 0)
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	got := map[string]transport.FileInfo{}
	var names []string
	for _, e := range ents {
		got[e.Name] = e
		names = append(names, e.Name)
	}
	sort.Strings(names)
	if want := []string{"a.md", "link", "sub"}; len(names) != 3 || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
		t.Fatalf("ReadDir names %v, want %v", names, want)
	}
	if !got["link"].IsSymlink() || got["link"].IsDir() {
		t.Errorf("symlink to dir reported as %v, want a symlink", got["link"].Mode)
	}
	if !got["sub"].IsDir() || !got["a.md"].IsRegular() || got["a.md"].Size != 1 {
		t.Errorf("entries wrong: %+v", got)
	}
	if _, err := fsys.ReadDir(ctx, filepath.Join(dir, "missing"), 0); !errors.Is(err, transport.ErrNotExist) {
		t.Errorf("ReadDir missing: %v, want ErrNotExist", err)
	}
}

func testReadDirBound(t *testing.T, fsys transport.FS, dir string) {
	for i := 0; i < 50; i++ {
		write(t, filepath.Join(dir, string(rune('a'+i%26))+string(rune('a'+i/26))+".md"), nil)
	}
	if _, err := fsys.ReadDir(ctxT(t), dir, 10); err == nil {
		t.Fatal("ReadDir with maxEntries 10 over 50 entries succeeded, want an error")
	}
	ents, err := fsys.ReadDir(ctxT(t), dir, 50)
	if err != nil || len(ents) != 50 {
		t.Fatalf("ReadDir with maxEntries 50: %d entries, %v", len(ents), err)
	}
}

func testReadFileLimit(t *testing.T, fsys transport.FS, dir string) {
	ctx := ctxT(t)
	data := bytes.Repeat([]byte("x"), 100)
	name := filepath.Join(dir, "h.md")
	write(t, name, data)
	got, fi, err := fsys.ReadFile(ctx, name, 100)
	if err != nil {
		t.Fatalf("ReadFile at exact limit: %v", err)
	}
	if !bytes.Equal(got, data) || fi.Size != 100 || !fi.IsRegular() {
		t.Fatalf("ReadFile: %d bytes, stat %+v", len(got), fi)
	}
	got, _, err = fsys.ReadFile(ctx, name, 99)
	if !errors.Is(err, transport.ErrTooLarge) || got != nil {
		t.Fatalf("ReadFile over limit: %d bytes, %v; want ErrTooLarge and no data", len(got), err)
	}
	empty := filepath.Join(dir, "empty.md")
	write(t, empty, nil)
	got, fi, err = fsys.ReadFile(ctx, empty, 10)
	if err != nil || len(got) != 0 || fi.Size != 0 {
		t.Fatalf("ReadFile empty: %d %v %v", len(got), fi.Size, err)
	}
}

func testReadFileNoFollow(t *testing.T, fsys transport.FS, dir string) {
	write(t, filepath.Join(dir, "secret"), []byte("outside"))
	if err := os.Symlink("secret", filepath.Join(dir, "l.md")); err != nil {
		t.Fatal(err)
	}
	got, _, err := fsys.ReadFile(ctxT(t), filepath.Join(dir, "l.md"), 1024)
	if err == nil {
		t.Fatalf("ReadFile followed a symlink and read %q", got)
	}
}

func testReadFileFIFO(t *testing.T, fsys transport.FS, dir string) {
	name := filepath.Join(dir, "p.md")
	if err := syscall.Mkfifo(name, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := fsys.ReadFile(context.Background(), name, 1024)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("ReadFile of a FIFO succeeded")
		}
	case <-time.After(10 * time.Second):
		// Unblock the reader so the test process can exit cleanly.
		if f, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("ReadFile of a FIFO blocked")
	}
}

func testReadFileDir(t *testing.T, fsys transport.FS, dir string) {
	if err := os.Mkdir(filepath.Join(dir, "d.md"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fsys.ReadFile(ctxT(t), filepath.Join(dir, "d.md"), 1024); err == nil {
		t.Fatal("ReadFile of a directory succeeded")
	}
}

// testReadTail: the last n bytes at the listed size, and nothing for a
// file that is not what its listing said (a git index's memo relies on
// these bytes being the file's own).
func testReadTail(t *testing.T, fsys transport.FS, dir string) {
	ctx := ctxT(t)
	name := filepath.Join(dir, "index")
	data := make([]byte, 100<<10) // more than one SFTP read
	for i := range data {
		data[i] = byte(i * 7)
	}
	write(t, name, data)
	fi, err := fsys.Lstat(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{0, 20, int64(len(data))} {
		got, err := transport.ReadTail(ctx, fsys, name, fi, n)
		if err != nil || !bytes.Equal(got, data[int64(len(data))-n:]) {
			t.Errorf("ReadTail(%d): %d bytes, %v; want the last %d", n, len(got), err, n)
		}
	}
	if got, err := transport.ReadTail(ctx, fsys, name, fi, fi.Size+1); !errors.Is(err, transport.ErrChanged) || got != nil {
		t.Errorf("ReadTail past the size: %d bytes, %v; want ErrChanged", len(got), err)
	}
	write(t, name, data[:50])
	if got, err := transport.ReadTail(ctx, fsys, name, fi, 20); err == nil {
		t.Errorf("ReadTail of a file shorter than listed gave %d bytes and no error", len(got))
	}
	sub := filepath.Join(dir, "d")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	dfi, err := fsys.Lstat(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transport.ReadTail(ctx, fsys, sub, dfi, 0); !errors.Is(err, transport.ErrNotRegular) {
		t.Errorf("ReadTail of a directory: %v, want ErrNotRegular", err)
	}
}

func testReadFileMissing(t *testing.T, fsys transport.FS, dir string) {
	if _, _, err := fsys.ReadFile(ctxT(t), filepath.Join(dir, "none.md"), 10); !errors.Is(err, transport.ErrNotExist) {
		t.Fatalf("ReadFile missing: %v, want ErrNotExist", err)
	}
}

func testRenameNoReplace(t *testing.T, fsys transport.FS, dir string) {
	src, dst := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md")
	write(t, src, []byte("new"))
	write(t, dst, []byte("old"))
	err := fsys.Rename(ctxT(t), src, dst)
	if !errors.Is(err, transport.ErrExist) {
		t.Fatalf("Rename onto existing: %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "old" {
		t.Fatalf("destination changed to %q", b)
	}
	if b, _ := os.ReadFile(src); string(b) != "new" {
		t.Fatalf("source changed to %q", b)
	}
}

// A file just read (an implementation may know it is regular and take a
// shorter way) is renamed as safely: never onto an existing name.
func testRenameAfterRead(t *testing.T, fsys transport.FS, dir string) {
	ctx := ctxT(t)
	src, dst, free := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md"), filepath.Join(dir, "c.md")
	write(t, src, []byte("new"))
	write(t, dst, []byte("old"))
	if _, _, err := fsys.ReadFile(ctx, src, 10); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(ctx, src, dst); !errors.Is(err, transport.ErrExist) {
		t.Fatalf("Rename of a file just read onto existing: %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "old" {
		t.Fatalf("destination changed to %q", b)
	}
	if _, _, err := fsys.ReadFile(ctx, src, 10); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(ctx, src, free); err != nil {
		t.Fatalf("Rename of a file just read: %v", err)
	}
	if b, err := os.ReadFile(free); err != nil || string(b) != "new" {
		t.Fatalf("destination: %q %v", b, err)
	}
}

// A dangling symlink is a name like any other: renaming a symlink onto it
// fails with ErrExist. (OpenSSH's rename of a non-regular file would
// replace it.)
func testRenameDangling(t *testing.T, fsys transport.FS, dir string) {
	src, dst := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md")
	if err := os.Symlink("target-a", src); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", dst); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(ctxT(t), src, dst); !errors.Is(err, transport.ErrExist) {
		t.Fatalf("Rename of a symlink onto a dangling symlink: %v, want ErrExist", err)
	}
	if l, err := os.Readlink(dst); err != nil || l != "nowhere" {
		t.Fatalf("destination now %q %v", l, err)
	}
	if l, err := os.Readlink(src); err != nil || l != "target-a" {
		t.Fatalf("source now %q %v", l, err)
	}
}

func testRename(t *testing.T, fsys transport.FS, dir string) {
	if err := os.Mkdir(filepath.Join(dir, "processed"), 0o700); err != nil {
		t.Fatal(err)
	}
	src, dst := filepath.Join(dir, "a.md"), filepath.Join(dir, "processed", "a.abc.md")
	write(t, src, []byte("x"))
	if err := fsys.Rename(ctxT(t), src, dst); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if _, err := os.Lstat(src); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("source still present: %v", err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != "x" {
		t.Fatalf("destination: %q %v", b, err)
	}
	if err := fsys.Rename(ctxT(t), filepath.Join(dir, "gone.md"), filepath.Join(dir, "g2.md")); !errors.Is(err, transport.ErrNotExist) {
		t.Fatalf("Rename missing source: %v, want ErrNotExist", err)
	}
}

func testMkdir(t *testing.T, fsys transport.FS, dir string) {
	ctx := ctxT(t)
	name := filepath.Join(dir, "processed")
	if err := fsys.Mkdir(ctx, name); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	if fi, err := os.Lstat(name); err != nil || !fi.IsDir() {
		t.Fatalf("Mkdir made %v %v", fi, err)
	}
	if err := fsys.Mkdir(ctx, name); !errors.Is(err, transport.ErrExist) {
		t.Fatalf("Mkdir existing: %v, want ErrExist", err)
	}
	write(t, filepath.Join(dir, "file"), nil)
	if err := fsys.Mkdir(ctx, filepath.Join(dir, "file")); !errors.Is(err, transport.ErrExist) {
		t.Fatalf("Mkdir over a file: %v, want ErrExist", err)
	}
}

func testRemove(t *testing.T, fsys transport.FS, dir string) {
	ctx := ctxT(t)
	target := filepath.Join(dir, "target")
	write(t, target, []byte("keep"))
	link := filepath.Join(dir, "l.md")
	if err := os.Symlink("target", link); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(ctx, link); err != nil {
		t.Fatalf("Remove symlink: %v", err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "keep" {
		t.Fatalf("Remove followed the symlink: %q %v", b, err)
	}
	if err := fsys.Remove(ctx, target); err != nil {
		t.Fatalf("Remove file: %v", err)
	}
	if err := fsys.Remove(ctx, target); !errors.Is(err, transport.ErrNotExist) {
		t.Fatalf("Remove missing: %v, want ErrNotExist", err)
	}
}

func testCanceled(t *testing.T, fsys transport.FS, dir string) {
	write(t, filepath.Join(dir, "a.md"), []byte("a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := fsys.ReadFile(ctx, filepath.Join(dir, "a.md"), 10); err == nil {
		t.Fatal("ReadFile with a canceled context succeeded")
	}
}

// testConcurrent hammers one FS from 64 goroutines, each renaming its own
// file along a chain of names in its own directory while checking every
// answer: Lstat, ReadFile (sizes from empty to past 64 KiB), ReadDir of its
// directory and of a shared one, Rename onto a free name and onto an
// existing one. Under -race it also checks the FS for data races.
func testConcurrent(t *testing.T, fsys transport.FS, dir string) {
	const workers, steps, shared = 64, 6, 150
	sharedDir := filepath.Join(dir, "shared")
	if err := os.Mkdir(sharedDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range shared {
		write(t, filepath.Join(sharedDir, fmt.Sprintf("s%03d.md", i)), []byte(strconv.Itoa(i)))
	}
	content := func(w, step int) []byte {
		return append([]byte(fmt.Sprintf("worker %d step %d\n", w, step)), bytes.Repeat([]byte{byte('a' + w%26)}, w*1100+step)...)
	}
	wdirs := make([]string, workers)
	for w := range workers {
		wdirs[w] = filepath.Join(dir, fmt.Sprintf("w%02d", w))
		if err := os.Mkdir(wdirs[w], 0o700); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(wdirs[w], "keep.md"), []byte("keep"))
		if err := os.Symlink("keep.md", filepath.Join(wdirs[w], "l.md")); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(wdirs[w], "f0.md"), content(w, 0))
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := ctxT(t)
			wdir := wdirs[w]
			for step := range steps {
				cur := filepath.Join(wdir, fmt.Sprintf("f%d.md", step))
				next := filepath.Join(wdir, fmt.Sprintf("f%d.md", step+1))
				want := content(w, step)
				fi, err := fsys.Lstat(ctx, cur)
				if err != nil || !fi.IsRegular() || fi.Size != int64(len(want)) {
					t.Errorf("worker %d: Lstat %s: %+v, %v", w, cur, fi, err)
					return
				}
				data, after, err := fsys.ReadFile(ctx, cur, 1<<20)
				if err != nil || !bytes.Equal(data, want) || after.Size != int64(len(want)) {
					t.Errorf("worker %d: ReadFile %s: %d bytes (want %d, equal %v), %v", w, cur, len(data), len(want), bytes.Equal(data, want), err)
					return
				}
				if w%4 == 0 {
					ents, err := fsys.ReadDir(ctx, sharedDir, shared)
					if err != nil || len(ents) != shared {
						t.Errorf("worker %d: ReadDir shared: %d entries, %v", w, len(ents), err)
						return
					}
				}
				ents, err := fsys.ReadDir(ctx, wdir, 3)
				got := map[string]bool{}
				for _, e := range ents {
					got[e.Name] = true
				}
				if err != nil || len(ents) != 3 || !got["keep.md"] || !got["l.md"] || !got[filepath.Base(cur)] {
					t.Errorf("worker %d: ReadDir %s: %v, %v", w, wdir, got, err)
					return
				}
				if err := fsys.Rename(ctx, cur, filepath.Join(wdir, "keep.md")); !errors.Is(err, transport.ErrExist) {
					t.Errorf("worker %d: Rename onto keep.md: %v, want ErrExist", w, err)
					return
				}
				if b, err := os.ReadFile(filepath.Join(wdir, "keep.md")); err != nil || string(b) != "keep" {
					t.Errorf("worker %d: keep.md now %q, %v", w, b, err)
					return
				}
				// The next step's content goes in under the next name, by
				// way of a rename of the current file.
				write(t, cur, content(w, step+1))
				if err := fsys.Rename(ctx, cur, next); err != nil {
					t.Errorf("worker %d: Rename %s: %v", w, cur, err)
					return
				}
				if _, err := fsys.Lstat(ctx, cur); !errors.Is(err, transport.ErrNotExist) {
					t.Errorf("worker %d: Lstat %s after its rename: %v, want ErrNotExist", w, cur, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
