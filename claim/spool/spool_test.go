package spool_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
)

// tempRoot is a temporary directory by its real path.
// fixture reads a file of claim's testdata.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func tempRoot(t *testing.T) string { return testenv.RealTempDir(t) }

func spoolNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// TestDirPutIdempotent protects "none applied twice, none lost": a
// crash recovery stores the same batch again, which must succeed and leave
// exactly one private copy of each content.
func TestDirPutIdempotent(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempRoot(t), "spool")
	s, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := fixture(t, "handoff.md"), fixture(t, "malformed.md")
	empty := []byte{}
	batch := map[string][]byte{sha(a): a, sha(b): b, sha(empty): empty}
	for i := range 3 {
		if err := s.Put(batch); err != nil {
			t.Fatalf("Put #%d: %v", i+1, err)
		}
	}
	if err := s.Put(map[string][]byte{sha(a): a}); err != nil {
		t.Fatal(err)
	}
	want := []string{spool.Name(sha(a)), spool.Name(sha(b)), spool.Name(sha(empty))}
	sort.Strings(want)
	if got := spoolNames(t, dir); !sameSet(got, want) {
		t.Errorf("spool holds %q, want %q", got, want)
	}
	for h, data := range batch {
		if ok, err := s.Has(h); !ok || err != nil {
			t.Errorf("Has(%s) = %v, %v", h[:12], ok, err)
		}
		got, err := s.Get(h)
		if err != nil || string(got) != string(data) {
			t.Errorf("Get(%s) = %d bytes, %v; want the %d stored", h[:12], len(got), err, len(data))
		}
		fi, err := os.Stat(filepath.Join(dir, spool.Name(h)))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v; handoffs must not be readable by others", spool.Name(h), fi.Mode().Perm())
		}
	}
	if ok, err := s.Has(sha([]byte("never stored"))); ok || err != nil {
		t.Errorf("Has(absent) = %v, %v", ok, err)
	}
}

// TestDirGetDetectsCorruption protects "never apply bytes other than
// the ones pulled": a spool file that no longer hashes to its name is an
// error, never content.
func TestDirGetDetectsCorruption(t *testing.T) {
	t.Parallel()
	data := fixture(t, "handoff.md")
	h := sha(data)
	tests := []struct {
		name    string
		corrupt func(t *testing.T, p string)
		wantErr error
	}{
		{"one byte flipped", func(t *testing.T, p string) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x01
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, spool.ErrCorrupt},
		{"truncated", func(t *testing.T, p string) {
			if err := os.Truncate(p, int64(len(data)-1)); err != nil {
				t.Fatal(err)
			}
		}, spool.ErrCorrupt},
		{"emptied", func(t *testing.T, p string) {
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		}, spool.ErrCorrupt},
		{"removed", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, fs.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(tempRoot(t), "spool")
			s, err := spool.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Put(map[string][]byte{h: data}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(h); err != nil {
				t.Fatalf("Get before corruption: %v", err)
			}
			tc.corrupt(t, filepath.Join(dir, spool.Name(h)))
			got, err := s.Get(h)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Get = %d bytes, %v; want %v", len(got), err, tc.wantErr)
			}
			if got != nil {
				t.Errorf("Get returned %d bytes with the error", len(got))
			}
		})
	}
}

// TestOpenRemovesTemps protects "nothing half-written is taken for a
// stored handoff": temporary files a crashed writer left are deleted by
// RemoveTemps (the lock holder calls it before any pull), never by
// Open, which concurrent workers call; stored files stay.
func TestOpenRemovesTemps(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempRoot(t), "spool")
	data := fixture(t, "handoff.md")
	s, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(map[string][]byte{sha(data): data}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	temps := []string{".handoff-tmp.0a1b2c3d4e5f." + spool.Name(sha(data)), ".handoff-tmp.ffffffffffff.x"}
	for _, n := range temps {
		if err := os.WriteFile(filepath.Join(dir, n), data[:10], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A name that only looks similar is not ours to delete.
	if err := os.WriteFile(filepath.Join(dir, "handoff-tmp.keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := len(spoolNames(t, dir)); got != 4 {
		t.Errorf("Open removed files: %d left, want 4 (another process may be writing them)", got)
	}
	if n, err := s.RemoveTemps(); n != 2 || err != nil {
		t.Errorf("RemoveTemps = %d, %v; want 2, nil", n, err)
	}
	want := []string{spool.Name(sha(data)), "handoff-tmp.keep"}
	sort.Strings(want)
	if got := spoolNames(t, dir); !sameSet(got, want) {
		t.Errorf("spool holds %q after reopening, want %q", got, want)
	}
	if got, err := s.Get(sha(data)); err != nil || string(got) != string(data) {
		t.Errorf("stored content lost: %v", err)
	}
}

// TestDirHasRefusesSymlink protects "never apply bytes other than the
// ones pulled": a spool entry that is a symlink is not a stored handoff.
func TestDirHasRefusesSymlink(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	dir := filepath.Join(root, "spool")
	s, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := fixture(t, "handoff.md")
	writeFile(t, filepath.Join(root, "elsewhere.md"), data, time.Now().Add(-time.Hour))
	if err := os.Symlink(filepath.Join(root, "elsewhere.md"), filepath.Join(dir, spool.Name(sha(data)))); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Has(sha(data)); ok || err == nil {
		t.Errorf("Has on a symlinked entry = %v, %v; want an error", ok, err)
	}
}

// TestDirPutSyncsEntriesLeftByACrash protects "no remote copy archived
// before local storage" across a power cut: a run killed after renaming a
// spool file into place but before the directory fsync (failpoint
// store.spooled) leaves an entry that is not yet durable. The next run's
// Put finds it present; the spool directory must still be fsynced before
// Put returns, because the caller archives the remote copy right after.
// Not parallel: it reads the process-wide fsync counter.
func TestDirPutSyncsEntriesLeftByACrash(t *testing.T) {
	dir, data := leftByACrash(t)
	before := durable.Syncs()
	s, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(map[string][]byte{sha(data): data}); err != nil {
		t.Fatal(err)
	}
	if durable.Syncs() == before {
		t.Error("the spool directory was not fsynced, yet Put reported the content durable")
	}
}

// TestDirSyncsOnceBeforeFirstUse protects the same invariant as
// TestDirPutSyncsEntriesLeftByACrash, no remote copy archived before
// local storage: an entry a crash left unsynced is made durable before
// Has, Get or Put answers from it. The directory is synced once per Dir,
// at the first of them; opening, cleaning and closing a spool that is
// never asked (an idle tick's) syncs nothing, and a read-only Dir never
// syncs. Not parallel: it reads the process-wide fsync counter.
func TestDirSyncsOnceBeforeFirstUse(t *testing.T) {
	dir, data := leftByACrash(t)
	before := durable.Syncs()
	idle, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idle.RemoveTemps(); err != nil {
		t.Fatal(err)
	}
	idle.Close()
	if n := durable.Syncs() - before; n != 0 {
		t.Errorf("a spool opened, cleaned and closed fsynced %d times; want 0", n)
	}

	for _, first := range []string{"Has", "Get", "Put"} {
		s, err := spool.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		before := durable.Syncs()
		use := map[string]func() error{
			"Has": func() error { _, err := s.Has(sha(data)); return err },
			"Get": func() error { _, err := s.Get(sha(data)); return err },
			"Put": func() error { return s.Put(map[string][]byte{sha(data): data}) },
		}
		if err := use[first](); err != nil {
			t.Fatal(err)
		}
		if n := durable.Syncs() - before; n != 1 {
			t.Errorf("%s first: %d fsyncs before it answered from a present entry; want 1", first, n)
		}
		for _, again := range []string{"Has", "Get", "Put"} {
			if err := use[again](); err != nil {
				t.Fatal(err)
			}
		}
		if n := durable.Syncs() - before; n != 1 {
			t.Errorf("%s first, then each again: %d fsyncs; want the one", first, n)
		}
		s.Close()
	}

	before = durable.Syncs()
	ro, err := spool.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ok, err := ro.Has(sha(data)); err != nil || !ok {
		t.Fatalf("read-only Has: %v, %v", ok, err)
	}
	if n := durable.Syncs() - before; n != 0 {
		t.Errorf("a read-only spool fsynced %d times; want 0", n)
	}
}

// leftByACrash makes a spool directory holding one whole entry, written
// as a crash before the directory's fsync would leave it, and returns the
// directory and the entry's content.
func leftByACrash(t *testing.T) (string, []byte) {
	t.Helper()
	dir := filepath.Join(tempRoot(t), "spool")
	data := fixture(t, "handoff.md")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, spool.Name(sha(data))), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, data
}

// sha is the hex SHA-256 of data, computed here, not by the package.
func sha(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// sameSet reports whether a and b hold the same names, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// writeFile writes data at p, modified at mtime.
func writeFile(t *testing.T, p string, data []byte, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}
