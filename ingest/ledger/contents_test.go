package ledger

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
)

func openTemp(t *testing.T) *Ledger {
	t.Helper()
	l, err := Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Invariant: no remote copy archived before local storage. StoreSources
// makes a batch's exact bytes and its records durable in one commit, and
// the store gives back exactly those bytes, NUL and invalid UTF-8
// included, and an empty content as empty.
func TestStoreSourcesStoresBytesWithRecords(t *testing.T) {
	ctx := context.Background()
	l := openTemp(t)
	odd := []byte("\x00caf\xe9\r\n# title\xff")
	contents := map[string][]byte{spool.Hash(odd): odd, spool.Hash(nil): {}}
	srcs := []claim.Source{
		{Host: "h", Inbox: "/in", Name: "a.md", SHA256: spool.Hash(odd), Size: int64(len(odd))},
		{Host: "h", Inbox: "/in", Name: "empty.md", SHA256: spool.Hash(nil)},
	}
	if n, err := l.StoreSources(ctx, "run", srcs, contents); n != 2 || err != nil {
		t.Fatalf("StoreSources: %d, %v", n, err)
	}
	st := l.Store(nil)
	defer st.Close()
	for sha, want := range contents {
		if ok, err := st.Has(sha); !ok || err != nil {
			t.Errorf("Has(%.12s) = %v, %v", sha, ok, err)
		}
		got, err := st.Get(sha)
		if err != nil || string(got) != string(want) || got == nil {
			t.Errorf("Get(%.12s) = %q, %v; want %q", sha, got, err, want)
		}
	}
	// Stored again (a later copy): nothing changes, nothing fails.
	if n, err := l.StoreSources(ctx, "run-2", srcs, contents); n != 0 || err != nil {
		t.Fatalf("StoreSources again: %d, %v", n, err)
	}
	var rows int
	if err := l.DB().QueryRow(`SELECT count(*) FROM contents`).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d content rows, %v; want 2", rows, err)
	}
}

// Invariant: a key always names its bytes. A content whose bytes do not
// hash to its key is refused, and nothing of its commit is written: not
// the other contents, not the sources.
func TestStoreSourcesRefusesMisnamedBytes(t *testing.T) {
	ctx := context.Background()
	l := openTemp(t)
	good := []byte("good")
	contents := map[string][]byte{spool.Hash(good): good, spool.Hash([]byte("claimed")): []byte("other")}
	srcs := []claim.Source{{Host: "h", Inbox: "/in", Name: "a.md", SHA256: spool.Hash(good), Size: 4}}
	if _, err := l.StoreSources(ctx, "run", srcs, contents); err == nil {
		t.Fatal("StoreSources stored bytes under another content's hash")
	}
	var n int
	if err := l.DB().QueryRow(`SELECT (SELECT count(*) FROM contents) + (SELECT count(*) FROM sources)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written by a refused commit, %v", n, err)
	}
}

// Invariant: the store never returns bytes that do not hash to what was
// asked (a damaged row is ErrCorrupt), and a content it does not hold is
// fs.ErrNotExist.
func TestStoreGetChecksTheHash(t *testing.T) {
	ctx := context.Background()
	l := openTemp(t)
	data := []byte("# Memory Handoff\n")
	sha := spool.Hash(data)
	if err := l.PutContents(ctx, map[string][]byte{sha: data}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DB().Exec(`UPDATE contents SET data = ? WHERE sha256 = ?`, []byte("# Memory Handoff?"), sha); err != nil {
		t.Fatal(err)
	}
	// The bytes this ledger committed are still held for the ingester
	// (fresh.go); the table's own are read once they are taken.
	st := l.Store(nil)
	defer st.Close()
	if got, err := st.Get(sha); err != nil || string(got) != string(data) {
		t.Errorf("Get of the bytes just committed = %q, %v; want %q", got, err, data)
	}
	if _, err := st.Get(sha); !errors.Is(err, spool.ErrCorrupt) {
		t.Errorf("Get of a damaged row: %v, want ErrCorrupt", err)
	}
	if _, err := st.Get(spool.Hash([]byte("never stored"))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a content never stored: %v, want fs.ErrNotExist", err)
	}
}

// A workspace an earlier version wrote keeps its bytes in spool files:
// the store reads them beneath its own rows, checks their hash too, and
// writes only rows.
func TestStoreReadsTheLegacySpool(t *testing.T) {
	l := openTemp(t)
	dir := filepath.Join(t.TempDir(), "spool")
	old := []byte("stored by an earlier version")
	w, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put(map[string][]byte{spool.Hash(old): old}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	legacy, err := spool.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	st := l.Store(legacy)
	defer st.Close()
	if got, err := st.Get(spool.Hash(old)); err != nil || string(got) != string(old) {
		t.Fatalf("Get of a legacy content: %q, %v", got, err)
	}
	if ok, err := st.Has(spool.Hash(old)); !ok || err != nil {
		t.Fatalf("Has of a legacy content: %v, %v", ok, err)
	}
	fresh := []byte("stored now")
	if err := st.Put(map[string][]byte{spool.Hash(fresh): fresh}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, spool.Name(spool.Hash(fresh)))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Put wrote the legacy spool: %v", err)
	}
	if got, err := st.Get(spool.Hash(fresh)); err != nil || string(got) != string(fresh) {
		t.Errorf("Get after Put: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, spool.Name(spool.Hash(old))), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(spool.Hash(old)); !errors.Is(err, spool.ErrCorrupt) {
		t.Errorf("Get of a tampered legacy file: %v, want ErrCorrupt", err)
	}
}

// DeleteContents (prune) removes only the rows asked for and says which
// had bytes; a view's store never writes.
func TestDeleteContentsAndReadOnlyView(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := []byte("aaaa"), []byte("bbbbbb")
	if err := l.PutContents(ctx, map[string][]byte{spool.Hash(a): a, spool.Hash(b): b}); err != nil {
		t.Fatal(err)
	}
	gone, size, err := l.DeleteContents(ctx, []string{spool.Hash(a), spool.Hash([]byte("none"))})
	if err != nil || len(gone) != 1 || gone[0] != spool.Hash(a) || size != 4 {
		t.Fatalf("DeleteContents: %v, %d, %v; want a's 4 bytes", gone, size, err)
	}
	l.Close()
	v, err := OpenReadOnly(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	st := v.Store(nil)
	defer st.Close()
	if ok, _ := st.Has(spool.Hash(a)); ok {
		t.Error("a deleted content is still stored")
	}
	if got, err := st.Get(spool.Hash(b)); err != nil || string(got) != string(b) {
		t.Errorf("view Get: %q, %v", got, err)
	}
	if err := st.Put(map[string][]byte{spool.Hash(a): a}); err == nil {
		t.Error("a view's store wrote")
	}
}

// Invariant: the store never returns bytes that do not hash to what was
// asked, whichever place holds them. The bytes a ledger's own commit
// stored are given once from memory (fresh.go), and only after that
// commit: a refused commit leaves nothing to take; damaged bytes in
// memory are passed over for the table's; deleted contents are gone
// from memory too.
func TestStoreGetTakesFreshContents(t *testing.T) {
	ctx := context.Background()
	l := openTemp(t)
	st := l.Store(nil)
	defer st.Close()

	good := []byte("# Memory Handoff\nfresh\n")
	sha := spool.Hash(good)
	bad := map[string][]byte{sha: good, spool.Hash([]byte("x")): []byte("y")}
	if err := l.PutContents(ctx, bad); err == nil {
		t.Fatal("PutContents stored bytes under another content's hash")
	}
	if _, err := st.Get(sha); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get after a refused commit: %v, want fs.ErrNotExist", err)
	}

	mine := append([]byte(nil), good...)
	if err := l.PutContents(ctx, map[string][]byte{sha: mine}); err != nil {
		t.Fatal(err)
	}
	mine[0] = '!' // the caller's buffer changed after the commit
	got, err := st.Get(sha)
	if err != nil || string(got) != string(good) {
		t.Fatalf("Get with damaged bytes in memory = %q, %v; want the table's %q", got, err, good)
	}

	other := []byte("# Memory Handoff\nother\n")
	osha := spool.Hash(other)
	if err := l.PutContents(ctx, map[string][]byte{osha: other}); err != nil {
		t.Fatal(err)
	}
	if deleted, _, err := l.DeleteContents(ctx, []string{osha}); err != nil || len(deleted) != 1 {
		t.Fatalf("DeleteContents: %v, %v", deleted, err)
	}
	if _, err := st.Get(osha); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of deleted contents: %v, want fs.ErrNotExist", err)
	}
}

// The memory held for the ingester is bounded: past freshMax, contents
// are read from the table.
func TestFreshContentsBounded(t *testing.T) {
	var f freshContents
	big := make([]byte, freshMax/2+1)
	f.add(map[string][]byte{"a": big})
	f.add(map[string][]byte{"b": big})
	if _, ok := f.take("b"); ok {
		t.Error("fresh kept more than freshMax bytes")
	}
	if _, ok := f.take("a"); !ok {
		t.Error("fresh dropped contents that fit")
	}
	if f.bytes != 0 || len(f.m) != 0 {
		t.Errorf("after taking everything: %d bytes, %d entries", f.bytes, len(f.m))
	}
	f.add(map[string][]byte{"b": big})
	if _, ok := f.take("b"); !ok {
		t.Error("fresh did not make room again after a take")
	}
}
