package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppendToKeepsOtherAppends: appendTo, which puts another writer's late
// edit back, appends in place, so an append another writer makes through a
// descriptor it already holds is kept as well, in whichever order the two
// came. It never writes through a symlink or to a missing file. Invariant:
// putting a late edit back loses no other writer's bytes, and nothing is
// written outside the workspace.
func TestAppendToKeepsOtherAppends(t *testing.T) {
	dir := t.TempDir()
	ws, err := openWorkspace(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	p := filepath.Join(dir, "TOOLS.md")
	if err := os.WriteFile(p, []byte("# Tools\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	editor, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer editor.Close()
	editor.WriteString("- editor one\n")
	if err := ws.appendTo("TOOLS.md", []byte("- late line\n")); err != nil {
		t.Fatal(err)
	}
	editor.WriteString("- editor two\n")
	got, _ := os.ReadFile(p)
	if want := "# Tools\n- editor one\n- late line\n- editor two\n"; string(got) != want {
		t.Fatalf("TOOLS.md = %q, want %q", got, want)
	}

	outside := filepath.Join(t.TempDir(), "outside.md")
	os.WriteFile(outside, []byte("outside\n"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "LINK.md")); err != nil {
		t.Fatal(err)
	}
	if err := ws.appendTo("LINK.md", []byte("x\n")); err == nil {
		t.Fatal("appendTo wrote through a symlink")
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside\n" {
		t.Fatalf("the symlink's target changed: %q", b)
	}
	if err := ws.appendTo("GONE.md", []byte("x\n")); err == nil || !strings.Contains(err.Error(), "GONE.md") {
		t.Fatalf("appendTo a missing file: %v, want an error naming it", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "GONE.md")); err == nil {
		t.Fatal("appendTo created a missing file")
	}
}
