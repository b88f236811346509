package claim_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
)

// TestWalkHintFile: a hint saved is the hint loaded next run; a save of
// what was loaded writes nothing, nor does a dry run's; a missing,
// damaged or oversized file is no hint, the last two logged.
// Invariant: a hint file is only ever read or written at its own path,
// and a dry run writes none.
func TestWalkHintFile(t *testing.T) {
	walks := filepath.Join(t.TempDir(), "walks")
	file := claim.WalkHintPath(walks, "laptop")
	if want := filepath.Join(walks, "laptop.json"); file != want {
		t.Fatalf("WalkHintPath: %s, want %s", file, want)
	}
	if claim.WalkHintPath("", "laptop") != "" {
		t.Error("WalkHintPath with no walks directory names a file")
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	walked := claim.Hint{Calls: []claim.WalkCall{{Op: claim.WalkLstat, Path: "/home/u/repos"}, {Op: claim.WalkReadDir, Path: "/home/u/repos", N: 64}}}

	h := claim.LoadWalkHint(file, false, log)
	if len(h.Hint.Calls) != 0 || logged.Len() != 0 {
		t.Fatalf("no file: %d calls, log %q; want none and nothing logged", len(h.Hint.Calls), logged.String())
	}
	h.Save(walked, log)
	if _, err := os.Stat(walks); err == nil {
		t.Fatal("a dry run's Save wrote the walks directory")
	}
	claim.LoadWalkHint(file, true, log).Save(walked, log)
	h = claim.LoadWalkHint(file, true, log)
	if !slices.Equal(h.Hint.Calls, walked.Calls) {
		t.Fatalf("loaded %+v, saved %+v", h.Hint.Calls, walked.Calls)
	}
	// What was loaded is not written again: the file keeps whatever is
	// there now.
	if err := os.WriteFile(file, []byte("sentinel"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.Save(walked, log)
	if data, _ := os.ReadFile(file); string(data) != "sentinel" {
		t.Errorf("an unchanged hint was written again: %q", data)
	}

	for name, data := range map[string][]byte{
		"damaged":   []byte("{damaged"),
		"oversized": append([]byte(`{"calls":[]}`), bytes.Repeat([]byte(" "), claim.MaxHintBytes)...),
	} {
		logged.Reset()
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		h := claim.LoadWalkHint(file, true, log)
		if len(h.Hint.Calls) != 0 || !strings.Contains(logged.String(), "damaged") {
			t.Errorf("%s hint: %d calls, log %q; want none, and a warning", name, len(h.Hint.Calls), logged.String())
		}
		h.Save(walked, log)
		if got := claim.LoadWalkHint(file, true, log); !slices.Equal(got.Hint.Calls, walked.Calls) {
			t.Errorf("%s hint not rewritten: %+v", name, got.Hint.Calls)
		}
	}

	// A FIFO in the hint's place is no hint, at once: the pull does not
	// wait for a writer that never comes.
	os.Remove(file)
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		t.Fatal(err)
	}
	logged.Reset()
	loaded := make(chan *claim.WalkHint, 1)
	go func() { loaded <- claim.LoadWalkHint(file, true, log) }()
	select {
	case h := <-loaded:
		if len(h.Hint.Calls) != 0 || !strings.Contains(logged.String(), "damaged") {
			t.Errorf("FIFO hint: %d calls, log %q; want none, and a warning", len(h.Hint.Calls), logged.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LoadWalkHint of a FIFO did not return")
	}
}

// TestForgetWalkHints: the hints of hosts not named go, with their
// temporary files; a host named keeps its hint, and nothing that is not
// a hint file (another name, a directory) is touched.
func TestForgetWalkHints(t *testing.T) {
	walks := t.TempDir()
	for _, name := range []string{"laptop.json", "laptop.json.tmp", "gone.json", "gone.json.tmp", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(walks, name), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(walks, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	claim.ForgetWalkHints(walks, []string{"laptop"}, slog.New(slog.DiscardHandler))
	for name, want := range map[string]bool{"laptop.json": true, "laptop.json.tmp": true, "gone.json": false, "gone.json.tmp": false, "notes.txt": true, "dir.json": true} {
		if _, err := os.Lstat(filepath.Join(walks, name)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
	claim.ForgetWalkHints(filepath.Join(walks, "missing"), nil, slog.New(slog.DiscardHandler)) // none yet: nothing to do
}
