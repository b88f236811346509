package ledger

import (
	"context"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
)

// A ledger made before migration 14 keeps every source, handoff and plan
// row through the rebuild of sources, its references all still find
// their rows, and foreign keys are enforced again afterwards on every
// connection. Invariant: no handoff lost by an upgrade.
func TestReturnsMigration(t *testing.T) {
	path, db := ledgerAt(t, 13)
	for _, q := range []string{
		`INSERT INTO shas (id, sha256) VALUES (1, 'aa'), (2, 'bb')`,
		`INSERT INTO sources (id, sha256, sha_id, size, host, inbox, name, stored_at, stored_run, result, acked)
			VALUES (1, 'aa', 1, 3, 'h', '/in', 'c.md', 't', 'r', 'promoted', 1), (2, 'bb', 2, 3, 'h', '/in', 'c.md', 't', 'r', 'promoted', 0)`,
		`INSERT INTO handoffs (id, sha256, source_id, result, run_id, ingested_at) VALUES (1, 'aa', 1, 'promoted', 'r', 't'), (2, 'bb', 2, 'promoted', 'r', 't')`,
		`INSERT INTO plans (sha_id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, state, run_id, created_at)
			VALUES (2, 'bb', 2, 'card', 'create-card', 'memory/cards/c.md', '', 'x', X'00', 'done', 'r', 't')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var n int
	l.db.QueryRow(`SELECT count(*) FROM sources s JOIN handoffs h ON h.source_id = s.id`).Scan(&n)
	if n != 2 {
		t.Errorf("%d handoffs find their source after the rebuild; want 2", n)
	}
	var unacked int
	l.db.QueryRow(`SELECT count(*) FROM sources WHERE acked = 0`).Scan(&unacked)
	if unacked != 1 {
		t.Errorf("%d unacknowledged sources; want 1 (the archive still to confirm)", unacked)
	}
	// Every pooled connection enforces foreign keys again.
	for i := range 3 {
		_, err := l.db.Exec(`INSERT INTO handoffs (id, sha256, source_id, result, run_id, ingested_at) VALUES (?, 'zz', 99, 'x', 'r', 't')`, 10+i)
		if err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
			t.Fatalf("a handoff naming no source was written (%v); foreign keys are off", err)
		}
	}
	if err := l.IntegrityCheck(context.Background()); err != nil {
		t.Error(err)
	}
}

// A name that returns to earlier bytes is recorded again; a copy listed
// again while the newest of its name holds the same bytes is not.
// Invariant: nothing applied twice (a retried pull records one source),
// and a return is not lost as a duplicate.
func TestRecordReturns(t *testing.T) {
	l := openTemp(t)
	ctx := context.Background()
	src := func(v string) claim.Source {
		return claim.Source{Host: "h", Inbox: "/in", Name: "c.md", SHA256: spool.Hash([]byte(v)), Size: 1}
	}
	for i, step := range []struct {
		sha   string
		added int
	}{{"a", 1}, {"a", 0}, {"b", 1}, {"b", 0}, {"a", 1}, {"a", 0}, {"b", 1}} {
		s := src(step.sha)
		added, err := l.StoreSources(ctx, "r", []claim.Source{s}, map[string][]byte{s.SHA256: []byte(step.sha)})
		if err != nil {
			t.Fatal(err)
		}
		if added != step.added {
			t.Errorf("step %d (%s): %d recorded; want %d", i, step.sha, added, step.added)
		}
	}
	var n int
	l.db.QueryRow(`SELECT count(*) FROM sources`).Scan(&n)
	if n != 4 {
		t.Errorf("%d sources; want 4 (a, b, a, b)", n)
	}
	// Archiving a content acknowledges each of its sources under the name.
	if err := l.MarkArchived(ctx, []claim.Source{src("a")}); err != nil {
		t.Fatal(err)
	}
	l.db.QueryRow(`SELECT count(*) FROM sources WHERE acked = 1`).Scan(&n)
	if n != 2 {
		t.Errorf("%d sources acknowledged; want both of a", n)
	}
}
