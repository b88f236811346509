package durable

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestNarrow: Narrow takes group and other bits away from a file and a
// directory and adds none; a file already private keeps its mode.
// Invariant: a narrowed file is readable by its owner alone, and no
// permission is ever granted.
func TestNarrow(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		dir  bool
		mode fs.FileMode
		want fs.FileMode
	}{
		{"wide.md", false, 0o644, 0o600},
		{"readonly.md", false, 0o444, 0o400},
		{"private.md", false, 0o600, 0o600},
		{"wide", true, 0o755, 0o700},
		{"setgid", true, 0o775 | fs.ModeSetgid, 0o700 | fs.ModeSetgid},
		{"private", true, 0o700, 0o700},
	} {
		p := filepath.Join(dir, c.name)
		var err error
		if c.dir {
			err = os.Mkdir(p, 0o700)
		} else {
			err = os.WriteFile(p, nil, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		err = Narrow(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fi, _ := os.Stat(p)
		if got := fi.Mode() &^ fs.ModeDir; got != c.want {
			t.Errorf("%s: mode %v after Narrow, want %v", c.name, got, c.want)
		}
	}
}
