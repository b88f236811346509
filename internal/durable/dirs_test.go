package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDirsWriteThroughHandles: files created, swapped in, renamed and
// synced through a Dirs land under their names with their bytes, each
// directory opened once, and no temporary file stays.
func TestDirsWriteThroughHandles(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "memory", "cards"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory", "cards", "old.md"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	d := NewDirs(root)
	put := func(name, data string) *Temp {
		t.Helper()
		tmp, err := OpenTempIn(d, name, []byte(data), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if err := tmp.Sync(); err != nil {
			t.Fatal(err)
		}
		return tmp
	}
	for _, name := range []string{"memory/cards/a.md", "memory/cards/b.md"} {
		if _, _, err := put(name, "new "+name).Swap(func(_ []byte, existed bool) bool { return !existed }); err != nil {
			t.Fatal(err)
		}
	}
	sw, _, err := put("memory/cards/old.md", "replaced").Swap(func(old []byte, existed bool) bool { return existed && string(old) == "old" })
	if err != nil {
		t.Fatal(err)
	}
	if err := put("top.md", "renamed").Rename(); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync([]string{"memory/cards", "."}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Late(); err != nil {
		t.Fatal(err)
	}
	if err := sw.Remove(); err != nil {
		t.Fatal(err)
	}
	if len(d.open) != 2 {
		t.Fatalf("%d directories opened, want 2", len(d.open))
	}
	d.Close()
	for name, want := range map[string]string{
		"memory/cards/a.md": "new memory/cards/a.md", "memory/cards/b.md": "new memory/cards/b.md",
		"memory/cards/old.md": "replaced", "top.md": "renamed",
	} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s holds %q (%v), want %q", name, b, err, want)
		}
	}
	if n, err := RemoveTemps(root, "memory/cards"); err != nil || n != 0 {
		t.Errorf("%d temporary files left (%v)", n, err)
	}
}

// Invariant: nothing written outside the root. A directory of the batch
// that is a symlink out of the root is never opened, and no file is
// created through it; a closed Dirs creates nothing.
func TestDirsStayInRoot(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "cards")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "docs"), 0o700); err != nil {
		t.Fatal(err)
	}
	d := NewDirs(openRoot(t, dir))
	if _, err := OpenTempIn(d, "cards/x.md", []byte("x"), 0o600); err == nil {
		t.Fatal("a temporary file was created through a symlink out of the root")
	}
	d.Close()
	if _, err := OpenTempIn(d, "docs/y.md", []byte("y"), 0o600); !errors.Is(err, errDirsClosed) {
		t.Fatalf("a closed Dirs: %v, want errDirsClosed", err)
	}
	for _, d := range []string{outside, filepath.Join(dir, "docs")} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%s holds %d entries, want none", d, len(ents))
		}
	}
}
