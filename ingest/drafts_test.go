package ingest

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/handoff-sync/handoff/internal/layout"
)

// legacyDrafts leaves r's workspace as the version before this one did:
// n review drafts in memory/handoff-inbox, where OpenClaw indexes them as
// memory, and a ledger at schema 10 naming them there. With own, a file
// of a person's sits beside them. It returns each draft's name and bytes.
func legacyDrafts(r *rig, n int, own bool) map[string]string {
	r.t.Helper()
	var named [][2]string
	for i := range n {
		named = append(named, [2]string{fmt.Sprintf("2026-04-2%d-secret.md", i), docH("TOOLS.md", fmt.Sprintf("- key %d AKIAABCDEFGHIJKLMNOP", i))})
	}
	r.store(named...)
	r.mustRun(256)
	drafts := map[string]string{}
	ents, err := os.ReadDir(filepath.Join(r.ws, layout.ReviewDir))
	if err != nil || len(ents) != n {
		r.t.Fatalf("%d drafts (%v), want %d", len(ents), err, n)
	}
	if err := os.MkdirAll(filepath.Join(r.ws, layout.LegacyReviewDir), 0o700); err != nil {
		r.t.Fatal(err)
	}
	for _, e := range ents {
		drafts[e.Name()] = r.readWS(layout.ReviewDir + "/" + e.Name())
		if err := os.Rename(filepath.Join(r.ws, layout.ReviewDir, e.Name()), filepath.Join(r.ws, layout.LegacyReviewDir, e.Name())); err != nil {
			r.t.Fatal(err)
		}
	}
	if own {
		r.writeWS(layout.LegacyReviewDir+"/my-note.md", "a person's own note\n")
	}
	db := r.led.DB()
	for _, q := range []string{
		`UPDATE handoffs SET target = 'memory/handoff-inbox/' || substr(target, 17) WHERE substr(target, 1, 16) = '.handoff/review/'`,
		// Undo what came after schema 10, so that the migrations run again.
		`DROP TABLE texts`,
		`DROP TABLE notes`,
		`PRAGMA user_version = 10`,
	} {
		if _, err := db.Exec(q); err != nil {
			r.t.Fatal(err)
		}
	}
	r.reopen() // migration 11
	return drafts
}

// checkDraftsMoved asserts that every draft is in layout.ReviewDir with
// its bytes, none is left where OpenClaw reads memory, and review can
// find each by the ledger's name for it.
func (r *rig) checkDraftsMoved(drafts map[string]string, own bool) {
	r.t.Helper()
	for name, data := range drafts {
		if got := r.readWS(layout.ReviewDir + "/" + name); got != data {
			r.t.Errorf("%s/%s = %q, want the draft's bytes", layout.ReviewDir, name, got)
		}
		if _, err := os.Lstat(filepath.Join(r.ws, layout.LegacyReviewDir, name)); err == nil {
			r.t.Errorf("%s is still in %s, where OpenClaw indexes it", name, layout.LegacyReviewDir)
		}
	}
	ents, err := os.ReadDir(filepath.Join(r.ws, layout.LegacyReviewDir))
	switch {
	case own && (err != nil || len(ents) != 1 || r.readWS(layout.LegacyReviewDir+"/my-note.md") != "a person's own note\n"):
		r.t.Errorf("a person's own file in %s was not left alone: %v %v", layout.LegacyReviewDir, ents, err)
	case !own && !os.IsNotExist(err):
		r.t.Errorf("%s still there after its drafts moved: %v %v", layout.LegacyReviewDir, ents, err)
	}
	names, err := r.led.DraftNames(context.Background(), layout.ReviewDir)
	if err != nil {
		r.t.Fatal(err)
	}
	for name := range drafts {
		if !names[name] {
			r.t.Errorf("the ledger does not name %s/%s", layout.ReviewDir, name)
		}
	}
	if old, _ := r.led.DraftNames(context.Background(), layout.LegacyReviewDir); len(old) != 0 {
		r.t.Errorf("the ledger still names drafts in %s: %v", layout.LegacyReviewDir, old)
	}
	// Reviewable: what `handoff review` lists names each draft where it
	// now is, with its bytes there.
	items, err := r.led.ReviewItems(context.Background(), false)
	if err != nil || len(items) != len(drafts) {
		r.t.Fatalf("%d items wait for review (%v), want %d", len(items), err, len(drafts))
	}
	for _, it := range items {
		if data, ok := drafts[path.Base(it.Target)]; !ok || path.Dir(it.Target) != layout.ReviewDir || r.readWS(it.Target) != data {
			r.t.Errorf("review item %.12s names %s, not its draft in %s", it.SHA256, it.Target, layout.ReviewDir)
		}
	}
	r.checkClean()
}

// TestLegacyDraftsMove: a workspace an earlier version left, with its
// review drafts under memory/ where OpenClaw indexes them as trusted
// memory. The first run of this version moves every draft out, keeps a
// person's own file, and moves nothing the next time. Invariant: nothing
// unreviewed where OpenClaw reads memory; no draft lost.
func TestLegacyDraftsMove(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own=%v", own), func(t *testing.T) {
			r := newRig(t)
			drafts := legacyDrafts(r, 3, own)
			in, err := New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: "run"}, r.led, r.spool)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := in.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if in.MovedDrafts() != 3 {
				t.Errorf("moved %d drafts, want 3", in.MovedDrafts())
			}
			in.Close()
			r.checkDraftsMoved(drafts, own)
			in, _ = New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: "again"}, r.led, r.spool)
			defer in.Close()
			if _, err := in.Run(context.Background()); err != nil || in.MovedDrafts() != 0 {
				t.Errorf("second run moved %d drafts (%v), want none", in.MovedDrafts(), err)
			}
		})
	}
}

// TestCrashMovingLegacyDrafts kills the ingester after each draft it
// moves out of memory/handoff-inbox, and after a move whose directories
// were not synced, then runs it again. Invariants: no draft lost (each is
// under exactly one of its names after the crash, and in
// layout.ReviewDir after the next run), none left where OpenClaw reads
// memory, the ledger names each where it is.
func TestCrashMovingLegacyDrafts(t *testing.T) {
	const n = 4
	for k := 1; k <= n; k++ {
		t.Run(fmt.Sprintf("drafts.moved@%d", k), func(t *testing.T) {
			r := newRig(t)
			drafts := legacyDrafts(r, n, k%2 == 0)
			if !r.runChild(fmt.Sprintf("drafts.moved@%d", k), 256) {
				t.Fatal("the failpoint was not reached")
			}
			moved := 0
			for name, data := range drafts {
				a, b := r.readWS(layout.LegacyReviewDir+"/"+name), r.readWS(layout.ReviewDir+"/"+name)
				switch {
				case a == data && b == "":
				case a == "" && b == data:
					moved++
				default:
					t.Errorf("after the crash %s is in neither or both places (%q, %q)", name, a, b)
				}
			}
			if moved != k {
				t.Errorf("%d drafts moved before the crash, want %d", moved, k)
			}
			r.mustRun(256)
			r.checkDraftsMoved(drafts, k%2 == 0)
		})
	}
}
