package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// TestCheckAnswers: check and read give each path the answer the planner
// relies on, whatever is in the way: a symlinked directory (even one
// pointing inside the workspace) or target is ReasonSymlink, a file where a
// directory belongs ReasonUnsafeTarget, a FIFO or a directory as target
// ReasonNotRegular (a FIFO is never opened), and a missing component or
// target no error. Invariant: nothing is read through a symlink.
func TestCheckAnswers(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"memory/cards", "real/cards", "plain"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("memory/cards/a.md", "card a\n")
	write("real/cards/b.md", "card b\n")
	write("memory/file", "not a dir\n")
	write("TOOLS.md", "# Tools\n")
	if err := os.Symlink("../real", filepath.Join(dir, "memory/linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.md", filepath.Join(dir, "memory/cards/link.md")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "memory/cards/fifo.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := openWorkspace(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, tc := range []struct {
		target, data string
		exists       bool
		reason       string
	}{
		{"memory/cards/a.md", "card a\n", true, ""},
		{"TOOLS.md", "# Tools\n", true, ""},
		{"memory/cards/new.md", "", false, ""},
		{"memory/none/x.md", "", false, ""},
		{"none/deeper/x.md", "", false, ""},
		{"memory/linked/cards/b.md", "", false, ReasonSymlink},
		{"memory/cards/link.md", "", false, ReasonSymlink},
		{"memory/file/x.md", "", false, ReasonUnsafeTarget},
		{"memory/cards/fifo.md", "", false, ReasonNotRegular},
		{"memory/cards", "", false, ReasonNotRegular},
		{"plain", "", false, ReasonNotRegular},
	} {
		exists, err := ws.check(tc.target)
		data, rexists, rerr := ws.read(tc.target)
		for _, e := range []error{err, rerr} {
			reason, other := unsafeReason(e)
			if reason != tc.reason || other != nil {
				t.Errorf("%s: check/read error %v, want reason %q", tc.target, e, tc.reason)
			}
		}
		if exists != tc.exists || rexists != tc.exists || string(data) != tc.data {
			t.Errorf("%s: check %v, read %v %q; want %v %q", tc.target, exists, rexists, data, tc.exists, tc.data)
		}
	}
}
