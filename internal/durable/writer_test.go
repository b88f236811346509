package durable

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Every file a Writer is given is durable under its temporary name when
// its Pending is done, and nothing is under the final name until Rename:
// the batch's files become visible only when the caller puts them in
// place, its directories then fsynced once each.
func TestWriterBatch(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	before := Syncs()
	w := NewWriter(root, 4)
	var ps []*Pending
	for i := range 20 {
		ps = append(ps, w.Write(fmt.Sprintf("%s/f%02d", []string{"a", "b"}[i%2], i), []byte(fmt.Sprint(i)), 0o600))
	}
	w.Close()
	for i, p := range ps {
		tmp, err := p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s/f%02d", []string{"a", "b"}[i%2], i)
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Fatalf("%s visible before Rename", name)
		}
		if err := tmp.Rename(); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != fmt.Sprint(i) {
			t.Errorf("%s holds %q", name, got)
		}
	}
	if err := SyncDirs(root, []string{"a", "b"}, 2); err != nil {
		t.Fatal(err)
	}
	if n := Syncs() - before; n != 22 {
		t.Errorf("%d fsyncs, want 22: one per file, one per directory", n)
	}
	// A failed directory fsync is reported, with the others done.
	if err := SyncDirs(root, []string{"a", "missing"}, 2); err == nil {
		t.Error("SyncDirs of a missing directory reported nothing")
	}
}
