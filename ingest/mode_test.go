package ingest

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/handoff-sync/handoff/internal/layout"
)

// umask sets the process's umask for the rest of the test. Tests that use
// it do not run in parallel: the umask is the whole process's.
func umask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// modes maps every path under dir but dir itself to its permission bits.
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fi.Mode().Perm()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunPrivateModes: under umask 022 a run that backs up a document,
// creates a card and drafts a review leaves the backup and the draft 0600
// in 0700 directories, and the card, the document and their directories
// as the umask makes them (0644, 0755). Invariant: nothing under .handoff
// (review drafts included) is readable by group or others, and the
// workspace's own content keeps its modes.
func TestRunPrivateModes(t *testing.T) {
	umask(t, 0o022)
	r := newRig(t)
	r.writeWS("TOOLS.md", "# Tools\n")
	r.store(
		[2]string{"doc.md", docH("TOOLS.md", "- a tool")},
		[2]string{"card.md", cardH("create-card", "alpha.md", cardContent("alpha", "A"))},
		[2]string{"escape.md", docH("../outside.md", "- out")},
	)
	if _, err := r.run(256, false); err != nil {
		t.Fatal(err)
	}
	got := modes(t, r.ws)
	var backups, drafts int
	for p, m := range got {
		switch {
		case strings.HasPrefix(p, layout.BackupsDir+"/"):
			backups++
		case strings.HasPrefix(p, layout.ReviewDir+"/"):
			drafts++
		}
		want := layout.SharedFile
		fi, _ := os.Lstat(filepath.Join(r.ws, p))
		switch {
		case layout.Private(p) && fi.IsDir():
			want = layout.PrivateDir
		case layout.Private(p):
			want = layout.PrivateFile
		case fi.IsDir():
			want = layout.SharedDir
		}
		if m != want {
			t.Errorf("%s: mode %v, want %v", p, m, want)
		}
	}
	if backups != 1 || drafts != 1 {
		t.Errorf("%d backups and %d drafts, want 1 of each: %v", backups, drafts, got)
	}
	for _, p := range []string{"memory/cards/alpha.md", layout.LedgerFile} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s missing: %v", p, got)
		}
	}
}

// TestWritePrivateModes: workspace.write, the path a crashed run's
// recovery and a review decision take, makes backups and drafts 0600 in
// 0700 directories under umask 022, and a document 0644.
func TestWritePrivateModes(t *testing.T) {
	umask(t, 0o022)
	dir := t.TempDir()
	ws, err := openWorkspace(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, name := range []string{layout.BackupsDir + "/b.md", layout.ReviewDir + "/d.md", "rules/r.md"} {
		if err := ws.write(name, []byte("x\n")); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]fs.FileMode{
		layout.StateDir: 0o700, layout.BackupsDir: 0o700, layout.BackupsDir + "/b.md": 0o600,
		layout.ReviewDir: 0o700, layout.ReviewDir + "/d.md": 0o600,
		"rules": 0o755, "rules/r.md": 0o644,
	}
	got := modes(t, dir)
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: mode %v, want %v", p, got[p], w)
		}
	}
}

// TestOpenNarrowsPrivateTrees: opening a workspace for an applied run
// narrows a .handoff and a memory/handoff-inbox that an earlier version
// made 0755 to 0700, and leaves the files inside, the workspace's own
// directories and a dry run's workspace alone; a symlinked review inbox is
// not followed. Invariant: an existing workspace's private trees are
// closed to others on its next run, and nothing else changes mode.
func TestOpenNarrowsPrivateTrees(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{layout.BackupsDir, layout.LegacyReviewDir, layout.CardsDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{layout.BackupsDir + "/b.md", layout.LegacyReviewDir + "/d.md", layout.CardsDir + "/c.md"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range append([]string{"memory"}, layout.StateDir, layout.BackupsDir, layout.LegacyReviewDir, layout.CardsDir) {
		if err := os.Chmod(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	before := modes(t, dir)
	dry, err := openWorkspace(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	dry.Close()
	if got := modes(t, dir); !maps.Equal(got, before) {
		t.Errorf("a dry run changed modes: %v, want %v", got, before)
	}
	ws, err := openWorkspace(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	ws.Close()
	want := maps.Clone(before)
	want[layout.StateDir], want[layout.LegacyReviewDir] = 0o700, 0o700
	if got := modes(t, dir); !maps.Equal(got, want) {
		t.Errorf("modes %v, want %v", got, want)
	}

	// A symlinked review inbox: its target keeps its mode.
	other := t.TempDir()
	link := t.TempDir()
	os.Chmod(other, 0o755)
	os.Mkdir(filepath.Join(link, "memory"), 0o755)
	if err := os.Symlink(other, filepath.Join(link, layout.LegacyReviewDir)); err != nil {
		t.Fatal(err)
	}
	if ws, err = openWorkspace(link, false); err != nil {
		t.Fatal(err)
	}
	ws.Close()
	if fi, _ := os.Stat(other); fi.Mode().Perm() != 0o755 {
		t.Errorf("a symlinked review inbox's target: mode %v, want it left 0755", fi.Mode().Perm())
	}
}
