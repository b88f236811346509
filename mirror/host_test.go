package mirror

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/manifest"
)

// TestPublishHost: a host's publish sends the workspace's cards and the
// host's guide, naming its inboxes, and saves the state; a dry run saves
// none; a panic while publishing is the host's error.
// Invariant: a dry run leaves the workspace's state as it was, and a
// host's failure never escapes as the caller's.
func TestPublishHost(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, layout.CardsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, layout.CardsDir, "a.md"), []byte("card a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := manifest.HostConfig{Name: "laptop", Timeout: time.Minute, Mirror: &manifest.MirrorConfig{Path: "~/mirror", Include: []string{manifest.MirrorCards}}}
	stateFile := filepath.Join(t.TempDir(), "laptop.json")
	job := Job{Workspace: ws, StateFile: stateFile, Canonical: "canon", RunID: "run-1", Now: time.Unix(1700000000, 0), WorkspaceID: "ws-1"}
	log := slog.New(slog.DiscardHandler)
	fsys := localHome{home: home}

	dry := job
	dry.DryRun = true
	if r := PublishHost(context.Background(), fsys, h, []string{"/in"}, dry, log); r.Outcome != OutcomeOK {
		t.Fatalf("dry run: %s: %s", r.Outcome, r.Error)
	}
	if _, err := os.Stat(stateFile); err == nil {
		t.Error("a dry run saved the mirror's state")
	}

	r := PublishHost(context.Background(), fsys, h, []string{"/home/u/app/.claude/memory-handoffs"}, job, log)
	mustOK(t, r)
	guide, err := os.ReadFile(filepath.Join(home, "mirror", GuideFile))
	if err != nil || !strings.Contains(string(guide), "/home/u/app/.claude/memory-handoffs") {
		t.Errorf("the guide does not name the host's inbox (%v):\n%s", err, guide)
	}
	if _, err := os.ReadFile(filepath.Join(home, "mirror", layout.CardsDir, "a.md")); err != nil {
		t.Errorf("the card was not published: %v", err)
	}
	st, err := LoadState(stateFile)
	if err != nil || st.Generation != r.Generation || st.Generation == 0 {
		t.Errorf("state after the publish: %+v, %v; want generation %d", st, err, r.Generation)
	}

	broken := h
	broken.Mirror = nil // a bug in the caller: PublishHost panics inside
	if r := PublishHost(context.Background(), fsys, broken, nil, job, log); r.Outcome != OutcomeError || !strings.Contains(r.Error, "internal error") {
		t.Errorf("a panic while publishing gave %s: %q; want the host's error", r.Outcome, r.Error)
	}
}
