package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// openRoot opens dir as a Root, closed when the test ends.
func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func TestWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	root := openRoot(t, dir)
	if err := WriteFile(root, "a.md", []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(root, "a.md", []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.md")); string(b) != "two" {
		t.Fatalf("content %q, want two", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only a.md (no temp files left)", len(ents))
	}
}

// Invariant: nothing is written outside the root, even through a symlink.
func TestWriteFileStaysInRoot(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "esc")); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	if err := WriteFile(root, "esc/x.md", []byte("x"), 0o600); err == nil {
		t.Fatal("write through a symlink leaving the root succeeded")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("%d files appeared outside the root", len(ents))
	}
}

func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, TempPrefix+"abc.x.md"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "keep.md"), nil, 0o600)
	root := openRoot(t, dir)
	n, err := RemoveTemps(root, ".")
	if err != nil || n != 1 {
		t.Fatalf("RemoveTemps = %d, %v; want 1, nil", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.md")); err != nil {
		t.Fatal("RemoveTemps removed a real file")
	}
	if n, err := RemoveTemps(root, "missing"); n != 0 || err != nil {
		t.Fatalf("missing dir: %d %v", n, err)
	}
}

// withoutRenameFlags makes the rest of the test take the paths for file
// systems and systems (NFS, older ZFS, FreeBSD) that cannot rename
// without replacing or exchange two names.
func withoutRenameFlags(t *testing.T) {
	forceNoRenameFlags = true
	t.Cleanup(func() { forceNoRenameFlags = false })
}

// TestRenameNoReplace: a rename to a free name moves the file; onto a
// name that exists it fails with EEXIST and leaves both files as they
// were, with the system's flagged rename and with link and unlink alike.
// Invariant: a file is never replaced unseen.
func TestRenameNoReplace(t *testing.T) {
	for _, mode := range []string{"native", "link"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "link" {
				withoutRenameFlags(t)
			}
			dir := t.TempDir()
			d, err := os.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			dfd := int(d.Fd())
			os.WriteFile(filepath.Join(dir, "a"), []byte("A"), 0o600)
			os.WriteFile(filepath.Join(dir, "b"), []byte("B"), 0o600)
			if err := RenameNoReplace(dfd, "a", dfd, "b"); !errors.Is(err, unix.EEXIST) {
				t.Fatalf("rename onto an existing name: %v, want EEXIST", err)
			}
			for name, want := range map[string]string{"a": "A", "b": "B"} {
				if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != want {
					t.Errorf("%s holds %q after a refused rename, want %q", name, got, want)
				}
			}
			if err := RenameNoReplace(dfd, "a", unix.AT_FDCWD, filepath.Join(dir, "c")); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
				t.Errorf("the old name is still there: %v", err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "c")); string(got) != "A" {
				t.Errorf("c holds %q, want A", got)
			}
		})
	}
}

// TestReplaceIf: the compare-and-swap replaces only what passes the check,
// and leaves a refused file exactly as it was, on file systems that can
// exchange two names and on those that cannot. Invariant: another
// writer's content is never overwritten unseen.
func TestReplaceIf(t *testing.T) {
	t.Run("native", testReplaceIf)
	t.Run("without flagged renames", func(t *testing.T) {
		withoutRenameFlags(t)
		testReplaceIf(t)
	})
}

func testReplaceIf(t *testing.T) {
	dir := t.TempDir()
	root := openRoot(t, dir)
	p := filepath.Join(dir, "T.md")

	// Absent, and expected absent: created.
	if _, err := ReplaceIf(root, "T.md", []byte("one\n"), 0o644, func(old []byte, existed bool) bool { return !existed }); err != nil {
		t.Fatal(err)
	}
	// Present, check refuses: unchanged, ErrConflict.
	_, err := ReplaceIf(root, "T.md", []byte("two\n"), 0o644, func(old []byte, existed bool) bool { return string(old) == "something else" })
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("ReplaceIf with a refusing check: %v, want ErrConflict", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one\n" {
		t.Fatalf("refused replace changed the file to %q", b)
	}
	// Present, check passes on exactly the old content: replaced.
	var seen string
	if _, err := ReplaceIf(root, "T.md", []byte("two\n"), 0o644, func(old []byte, existed bool) bool { seen = string(old); return existed }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two\n" || seen != "one\n" {
		t.Fatalf("file %q, check saw %q", b, seen)
	}
	// Expected absent but present: ErrConflict, unchanged.
	if _, err := ReplaceIf(root, "T.md", []byte("three\n"), 0o644, func(old []byte, existed bool) bool { return !existed }); !errors.Is(err, ErrConflict) {
		t.Fatalf("create over an existing file: %v, want ErrConflict", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d entries left, want only T.md (no temp files)", len(ents))
	}
}

// TestSwapLate: the steps of ReplaceIf taken apart. A swap leaves the
// replaced file under a temporary name until Remove, and Late returns what
// another writer, holding the file open from before the swap, appended to
// it after the check. Invariant: another writer's content is never lost
// unseen; nothing is left behind.
func TestSwapLate(t *testing.T) {
	dir := t.TempDir()
	root := openRoot(t, dir)
	p := filepath.Join(dir, "T.md")
	if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writer, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()

	tmp, err := CreateTemp(root, "T.md", []byte("new\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old\n" {
		t.Fatalf("CreateTemp changed the target: %q", b)
	}
	s, late, err := tmp.Swap(func(old []byte, existed bool) bool { return existed && string(old) == "old\n" })
	if err != nil || late != nil {
		t.Fatalf("Swap: %v, late %q", err, late)
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Fatalf("after Swap the target holds %q", b)
	}
	writer.WriteString("late line\n")
	writer.Close() // else Late waits WritersWait for it (see writers_test.go)
	if err := SyncDir(root, "."); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Late(); err != nil || string(got) != "late line\n" {
		t.Fatalf("Late = %q, %v; want the line appended after the check", got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 || !IsTemp(ents[0].Name()) && !IsTemp(ents[1].Name()) {
		t.Fatalf("before Remove: %v, want T.md and the replaced file under a temporary name", ents)
	}
	if !s.Replaced() {
		t.Fatal("Replaced = false before Remove")
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if s.Replaced() {
		t.Fatal("Replaced = true after Remove")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("after Remove: %v, want only T.md", ents)
	}

	// A refused swap leaves the target as it was and nothing behind.
	tmp, err = CreateTemp(root, "T.md", []byte("newer\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tmp.Swap(func(old []byte, existed bool) bool { return false }); !errors.Is(err, ErrConflict) {
		t.Fatalf("refused Swap: %v, want ErrConflict", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Fatalf("a refused Swap changed the target to %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("after a refused Swap: %v, want only T.md", ents)
	}
}
