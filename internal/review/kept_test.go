package review

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
)

// Invariant: what another user could have put in the shared $TMPDIR is
// never taken for the person's kept text. FindKept takes the newest copy
// in a private directory of this user's, and passes over directories
// others may write, symlinked directories and symlinked files.
func TestFindKeptOnlyPrivateCopies(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	it := Item{ID: "092d1437c453", SHA256: "092d1437c4532dd61d37cf5c7a1e782b8d162a9ddce59d027e37fcc3e7b74e1a", Name: "unsafe.md"}
	name := claim.ArchiveName(it.Name, it.SHA256)
	base := time.Now().Add(-time.Hour)
	put := func(dir string, mode os.FileMode, age time.Duration) string {
		t.Helper()
		d := filepath.Join(tmp, dir)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, []byte(dir), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, base.Add(age), base.Add(age)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, ok := FindKept(it); ok {
		t.Fatal("found a kept text in an empty $TMPDIR")
	}
	put("handoff-edit-old", 0o700, 0)
	newest := put("handoff-edit-new", 0o700, time.Minute)
	put("handoff-edit-open", 0o777, 2*time.Minute) // anyone could have written it
	other := put("elsewhere", 0o700, 3*time.Minute)
	if err := os.Symlink(filepath.Dir(other), filepath.Join(tmp, "handoff-edit-link")); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(tmp, "handoff-edit-filelink")
	if err := os.Mkdir(linked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(linked, name)); err != nil {
		t.Fatal(err)
	}
	k, ok := FindKept(it)
	if !ok || k.Path != newest || k.ID != it.ID {
		t.Fatalf("FindKept = %+v, %v; want %s", k, ok, newest)
	}
	if err := removeKept(k.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(newest)); !os.IsNotExist(err) {
		t.Fatalf("the resumed copy's directory is still there: %v", err)
	}
	if err := removeKept(other); err == nil {
		t.Fatal("removeKept removed a directory that is not a kept edit's")
	}
}
