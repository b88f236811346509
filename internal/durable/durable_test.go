package durable

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
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
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
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
	root, _ := os.OpenRoot(dir)
	defer root.Close()
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
