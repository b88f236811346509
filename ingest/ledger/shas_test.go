package ledger

import (
	"context"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
)

// shasMigration is migration 10's number: contents numbered.
const shasMigration = 10

// A ledger of version 9 with sources (two copies of one content), stored
// bytes (one of a content no source holds, as an edit leaves for a
// moment), results and plans keeps every row through migration 10, each
// under its content's number, and reads as before. Invariant: nothing
// recorded is lost by the upgrade, and a content keeps one result and at
// most one plan (none applied twice).
func TestSHAsMigration(t *testing.T) {
	ctx := context.Background()
	path, db := ledgerAt(t, shasMigration-1)
	a, b, c := []byte("# Memory Handoff\na\n"), []byte("# Memory Handoff\nb\n"), []byte("# Memory Handoff\nc\n")
	sa, sb, sc := spool.Hash(a), spool.Hash(b), spool.Hash(c)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO sources (id, sha256, size, host, inbox, name, acked, stored_at, stored_run, result) VALUES
			(1, ?, 19, 'h', '/in', 'a.md', 1, 't', 'r1', 'routed'),
			(2, ?, 19, 'h', '/in', 'b.md', 1, 't', 'r1', 'review'),
			(3, ?, 19, 'h', '/in2', 'a.md', 0, 't', 'r2', '')`, []any{sa, sb, sa}},
		{`INSERT INTO contents (sha256, data) VALUES (?, ?), (?, ?), (?, ?)`, []any{sc, c, sa, a, sb, b}},
		{`INSERT INTO handoffs (sha256, source_id, result, run_id, ingested_at) VALUES (?, 1, 'routed', 'r1', 't'), (?, 2, 'review', 'r1', 't')`, []any{sa, sb}},
		{`INSERT INTO plans (id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, state, run_id, created_at) VALUES
			(7, ?, 1, 'document', 'no-card', 'TOOLS.md', '', 'x', 'c', 'done', 'r1', 't'),
			(9, ?, 2, 'document', 'no-card', 'TOOLS.md', 'x', 'y', 'c', 'planned', 'r1', 't')`, []any{sa, sb}},
	} {
		if _, err := db.Exec(q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	var shas, sources, contents, handoffs int
	if err := l.db.QueryRow(`SELECT (SELECT count(*) FROM shas), (SELECT count(DISTINCT sha_id) FROM sources WHERE sha_id > 0),
		(SELECT count(*) FROM contents), (SELECT count(*) FROM handoffs)`).Scan(&shas, &sources, &contents, &handoffs); err != nil {
		t.Fatal(err)
	}
	if shas != 3 || sources != 2 || contents != 3 || handoffs != 2 {
		t.Fatalf("after the migration: %d numbered contents, %d numbers in sources, %d contents, %d results; want 3, 2, 3, 2", shas, sources, contents, handoffs)
	}
	// Numbered in the order the sources were stored.
	var first string
	if err := l.db.QueryRow(`SELECT sha256 FROM shas WHERE id = 1`).Scan(&first); err != nil || first != sa {
		t.Errorf("content number 1 is %.12s (%v), want the first source's %.12s", first, err, sa)
	}

	st := l.Store(nil)
	defer st.Close()
	for sha, want := range map[string][]byte{sa: a, sb: b, sc: c} {
		if got, err := st.Get(sha); err != nil || string(got) != string(want) {
			t.Errorf("Get %.12s: %q, %v", sha, got, err)
		}
	}
	known, err := l.KnownHandoffs(ctx, []string{sa, sb, sc})
	if err != nil || !known[sa] || !known[sb] || known[sc] {
		t.Errorf("KnownHandoffs: %v, %v; want %.12s and %.12s", known, err, sa, sb)
	}
	open, err := l.OpenPlans(ctx)
	if err != nil || len(open) != 1 || open[0].ID != 9 || open[0].SHA256 != sb {
		t.Errorf("open plans after the migration: %+v, %v; want plan 9 of %.12s", open, err, sb)
	}
	// A content keeps at most one plan: a second for a is refused.
	if err := l.InsertPlans(ctx, "r3", []*Plan{{SHA256: sa, SourceID: 3, Kind: "document", Action: "no-card", Target: "TOOLS.md", After: "z", Content: []byte("c")}}); err == nil {
		t.Error("a second plan for a content with one was recorded")
	}
	v := &View{l: l, cleanup: func() {}}
	recs, err := v.FindSources(ctx, sa[:12])
	if err != nil || len(recs) != 2 || recs[0].Content == nil || recs[0].Content.SourceID != 1 || recs[1].Content == nil {
		t.Fatalf("FindSources by prefix: %+v, %v; want both copies of a, with source 1's result", recs, err)
	}
	recs, err = v.FindSources(ctx, "b.md")
	if err != nil || len(recs) != 1 || recs[0].Content == nil || recs[0].Content.Result != "review" {
		t.Fatalf("FindSources by name: %+v, %v", recs, err)
	}
}

// A row whose sha256 is not its number's fails IntegrityCheck, so doctor
// notices a ledger whose keys and hashes disagree.
func TestIntegrityCheckSHAs(t *testing.T) {
	ctx := context.Background()
	l, err := Open(t.TempDir() + "/ledger.db")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := []byte("# Memory Handoff\nx\n")
	if err := l.PutContents(ctx, map[string][]byte{spool.Hash(data): data}); err != nil {
		t.Fatal(err)
	}
	if err := l.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(`UPDATE contents SET sha256 = ?`, spool.Hash([]byte("other"))); err != nil {
		t.Fatal(err)
	}
	if err := l.IntegrityCheck(ctx); err == nil {
		t.Error("a content row under another content's number passed the integrity check")
	}
}

// An empty handoff (a 0-byte file, stored and then decided malformed)
// keeps its bytes whether they come as nil or as an empty slice: NULL
// would be skipped by INSERT OR IGNORE without a word. Invariant: a
// recorded source's bytes are stored.
func TestStoreEmptyContent(t *testing.T) {
	ctx := context.Background()
	for _, data := range [][]byte{nil, {}} {
		l, err := Open(t.TempDir() + "/ledger.db")
		if err != nil {
			t.Fatal(err)
		}
		sha := spool.Hash(nil)
		src := claim.Source{Host: "h", Inbox: "/in", Name: "empty.md", SHA256: sha}
		if _, err := l.StoreSources(ctx, "run", []claim.Source{src}, map[string][]byte{sha: data}); err != nil {
			t.Fatal(err)
		}
		l.fresh.drop([]string{sha}) // read the table, not this process's copy
		st := l.Store(nil)
		got, err := st.Get(sha)
		if err != nil || len(got) != 0 {
			t.Errorf("Get of an empty content stored as %#v: %#v, %v", data, got, err)
		}
		st.Close()
		l.Close()
	}
}

// A content gets one number however often and wherever it is stored: a
// second host's copy in a later transaction, and two names for it in one
// transaction, are numbered as the first was (the insert adds no row
// then, and the number is looked up). Invariant: every source names its
// content's number, so nothing stored is lost to a lookup.
func TestNumbersOfContentSeenBefore(t *testing.T) {
	ctx := context.Background()
	l := openTemp(t)
	data := []byte("# Memory Handoff\n")
	sha := spool.Hash(data)
	other := []byte("# Memory Handoff\nother\n")
	for _, srcs := range [][]claim.Source{
		{{Host: "a", Inbox: "/in", Name: "x.md", SHA256: sha}},
		{{Host: "b", Inbox: "/in", Name: "x.md", SHA256: sha}, {Host: "b", Inbox: "/in", Name: "y.md", SHA256: sha},
			{Host: "b", Inbox: "/in", Name: "z.md", SHA256: spool.Hash(other)}},
	} {
		if _, err := l.StoreSources(ctx, "run", srcs, map[string][]byte{sha: data, spool.Hash(other): other}); err != nil {
			t.Fatal(err)
		}
	}
	var shas, ids int
	if err := l.db.QueryRow(`SELECT count(*) FROM shas`).Scan(&shas); err != nil || shas != 2 {
		t.Fatalf("%d numbers (%v), want 2", shas, err)
	}
	if err := l.db.QueryRow(`SELECT count(DISTINCT sha_id) FROM sources WHERE sha256 = ?`, sha).Scan(&ids); err != nil || ids != 1 {
		t.Fatalf("the content's three sources name %d numbers (%v), want 1", ids, err)
	}
	if err := l.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}
