package spool_test

import (
	"path/filepath"
	"testing"

	"github.com/handoff-sync/handoff/claim/spool"
)

// TestOpenLayered protects "a dry run writes nothing" where a run and its
// workers open the spool: over a base, new content lands in the scratch
// spool only and reads see both; without one, the spool is dir itself.
// The function returned closes what was opened.
func TestOpenLayered(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	real, scratch := filepath.Join(root, "spool"), filepath.Join(root, "scratch")
	a, b := fixture(t, "handoff.md"), fixture(t, "malformed.md")

	sp, closeSpool, err := spool.OpenLayered(real, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(map[string][]byte{sha(a): a}); err != nil {
		t.Fatal(err)
	}
	if err := closeSpool(); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Get(sha(a)); err == nil {
		t.Error("the spool still reads after its close")
	}

	sp, closeSpool, err = spool.OpenLayered(scratch, real)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSpool()
	if err := sp.Put(map[string][]byte{sha(a): a, sha(b): b}); err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{a, b} {
		if got, err := sp.Get(sha(data)); err != nil || string(got) != string(data) {
			t.Errorf("Get through the layers: %v", err)
		}
	}
	if got := spoolNames(t, real); !sameSet(got, []string{spool.Name(sha(a))}) {
		t.Errorf("the real spool holds %q after a layered Put", got)
	}
	if got := spoolNames(t, scratch); !sameSet(got, []string{spool.Name(sha(b))}) {
		t.Errorf("the scratch spool holds %q, want only the new content", got)
	}
	// A workspace's first dry run: no real spool yet.
	sp, closeFresh, err := spool.OpenLayered(filepath.Join(root, "scratch2"), filepath.Join(root, "missing"))
	if err != nil {
		t.Fatalf("OpenLayered over no spool yet: %v", err)
	}
	if ok, err := sp.Has(sha(a)); ok || err != nil {
		t.Errorf("Has over no spool yet: %v, %v", ok, err)
	}
	if err := closeFresh(); err != nil {
		t.Errorf("close over no spool yet: %v", err)
	}
}
