package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// swapFixture makes dir/T.md hold "old\n" and returns the root and the
// file's path.
func swapFixture(t *testing.T) (*os.Root, string) {
	t.Helper()
	dir := t.TempDir()
	root := openRoot(t, dir)
	p := filepath.Join(dir, "T.md")
	if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, p
}

// swapNew puts "new\n" in place of dir/T.md, which must hold "old\n".
func swapNew(t *testing.T, root *os.Root) *Swapped {
	t.Helper()
	tmp, err := CreateTemp(root, "T.md", []byte("new\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := tmp.Swap(func(old []byte, existed bool) bool { return string(old) == "old\n" })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Remove() })
	return s
}

func setWritersWait(t *testing.T, d time.Duration) {
	old := WritersWait
	WritersWait = d
	t.Cleanup(func() { WritersWait = old })
}

// TestLateWaitsForWriters: a writer opened the file before the swap and
// writes only after the check and the directory sync. Late waits for it to
// close the file, so its line is returned. Invariant: another writer's
// bytes are never lost unseen while it is still writing.
func TestLateWaitsForWriters(t *testing.T) {
	setWritersWait(t, time.Minute)
	root, p := swapFixture(t)
	writer, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := swapNew(t, root)
	if err := SyncDir(root, "."); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		writer.WriteString("slow line\n")
		writer.Close()
	}()
	late, err := s.Late()
	if err != nil || string(late) != "slow line\n" {
		t.Fatalf("Late = %q, %v; want the line written after Late was called", late, err)
	}
	if s.WriterOpen() {
		t.Fatal("WriterOpen = true, but the writer closed the file well within WritersWait")
	}
}

// TestLateIgnoresReaders: a reader holding the replaced file open does not
// make Late wait; only writers can add bytes to it.
func TestLateIgnoresReaders(t *testing.T) {
	setWritersWait(t, 10*time.Minute)
	root, p := swapFixture(t)
	reader, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	s := swapNew(t, root)
	done := make(chan []byte)
	go func() {
		late, _ := s.Late()
		done <- late
	}()
	select {
	case late := <-done:
		if len(late) != 0 || s.WriterOpen() {
			t.Fatalf("Late = %q, WriterOpen %v; want nothing late and no writer", late, s.WriterOpen())
		}
	case <-time.After(time.Minute):
		t.Fatal("Late still waiting a minute after the swap with only a reader holding the file")
	}
}

// TestLateGivesUpOnAStuckWriter: a writer that keeps the file open past
// WritersWait does not hold the run up; what it wrote so far is returned,
// and WriterOpen says the rest cannot be kept.
func TestLateGivesUpOnAStuckWriter(t *testing.T) {
	setWritersWait(t, 50*time.Millisecond)
	root, p := swapFixture(t)
	writer, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	s := swapNew(t, root)
	writer.WriteString("early line\n")
	late, err := s.Late()
	if err != nil || string(late) != "early line\n" {
		t.Fatalf("Late = %q, %v; want the line written before the deadline", late, err)
	}
	if !s.WriterOpen() {
		t.Fatal("WriterOpen = false with the writer still holding the file")
	}
}

// TestConflictWaitsForWriters: a writer opens the target in the instant it
// holds the new content, the check then refuses it and the swap is undone.
// What that writer appends afterwards, to the file that is no longer at the
// name, comes back as late with ErrConflict. Invariant: no other writer's
// bytes are lost by a refused replacement.
func TestConflictWaitsForWriters(t *testing.T) {
	setWritersWait(t, time.Minute)
	root, p := swapFixture(t)
	tmp, err := CreateTemp(root, "T.md", []byte("new\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, late, err := tmp.Swap(func(old []byte, existed bool) bool {
		w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0) // the new content, for now
		if err != nil {
			t.Error(err)
			return false
		}
		go func() {
			time.Sleep(100 * time.Millisecond)
			w.WriteString("caught line\n")
			w.Close()
		}()
		return false
	})
	if !errors.Is(err, ErrConflict) || string(late) != "caught line\n" {
		t.Fatalf("Swap = %q, %v; want ErrConflict with the line appended to the new content", late, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old\n" {
		t.Fatalf("after the refused swap T.md holds %q, want the old content", b)
	}
}
