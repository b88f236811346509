package ledger

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/receipts"
)

// finishLedger is a ledger holding n stored sources, with a plan for every
// third, and the rows to finish them with: promoted, a duplicate of
// content already ingested (no handoff row of its own), or review (its
// plan abandoned).
func finishLedger(t testing.TB, n int) (*Ledger, []Finished) {
	t.Helper()
	ctx := context.Background()
	l, err := Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	srcs := make([]claim.Source, n)
	for i := range srcs {
		name := fmt.Sprintf("h%05d.md", i)
		srcs[i] = claim.Source{Host: "laptop", Inbox: "/r/.claude/memory-handoffs", Name: name, SHA256: qSum(name), Size: 1}
	}
	if _, err := l.RecordSources(ctx, "run", srcs); err != nil {
		t.Fatal(err)
	}
	rows, err := l.PendingSources(ctx)
	if err != nil || len(rows) != n {
		t.Fatalf("pending: %d, %v", len(rows), err)
	}
	var plans []*Plan
	for i, r := range rows {
		if i%3 == 0 {
			plans = append(plans, &Plan{SHA256: r.SHA256, SourceID: r.ID, Kind: "card", Action: "create",
				Target: "memory/cards/" + r.Name, After: r.SHA256, Content: []byte("card")})
		}
	}
	if err := l.InsertPlans(ctx, "run", plans); err != nil {
		t.Fatal(err)
	}
	fs := make([]Finished, n)
	for i, r := range rows {
		o := Outcome{Result: receipts.ResultPromoted, Action: "create", Target: "memory/cards/" + r.Name, After: r.SHA256}
		switch i % 4 {
		case 1:
			o = Outcome{Result: receipts.ResultDuplicate}
		case 2:
			o = Outcome{Result: receipts.ResultReview, Reason: "hash-conflict"}
		}
		fs[i] = Finished{Src: r, O: o}
		if i%3 == 0 {
			fs[i].PlanID = plans[i/3].ID
		}
	}
	return l, fs
}

// TestFinishAll: a batch's bookkeeping records every source's result, a
// handoff row for each that has its own result and none for a duplicate,
// and each plan's state. Invariant: nothing finished is left pending (to
// be ingested twice), and nothing is recorded for a row not in the batch.
func TestFinishAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 557
	l, fs := finishLedger(t, n+10)
	for i := range fs {
		if i%5 == 0 {
			fs[i].Src.ShaID = 0 // read without its number, as a review decision's source is
		}
	}
	if err := l.FinishAll(ctx, "run2", fs[:n]); err != nil {
		t.Fatal(err)
	}
	// Rows numbered by the source's number and by hash agree.
	if err := l.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	pending, err := l.PendingSources(ctx)
	if err != nil || len(pending) != 10 || pending[0].ID != fs[n].Src.ID {
		t.Fatalf("pending after FinishAll: %d rows, %v; want the 10 not in the batch", len(pending), err)
	}
	for _, f := range fs[:n] {
		var result, reason, run string
		if err := l.db.QueryRowContext(ctx, `SELECT result, reason, ingest_run FROM sources WHERE id = ?`, f.Src.ID).Scan(&result, &reason, &run); err != nil {
			t.Fatal(err)
		}
		if result != f.O.Result || reason != f.O.Reason || run != "run2" {
			t.Fatalf("source %s: %q %q %q, want %q %q run2", f.Src.Name, result, reason, run, f.O.Result, f.O.Reason)
		}
		var hs int
		if err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM handoffs WHERE sha256 = ? AND source_id = ? AND result = ? AND target = ?`,
			f.Src.SHA256, f.Src.ID, f.O.Result, f.O.Target).Scan(&hs); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[f.O.OwnResult()]; hs != want {
			t.Fatalf("source %s (%s): %d handoff rows, want %d", f.Src.Name, f.O.Result, hs, want)
		}
		if f.PlanID != 0 {
			var state string
			if err := l.db.QueryRowContext(ctx, `SELECT state FROM plans WHERE id = ?`, f.PlanID).Scan(&state); err != nil {
				t.Fatal(err)
			}
			want := planDone
			if f.O.Result == receipts.ResultReview {
				want = planAbandoned
			}
			if state != want {
				t.Fatalf("plan of %s: %q, want %q", f.Src.Name, state, want)
			}
		}
	}
	left := 0
	for _, f := range fs[n:] {
		if f.PlanID != 0 {
			left++
		}
	}
	var planned int
	if err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM plans WHERE state = ?`, planPlanned).Scan(&planned); err != nil || planned != left {
		t.Fatalf("%d plans still planned (%v), want the %d of the rows not in the batch", planned, err, left)
	}
}

// BenchmarkFinishAll: one ingest batch's bookkeeping, 1,024 rows.
func BenchmarkFinishAll(b *testing.B) {
	ctx := runContext(b)
	for b.Loop() {
		b.StopTimer()
		l, fs := finishLedger(b, 1024)
		b.StartTimer()
		if err := l.FinishAll(ctx, "run2", fs); err != nil {
			b.Fatal(err)
		}
	}
}
