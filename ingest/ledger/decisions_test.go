package ledger

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/receipts"
)

func dLedger(t *testing.T) (*Ledger, map[string]SourceRow) {
	t.Helper()
	path, _ := qLedger(t)
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rows := map[string]SourceRow{}
	r, err := l.db.Query(`SELECT id, sha256, size, host, inbox, name, archived_as FROM sources`)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var s SourceRow
		r.Scan(&s.ID, &s.SHA256, &s.Size, &s.Host, &s.Inbox, &s.Name, &s.ArchivedAs)
		rows[s.Name] = s
	}
	return l, rows
}

// TestStartDecisionOnlyWhileWaiting: a decision is taken only about a
// handoff that waits (review or malformed, no decision started or done),
// so a handoff is decided about once; a refused decision records nothing.
func TestStartDecisionOnlyWhileWaiting(t *testing.T) {
	l, rows := dLedger(t)
	ctx := context.Background()
	count := func() (n int) { l.db.QueryRow(`SELECT count(*) FROM decisions`).Scan(&n); return }
	for _, name := range []string{"a.md", "d.md"} { // promoted; not ingested
		d := &Decision{SHA256: rows[name].SHA256, Decision: DecisionRejected, By: "me", RunID: "r"}
		if err := l.StartDecision(ctx, d, nil, nil); !errors.Is(err, ErrDecided) {
			t.Errorf("%s: %v, want ErrDecided", name, err)
		}
	}
	c := rows["c.md"]
	d := &Decision{SHA256: c.SHA256, Decision: DecisionRejected, By: "me", RunID: "r", FromResult: receipts.ResultReview, Draft: "memory/handoff-inbox/c.md"}
	if err := l.StartDecision(ctx, d, nil, nil); err != nil || d.ID == 0 || d.State != DecisionDone {
		t.Fatalf("reject: %v %+v", err, d)
	}
	again := &Decision{SHA256: c.SHA256, Decision: DecisionAccepted, By: "me", RunID: "r"}
	p := &Plan{SHA256: c.SHA256, SourceID: c.ID, Kind: "card", Action: "create-card", Target: "memory/cards/c.md", After: qSum("x"), Content: []byte("x")}
	if err := l.StartDecision(ctx, again, p, nil); !errors.Is(err, ErrDecided) {
		t.Errorf("a second decision: %v", err)
	}
	if n := count(); n != 1 {
		t.Errorf("%d decisions recorded, want 1", n)
	}
	var plans int
	l.db.QueryRow(`SELECT count(*) FROM plans`).Scan(&plans)
	if plans != 0 {
		t.Errorf("a refused decision left %d plan(s)", plans)
	}
	ds, err := l.DraftsToRemove(ctx)
	if err != nil || len(ds) != 1 || ds[0].Draft != "memory/handoff-inbox/c.md" {
		t.Fatalf("drafts to remove: %+v %v", ds, err)
	}
	if err := l.DraftRemoved(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if ds, _ := l.DraftsToRemove(ctx); len(ds) != 0 {
		t.Errorf("still to remove: %+v", ds)
	}
}

// TestDecisionFinishedWithItsPlan: a started decision is done in the
// plan's bookkeeping transaction, and the handoff's row takes the new
// result (the source keeps the run that first ingested it); a plan that
// goes to review after all abandons the decision, and the handoff waits
// again.
func TestDecisionFinishedWithItsPlan(t *testing.T) {
	for _, result := range []string{receipts.ResultPromoted, receipts.ResultReview} {
		t.Run(result, func(t *testing.T) {
			l, rows := dLedger(t)
			ctx := context.Background()
			c := rows["c.md"]
			d := &Decision{SHA256: c.SHA256, Decision: DecisionAccepted, By: "me", RunID: "rev", FromResult: receipts.ResultReview, FromReason: "hash-conflict"}
			p := &Plan{SHA256: c.SHA256, SourceID: c.ID, Kind: "card", Action: "update-card", Target: "memory/cards/c.md", Before: qSum("old"), After: qSum("new"), Content: []byte("new")}
			if err := l.StartDecision(ctx, d, p, nil); err != nil || d.State != DecisionStarted || d.PlanID != p.ID || p.ID == 0 {
				t.Fatalf("start: %v %+v %+v", err, d, p)
			}
			if open, _ := l.OpenPlans(ctx); len(open) != 1 {
				t.Fatalf("%d open plans", len(open))
			}
			o := Outcome{Result: result, Action: "update-card", Target: "memory/cards/c.md", Before: qSum("old"), After: qSum("new")}
			if result == receipts.ResultReview {
				o = Outcome{Result: result, Reason: "hash-conflict", Action: "update-card", Target: "memory/handoff-inbox/c.md", Before: qSum("other")}
			}
			if err := l.Finish(ctx, "rev", c, o, p.ID); err != nil {
				t.Fatal(err)
			}
			var state, dres string
			l.db.QueryRow(`SELECT state, result FROM decisions WHERE id = ?`, d.ID).Scan(&state, &dres)
			var hres, hbefore, srcRes, srcRun string
			l.db.QueryRow(`SELECT result, before_sha256 FROM handoffs WHERE sha256 = ?`, c.SHA256).Scan(&hres, &hbefore)
			l.db.QueryRow(`SELECT result, ingest_run FROM sources WHERE id = ?`, c.ID).Scan(&srcRes, &srcRun)
			want := DecisionDone
			if result == receipts.ResultReview {
				want = DecisionAbandoned
			}
			if state != want || dres != result || hres != result || hbefore != o.Before || srcRes != result || srcRun != "run-2" {
				t.Errorf("decision %s/%s, handoff %s %.12s, source %s by %s", state, dres, hres, hbefore, srcRes, srcRun)
			}
			// Waiting again after an abandoned accept; not after a done one.
			err := l.StartDecision(ctx, &Decision{SHA256: c.SHA256, Decision: DecisionRejected, By: "me", RunID: "r2"}, nil, nil)
			if (result == receipts.ResultReview) != (err == nil) {
				t.Errorf("a decision after the %s one: %v", state, err)
			}
		})
	}
}

// TestStartDecisionEdit: an edit records the edited handoff as a new
// source, archived (never on a host), with the plan and the decision.
func TestStartDecisionEdit(t *testing.T) {
	l, rows := dLedger(t)
	ctx := context.Background()
	c := rows["c.md"]
	newSHA := qSum("edited")
	d := &Decision{SHA256: c.SHA256, Decision: DecisionEdited, By: "me", RunID: "rev", NewSHA256: newSHA}
	p := &Plan{SHA256: newSHA, Kind: "document", Action: "no-card", Target: "TOOLS.md", After: qSum("e"), Content: []byte("e")}
	edited := &claim.Source{Host: c.Host, Inbox: c.Inbox, Name: c.Name, SHA256: newSHA, Size: 6}
	if err := l.StartDecision(ctx, d, p, edited); err != nil {
		t.Fatal(err)
	}
	var acked int
	var run string
	if err := l.db.QueryRow(`SELECT acked, stored_run FROM sources WHERE id = ?`, p.SourceID).Scan(&acked, &run); err != nil || acked != 1 || run != "rev" {
		t.Errorf("edited source: %v acked %d run %s", err, acked, run)
	}
	if err := l.Finish(ctx, "rev", SourceRow{ID: p.SourceID, SHA256: newSHA, Name: c.Name}, Outcome{Result: receipts.ResultRouted, Target: "TOOLS.md", After: qSum("e")}, p.ID); err != nil {
		t.Fatal(err)
	}
	ds, err := l.DecisionsFor(ctx, []string{newSHA})
	if err != nil || len(ds) != 1 || ds[0].State != DecisionDone || ds[0].NewSHA256 != newSHA {
		t.Errorf("decisions naming the edit: %+v %v", ds, err)
	}
	var hres string
	l.db.QueryRow(`SELECT result FROM handoffs WHERE sha256 = ?`, newSHA).Scan(&hres)
	if hres != receipts.ResultRouted {
		t.Errorf("the edit's own result %q", hres)
	}
}

// TestRecentByHost: each host's last sources with a result of their own,
// the last stored first, plain duplicates left out.
func TestRecentByHost(t *testing.T) {
	l, _ := dLedger(t)
	ctx := context.Background()
	var srcs []claim.Source
	for i := range 7 {
		srcs = append(srcs, claim.Source{Host: "bad", Inbox: "/i", Name: fmt.Sprintf("m%d.md", i), SHA256: qSum(fmt.Sprint("m", i)), Size: 1})
	}
	if _, err := l.RecordSources(ctx, "r", srcs); err != nil {
		t.Fatal(err)
	}
	pending, _ := l.PendingSources(ctx)
	for _, row := range pending {
		if row.Host == "bad" {
			l.Finish(ctx, "r", row, Outcome{Result: receipts.ResultMalformed, Reason: "parse-error"}, 0)
		}
	}
	got, err := l.RecentByHost(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got["bad"]) != 5 || got["bad"][0].SHA256 != qSum("m6") || got["bad"][0].Result != receipts.ResultMalformed {
		t.Errorf("bad: %+v", got["bad"])
	}
	if len(got["desk"]) != 0 { // b.md is a plain duplicate
		t.Errorf("desk: %+v", got["desk"])
	}
	if len(got["laptop"]) != 2 {
		t.Errorf("laptop: %+v", got["laptop"])
	}
}
