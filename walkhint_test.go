package handoff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/layout"
)

// TestWalkHintKeptBetweenRuns: a sync keeps what each host's discovery
// asked under .handoff/walks; the next run walks with it and finds what a
// walk without it finds, a handoff new since included. A damaged hint is
// no hint, and is rewritten; a dry run reads the hint but writes none; a
// host the manifest no longer names loses its hint.
// Invariant: the hint never costs a handoff, and a dry run changes
// nothing under the workspace.
func TestWalkHintKeptBetweenRuns(t *testing.T) {
	e := newEnv(t)
	hintFile := filepath.Join(e.ws, layout.WalksDir, "canonical.json")
	e.put(e.inbox, "first.md", card("create-card", "first.md", goodFM))
	if r := e.sync(false); r.Counts.Promoted != 1 {
		t.Fatalf("first run: %+v", r.Counts)
	}
	data, err := os.ReadFile(hintFile)
	if err != nil {
		t.Fatalf("no walk hint after a run: %v", err)
	}
	hint, err := claim.ParseHint(data)
	if err != nil || len(hint.Calls) == 0 {
		t.Fatalf("the walk hint holds %d calls (%v)", len(hint.Calls), err)
	}
	if !strings.Contains(string(data), e.inbox) {
		t.Errorf("the walk hint does not list the inbox %s", e.inbox)
	}

	e.put(e.inbox2, "second.md", card("create-card", "second.md", goodFM))
	if r := e.sync(false); r.Counts.Promoted != 1 {
		t.Fatalf("second run, with the hint: %+v, want the new handoff promoted", r.Counts)
	}

	if err := os.WriteFile(hintFile, []byte("{damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.put(e.inbox, "third.md", card("create-card", "third.md", goodFM))
	before, _ := os.ReadFile(hintFile)
	if r := e.sync(true); r.Counts.Promoted != 1 {
		t.Fatalf("dry run with a damaged hint: %+v, want the handoff found", r.Counts)
	}
	if after, _ := os.ReadFile(hintFile); string(after) != string(before) {
		t.Errorf("a dry run rewrote the walk hint: %q", after)
	}
	if r := e.sync(false); r.Counts.Promoted != 1 {
		t.Fatalf("run with a damaged hint: %+v, want the handoff promoted", r.Counts)
	}
	if data, _ := os.ReadFile(hintFile); !strings.HasPrefix(string(data), `{"calls":[{`) {
		t.Errorf("the damaged hint was not rewritten: %q", data)
	}

	// A host gone from the manifest leaves no hint behind; what is not a
	// hint stays.
	walks := filepath.Dir(hintFile)
	for _, name := range []string{"gone.json", "gone.json.tmp", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(walks, name), []byte("[]"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.sync(true)
	if _, err := os.Stat(filepath.Join(walks, "gone.json")); err != nil {
		t.Errorf("a dry run removed a walk hint: %v", err)
	}
	e.sync(false)
	for name, want := range map[string]bool{"gone.json": false, "gone.json.tmp": false, "notes.txt": true, "canonical.json": true} {
		if _, err := os.Stat(filepath.Join(walks, name)); (err == nil) != want {
			t.Errorf("after a run, %s exists: %v, want %v", name, err == nil, want)
		}
	}
}
