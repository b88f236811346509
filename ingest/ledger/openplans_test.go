package ledger

import (
	"context"
	"strings"
	"testing"
)

// The questions asked about open plans (OpenPlans, InterruptedPlans,
// PrunableSpool) are answered from plans_open, not by reading every plan
// the ledger ever recorded, and still answer right.
func TestOpenPlansUseTheirIndex(t *testing.T) {
	ctx := context.Background()
	l, fs := finishLedger(t, 30)
	// Finish the first half: their plans are done or abandoned, the rest
	// stay open.
	if err := l.FinishAll(ctx, "run", fs[:15]); err != nil {
		t.Fatal(err)
	}
	var wantOpen []int64
	for _, f := range fs[15:] {
		if f.PlanID != 0 {
			wantOpen = append(wantOpen, f.PlanID)
		}
	}
	open, err := l.OpenPlans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, p := range open {
		got = append(got, p.ID)
	}
	if len(got) != len(wantOpen) || len(got) == 0 {
		t.Fatalf("open plans %v, want %v", got, wantOpen)
	}
	for i := range got {
		if got[i] != wantOpen[i] {
			t.Fatalf("open plans %v, want %v", got, wantOpen)
		}
	}
	if n, err := l.InterruptedPlans(ctx); err != nil || n != len(wantOpen) {
		t.Fatalf("interrupted plans: %d, %v; want %d", n, err, len(wantOpen))
	}

	for _, q := range []string{
		`SELECT id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, backup, replans
			FROM plans WHERE state = 'planned' ORDER BY id`,
		`SELECT count(*) FROM plans WHERE state = 'planned'`,
		`SELECT sha256 FROM plans WHERE state = 'planned'`,
	} {
		plan := queryPlan(t, l, q)
		if !strings.Contains(strings.Join(plan, "; "), "plans_open") {
			t.Errorf("%s\nis answered by %q, not from the index of open plans", q, plan)
		}
	}
}

// openPlansMigration is plans_open's number in migrations.
const openPlansMigration = 8

// A ledger of the schema before it gets the index on its next open.
func TestOpenPlansMigration(t *testing.T) {
	l := openBefore(t, openPlansMigration)
	defer l.Close()
	var n, version int
	if err := l.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'plans_open'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("plans_open after the migration: %d, %v", n, err)
	}
	if err := l.db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != len(migrations) || version < openPlansMigration {
		t.Fatalf("user_version %d (%v), want %d", version, err, len(migrations))
	}
}
