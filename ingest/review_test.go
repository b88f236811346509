package ingest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
)

// sourceOf returns the stored source named name.
func (r *rig) sourceOf(name string) ledger.SourceRow {
	r.t.Helper()
	var s ledger.SourceRow
	if err := r.led.DB().QueryRow(`SELECT id, sha256, size, host, inbox, name, archived_as FROM sources WHERE name = ?`, name).
		Scan(&s.ID, &s.SHA256, &s.Size, &s.Host, &s.Inbox, &s.Name, &s.ArchivedAs); err != nil {
		r.t.Fatalf("source %s: %v", name, err)
	}
	return s
}

func (r *rig) ingester(dry bool) *Ingester {
	r.t.Helper()
	in, err := New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: "review-run", DryRun: dry}, r.led, r.spool)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { in.Close() })
	return in
}

func (r *rig) decision(src ledger.SourceRow, kind string) *ledger.Decision {
	return &ledger.Decision{SHA256: src.SHA256, Decision: kind, By: "me@here", Note: "n", RunID: "review-run",
		FromResult: ResultReview, Draft: layout.ReviewDir + "/" + claim.ArchiveName(src.Name, src.SHA256)}
}

// TestReviewEntriesCarryTargetHash: a handoff routed to review carries the
// hash of the card or document it names, as it was then, as its
// before-hash (none when absent, unsafe or not named); its target stays
// the draft.
func TestReviewEntriesCarryTargetHash(t *testing.T) {
	r := newRig(t)
	r.writeWS("memory/cards/existing.md", existingCard)
	r.writeWS("TOOLS.md", "# Tools\n")
	stale := cardH("update-card", "existing.md", cardContent("e", "new"), section{"Expected card SHA256", sum("other")})
	exists := cardH("create-card", "existing.md", cardContent("e", "other"))
	missing := cardH("update-card", "nope.md", cardContent("n", "x"), section{"Expected card SHA256", sum("x")})
	secret := docH("TOOLS.md", "- key AKIAABCDEFGHIJKLMNOP")
	unsafe := docH("../out.md", "- x")
	r.store([2]string{"stale.md", stale}, [2]string{"exists.md", exists}, [2]string{"missing.md", missing},
		[2]string{"secret.md", secret}, [2]string{"unsafe.md", unsafe})
	entries, err := r.run(256, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"stale.md": sum(existingCard), "exists.md": sum(existingCard), "missing.md": "",
		"secret.md": sum("# Tools\n"), "unsafe.md": ""}
	for _, e := range entries {
		if e.Result != ResultReview {
			t.Errorf("%s: %s, want review", e.Name, e.Result)
			continue
		}
		if e.BeforeSHA256 != want[e.Name] || e.AfterSHA256 != "" || !strings.HasPrefix(e.Target, layout.ReviewDir+"/") {
			t.Errorf("%s (%s): target %s, before %.12s after %.12s; want before %.12s", e.Name, e.Reason, e.Target, e.BeforeSHA256, e.AfterSHA256, want[e.Name])
		}
	}
}

// TestInspectOverrides: a proposal is blocked by every problem its
// override does not relax, and by no other; what it would do is computed
// either way.
func TestInspectOverrides(t *testing.T) {
	r := newRig(t)
	r.writeWS("memory/cards/existing.md", existingCard)
	in := r.ingester(true)
	src := ledger.SourceRow{SHA256: sum("x")}
	stale := []byte(cardH("update-card", "existing.md", cardContent("e", "new"), section{"Expected card SHA256", sum("other")}))
	pr, err := in.Inspect(src, stale, Override{})
	if err != nil {
		t.Fatal(err)
	}
	if pr.OK() || len(pr.Blocking) != 1 || pr.Blocking[0].Reason != ReasonHashConflict || pr.NeedsEdit() {
		t.Fatalf("stale update without override: %+v", pr.Blocking)
	}
	if string(pr.Next) != cardContent("e", "new")+"\n" || string(pr.Current) != existingCard || pr.Before != sum(existingCard) {
		t.Errorf("proposal shows %q -> %q", pr.Current, pr.Next)
	}
	if pr, _ = in.Inspect(src, stale, Override{Workspace: true}); !pr.OK() || strings.Join(pr.Relaxed(), ",") != "workspace" {
		t.Errorf("stale update with the workspace override: %+v relaxed %v", pr.Blocking, pr.Relaxed())
	}

	secretStale := []byte(cardH("update-card", "existing.md", cardContent("e", "AKIAABCDEFGHIJKLMNOP"), section{"Expected card SHA256", sum("other")}))
	pr, _ = in.Inspect(src, secretStale, Override{Workspace: true})
	if pr.OK() || strings.Join(pr.Flags(), ",") != FlagAllowSecret || pr.NeedsEdit() {
		t.Errorf("secret without its flag: blocking %+v flags %v", pr.Blocking, pr.Flags())
	}
	if pr, _ = in.Inspect(src, secretStale, Override{Workspace: true, Secret: true}); !pr.OK() || strings.Join(pr.Relaxed(), ",") != "allow-secret,workspace" {
		t.Errorf("secret with its flag: %+v relaxed %v", pr.Blocking, pr.Relaxed())
	}

	for name, data := range map[string]string{
		"invalid front matter": cardH("create-card", "new.md", "---\ntopic: x\n---\nbody"),
		"unsafe target":        docH("../out.md", "- x"),
		"both":                 string(build([]section{{"Type", "setup"}, {"Title", "t"}, {"Summary", "s"}, {"Recommended memory action", "create-card"}, {"Target card", "a.md"}, {"Suggested card content", cardContent("a", "b")}, {"Target document", "TOOLS.md"}, {"Suggested document content", "- x"}})),
		"parse error":          "not a handoff",
	} {
		pr, err := in.Inspect(src, []byte(data), Override{Workspace: true, Secret: true, Hidden: true, Injection: true})
		if err != nil {
			t.Fatal(err)
		}
		if pr.OK() || !pr.NeedsEdit() {
			t.Errorf("%s: OK %v, needs edit %v: %+v", name, pr.OK(), pr.NeedsEdit(), pr.Blocking)
		}
	}
	// A symlinked target cannot be overridden either.
	os.Symlink("/etc/passwd", filepath.Join(r.ws, "memory/cards/link.md"))
	pr, _ = in.Inspect(src, []byte(cardH("create-card", "link.md", cardContent("l", "x"))), Override{Workspace: true})
	if pr.OK() || len(pr.Blocking) != 1 || pr.Blocking[0].Reason != ReasonSymlink {
		t.Errorf("symlinked card: %+v", pr.Blocking)
	}
}

// TestDecideAccept: accepting a stale update applies it, through the
// ingester, to the card as it is now: the plan is recorded, the card
// backed up and replaced, the decision done with the plan's bookkeeping,
// the handoff's result replaced, and the draft taken out; a second
// decision is refused.
func TestDecideAccept(t *testing.T) {
	r := newRig(t)
	r.writeWS("memory/cards/existing.md", existingCard)
	stale := cardH("update-card", "existing.md", cardContent("e", "new"), section{"Expected card SHA256", sum("other")})
	r.store([2]string{"stale.md", stale})
	if _, err := r.run(256, false); err != nil {
		t.Fatal(err)
	}
	src := r.sourceOf("stale.md")
	draft := layout.ReviewDir + "/" + claim.ArchiveName("stale.md", src.SHA256)
	if r.readWS(draft) != stale {
		t.Fatalf("no draft")
	}
	in := r.ingester(false)
	d := r.decision(src, ledger.DecisionAccepted)
	ctx := context.Background()
	if _, _, err := in.Decide(ctx, Decision{Source: src, Data: []byte(stale), Record: d}); !errors.Is(err, ErrBlocked) {
		t.Fatalf("Decide without the person's word on the card: %v", err)
	}
	e, _, err := in.Decide(ctx, Decision{Source: src, Data: []byte(stale), Override: Override{Workspace: true}, Record: d})
	if err != nil {
		t.Fatal(err)
	}
	if e.Result != ResultPromoted || e.Target != "memory/cards/existing.md" || e.BeforeSHA256 != sum(existingCard) || e.AfterSHA256 != sum(cardContent("e", "new")+"\n") {
		t.Fatalf("entry %+v", e)
	}
	if got := r.readWS("memory/cards/existing.md"); got != cardContent("e", "new")+"\n" {
		t.Errorf("card %q", got)
	}
	if err := in.RemoveDecidedDrafts(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.ws, draft)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("draft still there: %v", err)
	}
	var state, overrides, result, after string
	var removed int
	r.led.DB().QueryRow(`SELECT state, overrides, result, after_sha256, draft_removed FROM decisions`).Scan(&state, &overrides, &result, &after, &removed)
	if state != ledger.DecisionDone || overrides != "workspace" || result != ResultPromoted || after != e.AfterSHA256 || removed != 1 {
		t.Errorf("decision %s %s %s %.12s removed=%d", state, overrides, result, after, removed)
	}
	if got := r.results()["stale.md"]; got != ResultPromoted {
		t.Errorf("source result %s", got)
	}
	var hres string
	r.led.DB().QueryRow(`SELECT result FROM handoffs WHERE sha256 = ?`, src.SHA256).Scan(&hres)
	if hres != ResultPromoted {
		t.Errorf("handoff result %s", hres)
	}
	r.checkBackups()
	r.checkClean()
	if _, _, err := in.Decide(ctx, Decision{Source: src, Data: []byte(stale), Override: Override{Workspace: true}, Record: r.decision(src, ledger.DecisionAccepted)}); err == nil {
		t.Error("a second decision about the same handoff was taken")
	}
	// A later copy of the same bytes is a duplicate of the accepted one.
	r.store([2]string{"again.md", stale})
	entries, err := r.run(256, false)
	if err != nil || len(entries) != 1 || entries[0].Result != ResultDuplicate {
		t.Errorf("a copy after the accept: %+v %v", entries, err)
	}
}

// TestDecideAcceptAfterAbandonedPlan: a handoff whose plan was abandoned
// (the card changed between planning and replacing) has a plan row
// already; accepting it reuses that row with its replans counted up, so
// its backup gets a name of its own and the earlier backup is kept.
func TestDecideAcceptAfterAbandonedPlan(t *testing.T) {
	r := newRig(t)
	r.writeWS("memory/cards/existing.md", existingCard)
	upd := cardH("update-card", "existing.md", cardContent("e", "new"), section{"Expected card SHA256", sum(existingCard)})
	r.store([2]string{"u.md", upd})
	in := r.ingester(false)
	in.beforeReplace = func() { r.writeWS("memory/cards/existing.md", existingCard+"edited\n") }
	entries, err := in.Run(context.Background())
	if err != nil || len(entries) != 1 || entries[0].Reason != ReasonHashConflict {
		t.Fatalf("fixture: %+v %v", entries, err)
	}
	if entries[0].BeforeSHA256 != sum(existingCard+"edited\n") {
		t.Errorf("review entry before %.12s, want the card as the conflict found it", entries[0].BeforeSHA256)
	}
	in.beforeReplace = nil
	src := r.sourceOf("u.md")
	e, _, err := in.Decide(context.Background(), Decision{Source: src, Data: []byte(upd), Override: Override{Workspace: true}, Record: r.decision(src, ledger.DecisionAccepted)})
	if err != nil || e.Result != ResultPromoted {
		t.Fatalf("accept: %+v %v", e, err)
	}
	var n, replans int
	r.led.DB().QueryRow(`SELECT count(*), max(replans) FROM plans`).Scan(&n, &replans)
	if n != 1 || replans != 1 {
		t.Errorf("%d plan rows, replans %d; want the one row, counted up", n, replans)
	}
	if b := r.readWS(layout.BackupsDir + "/" + BackupName(src.SHA256, 1, "memory/cards/existing.md")); b != existingCard+"edited\n" {
		t.Errorf("accept's backup %q", b)
	}
	r.checkClean()
}

// TestDecideEdit: an edited handoff is stored and recorded as a new source
// (never on a host, named as the original) with its plan and the
// decision, and applied; the original is no longer waiting and keeps its
// result.
func TestDecideEdit(t *testing.T) {
	r := newRig(t)
	orig := docH("../out.md", "- x")
	r.store([2]string{"o.md", orig})
	if _, err := r.run(256, false); err != nil {
		t.Fatal(err)
	}
	src := r.sourceOf("o.md")
	edited := docH("TOOLS.md", "- x")
	in := r.ingester(false)
	d := r.decision(src, ledger.DecisionEdited)
	d.NewSHA256 = sum(edited)
	newSrc := ledger.SourceRow{SHA256: sum(edited), Size: int64(len(edited)), Host: src.Host, Inbox: src.Inbox, Name: src.Name}
	e, _, err := in.Decide(context.Background(), Decision{Source: newSrc, Data: []byte(edited), Override: Override{Workspace: true}, Record: d, Edited: true})
	if err != nil || e.Result != ResultRouted || e.Name != "o.md" || e.SHA256 != sum(edited) {
		t.Fatalf("edit: %+v %v", e, err)
	}
	if got := r.readWS("TOOLS.md"); got != "- x\n" {
		t.Errorf("TOOLS.md %q", got)
	}
	var acked int
	var arch string
	r.led.DB().QueryRow(`SELECT acked, archived_as FROM sources WHERE sha256 = ?`, sum(edited)).Scan(&acked, &arch)
	if acked != 1 || arch != "" {
		t.Errorf("the edited source: acked %d archived_as %q", acked, arch)
	}
	un, _ := r.led.Unarchived(context.Background(), src.Host)
	for _, u := range un {
		if u.SHA256 == sum(edited) {
			t.Errorf("the edited source would be archived on the host: %+v", u)
		}
	}
	var orgRes, state string
	r.led.DB().QueryRow(`SELECT result FROM handoffs WHERE sha256 = ?`, src.SHA256).Scan(&orgRes)
	r.led.DB().QueryRow(`SELECT state FROM decisions WHERE sha256 = ?`, src.SHA256).Scan(&state)
	if orgRes != ResultReview || state != ledger.DecisionDone {
		t.Errorf("original: %s, decision %s", orgRes, state)
	}
	r.checkClean()
}

// TestRecoverFinishesADecision: a decision whose plan was recorded but not
// applied (the process died) is finished by the next Run, decision
// included; the draft goes too.
func TestRecoverFinishesADecision(t *testing.T) {
	r := newRig(t)
	r.writeWS("memory/cards/existing.md", existingCard)
	exists := cardH("create-card", "existing.md", cardContent("e", "replaced"))
	r.store([2]string{"x.md", exists})
	if _, err := r.run(256, false); err != nil {
		t.Fatal(err)
	}
	src := r.sourceOf("x.md")
	in := r.ingester(true)
	pr, err := in.Inspect(src, []byte(exists), Override{Workspace: true})
	if err != nil || !pr.OK() {
		t.Fatal(err, pr.Blocking)
	}
	// What Decide records before it applies, and nothing after.
	d := r.decision(src, ledger.DecisionAccepted)
	if err := r.led.StartDecision(context.Background(), d, &pr.p.Plan, nil); err != nil {
		t.Fatal(err)
	}
	entries, err := r.run(256, false)
	if err != nil || len(entries) != 1 || entries[0].Result != ResultPromoted {
		t.Fatalf("the next run: %+v %v", entries, err)
	}
	if got := r.readWS("memory/cards/existing.md"); got != cardContent("e", "replaced")+"\n" {
		t.Errorf("card %q", got)
	}
	var state string
	var removed int
	r.led.DB().QueryRow(`SELECT state, draft_removed FROM decisions`).Scan(&state, &removed)
	if state != ledger.DecisionDone || removed != 1 {
		t.Errorf("decision %s, draft removed %d", state, removed)
	}
	if _, err := os.Stat(filepath.Join(r.ws, d.Draft)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("draft left: %v", err)
	}
	r.checkClean()
}

// TestRemoveDecidedDraftsKeepsHandEdits: a draft someone edited by hand
// is left in place when its handoff is decided.
func TestRemoveDecidedDraftsKeepsHandEdits(t *testing.T) {
	r := newRig(t)
	h := docH("../out.md", "- x")
	r.store([2]string{"o.md", h})
	if _, err := r.run(256, false); err != nil {
		t.Fatal(err)
	}
	src := r.sourceOf("o.md")
	d := r.decision(src, ledger.DecisionRejected)
	r.writeWS(d.Draft, h+"my notes\n")
	if err := r.led.StartDecision(context.Background(), d, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.ingester(false).RemoveDecidedDrafts(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.readWS(d.Draft); got != h+"my notes\n" {
		t.Errorf("hand-edited draft %q", got)
	}
}
