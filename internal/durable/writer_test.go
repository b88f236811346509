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
	root := openRoot(t, dir)
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

// A file that cannot be created fails on its own: its Pending reports
// why, the files queued around it are written and fsynced, and nothing of
// it is left on disk (a crashed or failed batch leaves only temporary
// files of the others, which the caller removes).
func TestWriterFailureIsPerFile(t *testing.T) {
	dir := t.TempDir()
	root := openRoot(t, dir)
	before := Syncs()
	w := NewWriter(root, 2)
	names := []string{"f0", "missing/f1", "f2", "missing/f3", "f4"}
	var ps []*Pending
	for _, name := range names {
		ps = append(ps, w.Write(name, []byte(name), 0o600))
	}
	w.Close()
	for i, p := range ps {
		tmp, err := p.Wait()
		if failed := i%2 == 1; failed != (err != nil) || failed != (tmp == nil) {
			t.Fatalf("%s: temp %v, err %v", names[i], tmp, err)
		}
		if tmp != nil {
			if err := tmp.Rename(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := Syncs() - before; n != 3 {
		t.Errorf("%d fsyncs, want 3, one per file written", n)
	}
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if fmt.Sprint(got) != "[f0 f2 f4]" {
		t.Errorf("directory holds %q, want the three files written and nothing else", got)
	}
}
