package ingest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/layout"
)

// plant puts a file with a temporary name into each directory the
// ingester cleans, as a crash would leave one, and returns their paths.
func (r *rig) plant() []string {
	r.t.Helper()
	var out []string
	for _, d := range []string{layout.CardsDir, layout.BackupsDir, layout.ReceiptsDir, "."} {
		p := filepath.Join(r.ws, d, durable.TempPrefix+"left.md")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("half"), 0o600); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func (r *rig) marked() bool {
	r.t.Helper()
	_, err := os.Lstat(filepath.Join(r.ws, layout.IngestingFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.t.Fatal(err)
	}
	return err == nil
}

// After a clean run there is nothing to look for: the next ingester
// lists none of the directories, which hold every card, backup and
// receipt (a file with a temporary name no crash left stays).
func TestCleanRunLeavesNothingToLookFor(t *testing.T) {
	r := newRig(t)
	r.store([2]string{"a.md", cardH("create-card", "a.md", cardContent("a", "A."))}, [2]string{"b.md", docH("TOOLS.md", "- b")})
	if _, err := r.run(64, false); err != nil {
		t.Fatal(err)
	}
	if r.marked() {
		t.Fatalf("a clean run left %s", layout.IngestingFile)
	}
	planted := r.plant()
	r.store([2]string{"c.md", cardH("create-card", "c.md", cardContent("c", "C."))}, [2]string{"d.md", docH("TOOLS.md", "- d")})
	if _, err := r.run(64, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range planted {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the ingester after a clean one looked for temporary files: %s is gone (%v)", p, err)
		}
	}
	if r.marked() || r.readWS("memory/cards/c.md") == "" {
		t.Errorf("marked %v, card c %q", r.marked(), r.readWS("memory/cards/c.md"))
	}
}

// An ingester that wrote and never closed (its process died) leaves the
// mark; the next one removes every temporary file, then the mark.
func TestDeadIngesterLeavesItsMark(t *testing.T) {
	r := newRig(t)
	r.store([2]string{"a.md", cardH("create-card", "a.md", cardContent("a", "A."))})
	in, err := New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: "died"}, r.led, r.spool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.ws.Close() })
	if _, err := in.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !r.marked() {
		t.Fatalf("an ingester that wrote has no %s before it closes", layout.IngestingFile)
	}
	planted := r.plant()
	r.reopen()
	r.store([2]string{"b.md", docH("TOOLS.md", "- b")})
	if _, err := r.run(64, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range planted {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after the ingester that died: %v", p, err)
		}
	}
	if r.marked() {
		t.Errorf("%s left once everything was removed", layout.IngestingFile)
	}
	r.checkClean()
}

// A run the ledger says did not finish may have died writing its
// receipt: the next ingester looks, mark or not, and the one after that
// no longer does.
func TestUnfinishedRunIsLookedAfter(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if err := r.led.StartRun(ctx, "20260101T000000Z-aaaaaa", "apply"); err != nil {
		t.Fatal(err)
	}
	planted := r.plant()
	runOnce := func(id string) {
		t.Helper()
		if err := r.led.StartRun(ctx, id, "apply"); err != nil {
			t.Fatal(err)
		}
		in, err := New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: id}, r.led, r.spool)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if err := in.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.led.FinishRun(ctx, id, "ok", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	runOnce("20260101T003000Z-bbbbbb")
	for _, p := range planted {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after an unfinished run: %v", p, err)
		}
	}
	planted = r.plant()
	runOnce("20260101T010000Z-cccccc")
	for _, p := range planted {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("looked for temporary files after a finished run: %s is gone (%v)", p, err)
		}
	}
}

// An ingester whose run failed after it wrote keeps the mark: what the
// failure left is removed by the next one.
func TestFailedRunKeepsTheMark(t *testing.T) {
	r := newRig(t)
	r.store([2]string{"a.md", cardH("create-card", "a.md", cardContent("a", "A."))})
	r.store([2]string{"b.md", docH("TOOLS.md", "- b")})
	srcs, err := r.led.PendingSources(context.Background())
	if err != nil || len(srcs) != 2 {
		t.Fatalf("pending %d, %v", len(srcs), err)
	}
	bad := filepath.Join(r.ws, layout.SpoolDir, srcs[1].SHA256+".md")
	if err := os.WriteFile(bad, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.run(1, false); err == nil {
		t.Fatal("a run over a corrupt spool file succeeded")
	}
	if !r.marked() {
		t.Errorf("a run that wrote and failed removed %s", layout.IngestingFile)
	}
}
