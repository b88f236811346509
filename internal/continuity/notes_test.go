package continuity

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/prune"
	"github.com/handoff-sync/handoff/internal/repoid"
)

// TestNotesOutlivePrune: prune deletes a handoff's bytes; RECENT.md
// still lists it. Invariant: what RECENT.md shows of a handoff outlives
// its bytes (kept in the ledger's notes when a build first reads them),
// so prune never blanks RECENT.md; a withheld handoff's text is not kept;
// prune says how many of the contents it removed keep their notes.
func TestNotesOutlivePrune(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	inbox := "/srv/app/.codex/memory-handoffs"
	w.store(t, "vps", inbox, "2026-12-01-a.md", handoffText("Pick the queue", "Open questions", "- which broker?", "Next steps", "- benchmark both"), "routed", "", "TOOLS.md")
	secret := "ghp_" + strings.Repeat("Zq", 18)
	w.store(t, "vps", inbox, "2026-12-01-b.md", handoffText("Token", "Next steps", "- use "+secret), "review", "secret-like-content", "")
	if err := Record(ctx, w.led, w.sp, "run-1", []claim.HostReport{report("vps", "/root", map[string]repoid.Identity{
		inbox: {Path: "/srv/app", Origin: "github.com/acme/app"}})}, nil, nil); err != nil {
		t.Fatal(err)
	}
	build := func() string {
		t.Helper()
		files, err := Build(ctx, Input{Ledger: w.led, Spool: w.sp, Manifest: w.m, Now: time.Now()}, w.m.HostConfigs())
		if err != nil {
			t.Fatal(err)
		}
		return fileOf(t, files["laptop"], "repos/app/RECENT.md")
	}
	before := build()
	for _, want := range []string{"## Pick the queue", "> - which broker?", "> - benchmark both"} {
		if !strings.Contains(before, want) {
			t.Fatalf("RECENT.md lacks %q:\n%s", want, before)
		}
	}
	// prune --older-than 1h, an hour from now: every content goes but
	// the one waiting in review.
	res, err := prune.Spool(ctx, w.led, prune.SpoolOptions{Dir: filepath.Join(w.dir, "spool"), Before: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 1 || res.Notes != 1 || res.Unkept != 0 {
		t.Errorf("prune: %+v; want the routed content removed, its notes kept", res)
	}
	if ok, _ := w.sp.Has(hsum(handoffText("Pick the queue", "Open questions", "- which broker?", "Next steps", "- benchmark both"))); ok {
		t.Fatal("the bytes are still stored: the test proves nothing")
	}
	if after := build(); after != before {
		t.Errorf("RECENT.md changed after prune:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	var n int
	if err := w.led.DB().QueryRow(`SELECT count(*) FROM notes WHERE summary LIKE '%' || ? || '%' OR next_steps LIKE '%' || ? || '%'`, secret, secret).Scan(&n); err != nil || n != 0 {
		t.Errorf("the ledger keeps a withheld handoff's text (%d rows, %v)", n, err)
	}
	if strings.Contains(before, "spool") {
		t.Errorf("RECENT.md names the spool:\n%s", before)
	}
}
