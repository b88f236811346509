package where_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/internal/where"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/receipts"
)

// whEnv is testenv's Env with the syncs the where tests make.
type whEnv struct{ *testenv.Env }

func newDrEnv(t *testing.T, extra string) *whEnv { return &whEnv{testenv.NewEnv(t, extra)} }

func (e *whEnv) sync() *receipts.Receipt {
	e.T.Helper()
	r, err := handoff.Sync(context.Background(), handoff.Options{Manifest: e.M})
	if err != nil {
		e.T.Fatalf("Sync: %v", err)
	}
	return r
}

func drWhere(t *testing.T, ws, q string) []where.Match {
	t.Helper()
	ms, err := where.Lookup(context.Background(), ws, q)
	if err != nil {
		t.Fatalf("Where(%q): %v", q, err)
	}
	return ms
}

func drSha12(s string) string { return testenv.Sum(s)[:12] }

// TestWhere: every way of naming a handoff finds it with where it came
// from, what became of it and in which run; a duplicate names the copy
// that was applied; a rejected file is found by name; and looking things up
// writes nothing.
func TestWhere(t *testing.T) {
	e := newDrEnv(t, "")
	card := testenv.Card("go-errors.md", "wrap errors")
	junk := "not a handoff\n"
	review := testenv.Doc("../outside.md", "- nope")
	e.Put(e.Inbox, "card.md", card)
	e.Put(e.Inbox, "junk.md", junk)
	e.Put(e.Inbox, "rev.md", review)
	e.Put(e.Inbox2, "dup.md", card) // same bytes, found after card.md
	if err := os.Symlink(filepath.Join(e.Dir, "writers.yaml"), filepath.Join(e.Inbox, "link.md")); err != nil {
		t.Fatal(err)
	}
	r := e.sync()
	if r.Counts.Promoted != 1 || r.Counts.Duplicate != 1 || r.Counts.Rejected != 1 || r.Counts.Malformed != 1 || r.Counts.Review != 1 {
		t.Fatalf("fixture sync: %+v", r.Counts)
	}
	before := testenv.Tree(t, e.Dir)
	defer func() { testenv.SameTree(t, "where", before, testenv.Tree(t, e.Dir)) }()

	cardSum := testenv.Sum(card)
	archived := "card." + drSha12(card) + ".md"
	for _, q := range []string{"card.md", "card", archived, "processed/" + archived, filepath.Join(e.Inbox, "card.md"), "canonical:" + filepath.Join(e.Inbox, "card.md")} {
		ms := drWhere(t, e.WS, q)
		if len(ms) != 1 {
			t.Fatalf("%q: %d matches, want 1: %+v", q, len(ms), ms)
		}
		m := ms[0]
		cardOnDisk, err := os.ReadFile(filepath.Join(e.WS, "memory/cards/go-errors.md"))
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != where.Stored || m.Host != "canonical" || m.Inbox != e.Inbox || m.Name != "card.md" ||
			m.Path != filepath.Join(e.Inbox, "card.md") || m.SHA256 != cardSum || m.Size != int64(len(card)) ||
			m.Result != "promoted" || m.Reason != "" || m.Action != "create-card" || m.Target != "memory/cards/go-errors.md" ||
			m.BeforeSHA256 != "" || m.AfterSHA256 != testenv.Sum(string(cardOnDisk)) ||
			m.ArchivedAs != "processed/"+archived || !m.Archived ||
			m.StoredRun != r.RunID || m.IngestRun != r.RunID || m.StoredAt.IsZero() || m.IngestedAt.IsZero() || m.AppliedFrom != nil {
			t.Errorf("%q: %+v", q, m)
		}
	}

	// A hash prefix finds both copies, the applied one first.
	for _, q := range []string{cardSum[:4], strings.ToUpper(cardSum[:9]), cardSum} {
		ms := drWhere(t, e.WS, q)
		if len(ms) != 2 || ms[0].Name != "card.md" || ms[1].Name != "dup.md" {
			t.Fatalf("%q: %+v", q, ms)
		}
	}
	if ms := drWhere(t, e.WS, cardSum[:3]); len(ms) != 0 {
		t.Errorf("3 hex digits matched by hash: %+v", ms)
	}

	dup := drWhere(t, e.WS, "dup.md")
	if len(dup) != 1 {
		t.Fatalf("dup.md: %+v", dup)
	}
	d := dup[0]
	if d.Result != "duplicate" || d.Inbox != e.Inbox2 || d.AppliedFrom == nil || d.AppliedFrom.Path != filepath.Join(e.Inbox, "card.md") ||
		d.AppliedFrom.Result != "promoted" || d.Target != "memory/cards/go-errors.md" || d.ArchivedAs != "processed/dup."+drSha12(card)+".md" {
		t.Errorf("duplicate: %+v applied from %+v", d, d.AppliedFrom)
	}

	j := drWhere(t, e.WS, "junk.md")
	if len(j) != 1 || j[0].Result != "malformed" || j[0].Reason != "parse-error" || j[0].ArchivedAs != "malformed/junk."+drSha12(junk)+".md" || j[0].Target != "" {
		t.Errorf("malformed: %+v", j)
	}
	rv := drWhere(t, e.WS, "rev")
	if len(rv) != 1 || rv[0].Result != "review" || rv[0].Reason != "unsafe-target" || rv[0].Target != ".handoff/review/rev."+drSha12(review)+".md" {
		t.Errorf("review: %+v", rv)
	}

	l := drWhere(t, e.WS, "link.md")
	if len(l) != 1 || l[0].Kind != where.Rejected || l[0].Result != "rejected" || l[0].Reason != "symlink" ||
		l[0].ArchivedAs != "malformed/link.md" || l[0].IngestRun != r.RunID || l[0].SHA256 != "" {
		t.Errorf("rejected: %+v", l)
	}

	if ms := drWhere(t, e.WS, "nope.md"); len(ms) != 0 {
		t.Errorf("nope.md: %+v", ms)
	}
	if _, err := where.Lookup(context.Background(), e.WS, " "); err == nil {
		t.Error("an empty name was accepted")
	}
}

// TestWhereSeveralRuns: one name written twice, with different bytes,
// pulled by two runs, gives two matches in the order they were stored,
// each with its own run and result: the second is a revision of the
// first, which was applied, so it waits in review (docs/design.md,
// "Revisions").
func TestWhereSeveralRuns(t *testing.T) {
	e := newDrEnv(t, "")
	e.Put(e.Inbox, "note.md", testenv.Doc("TOOLS.md", "- first"))
	r1 := e.sync()
	e.Put(e.Inbox, "note.md", testenv.Doc("TOOLS.md", "- second"))
	r2 := e.sync()
	ms := drWhere(t, e.WS, "note.md")
	if len(ms) != 2 {
		t.Fatalf("%d matches: %+v", len(ms), ms)
	}
	for i, r := range []*receipts.Receipt{r1, r2} {
		if ms[i].StoredRun != r.RunID || ms[i].IngestRun != r.RunID {
			t.Errorf("match %d: %+v, want run %s", i, ms[i], r.RunID)
		}
	}
	if ms[0].Result != "routed" || ms[0].Target != "TOOLS.md" {
		t.Errorf("first version: %s/%s to %s; want routed to TOOLS.md", ms[0].Result, ms[0].Reason, ms[0].Target)
	}
	if ms[1].Result != "review" || ms[1].Reason != "revised" {
		t.Errorf("second version: %s/%s; want review/revised", ms[1].Result, ms[1].Reason)
	}
	if !ms[0].StoredAt.Before(ms[1].StoredAt) {
		t.Errorf("not oldest first: %v then %v", ms[0].StoredAt, ms[1].StoredAt)
	}
}

// TestWhereNoLedger: a directory that is no workspace is a
// *workspace.MissingError (not an empty workspace), one whose ledger is
// gone is ErrNoLedger, and where creates nothing in either.
func TestWhereNoLedger(t *testing.T) {
	e := testenv.NewEnvNoWorkspace(t, "")
	var missing *workspace.MissingError
	if _, err := where.Lookup(context.Background(), e.WS, "x.md"); !errors.As(err, &missing) || missing.Exists {
		t.Fatalf("no workspace: %v, want a MissingError", err)
	}
	if _, err := os.Stat(e.WS); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("where created the workspace: %v", err)
	}
	os.MkdirAll(filepath.Join(e.WS, ".handoff"), 0o755)
	before := testenv.Tree(t, e.WS)
	if _, err := where.Lookup(context.Background(), e.WS, "x.md"); !errors.As(err, &missing) || !missing.Exists {
		t.Fatalf("no identity: %v, want a MissingError", err)
	}
	testenv.SameTree(t, "where", before, testenv.Tree(t, e.WS))

	if _, _, err := setup.Init(context.Background(), e.WS, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.WS, ".handoff/ledger.db")); err != nil {
		t.Fatal(err)
	}
	before = testenv.Tree(t, e.WS)
	if _, err := where.Lookup(context.Background(), e.WS, "x.md"); !errors.Is(err, where.ErrNoLedger) {
		t.Fatalf("no ledger: %v, want ErrNoLedger", err)
	}
	testenv.SameTree(t, "where", before, testenv.Tree(t, e.WS))
}

// TestWhereDuringRun: while a run holds the lock, where still reads the
// ledger (live, through SQLite's WAL protocol).
func TestWhereDuringRun(t *testing.T) {
	e := newDrEnv(t, "")
	e.Put(e.Inbox, "note.md", testenv.Doc("TOOLS.md", "- first"))
	e.sync()
	fl := flock.New(filepath.Join(e.WS, ".handoff/lock"))
	if ok, err := fl.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	defer fl.Unlock()
	if ms := drWhere(t, e.WS, "note.md"); len(ms) != 1 || ms[0].Result != "routed" {
		t.Fatalf("during a run: %+v", ms)
	}
}

// TestWhereTarget: a workspace path finds the handoffs whose result names
// it (a card, a document, a review draft), oldest first, marked ByTarget;
// a path outside the workspace finds nothing.
func TestWhereTarget(t *testing.T) {
	e := newDrEnv(t, "")
	doc1 := testenv.Doc("TOOLS.md", "- one")
	doc2 := testenv.Doc("TOOLS.md", "- two")
	rev := testenv.Doc("../outside.md", "- nope")
	e.Put(e.Inbox, "d1.md", doc1)
	e.Put(e.Inbox, "card.md", testenv.Card("x.md", "body"))
	e.Put(e.Inbox, "rev.md", rev)
	e.sync()
	e.Put(e.Inbox2, "d2.md", doc2)
	e.sync()

	for _, q := range []string{"TOOLS.md", "./TOOLS.md", filepath.Join(e.WS, "TOOLS.md")} {
		ms := drWhere(t, e.WS, q)
		if len(ms) != 2 || ms[0].Name != "d1.md" || ms[1].Name != "d2.md" {
			t.Fatalf("%q: %+v, want d1.md then d2.md", q, ms)
		}
		for _, m := range ms {
			if m.MatchedBy != where.ByTarget || m.Target != "TOOLS.md" || m.Result != "routed" || m.AfterSHA256 == "" {
				t.Errorf("%q: %+v", q, m)
			}
		}
		if ms[1].BeforeSHA256 != ms[0].AfterSHA256 {
			t.Errorf("%q: the second append's before %s is not the first's after %s", q, ms[1].BeforeSHA256, ms[0].AfterSHA256)
		}
	}
	if ms := drWhere(t, e.WS, "memory/cards/x.md"); len(ms) != 1 || ms[0].Name != "card.md" || ms[0].BeforeSHA256 != "" {
		t.Fatalf("card: %+v", ms)
	}
	draft := ".handoff/review/rev." + drSha12(rev) + ".md"
	if ms := drWhere(t, e.WS, draft); len(ms) != 1 || ms[0].Name != "rev.md" || ms[0].Result != "review" || ms[0].Reason != "unsafe-target" {
		t.Fatalf("review draft: %+v", ms)
	}
	if ms := drWhere(t, e.WS, "d1.md"); len(ms) != 1 || ms[0].MatchedBy != where.ByName {
		t.Fatalf("by name: %+v", ms)
	}
	for _, q := range []string{"../TOOLS.md", filepath.Join(e.Dir, "TOOLS.md"), "USER.md"} {
		if ms := drWhere(t, e.WS, q); len(ms) != 0 {
			t.Errorf("%q: %+v, want nothing", q, ms)
		}
	}
}

// TestWhereThreads: where follows Continues both ways: a handoff names the
// one it continues (by file name, or by the start of its hash), and the
// one continued names those that continue it; a handoff stored before
// threads were recorded (no thread row) is read from the spool instead.
func TestWhereThreads(t *testing.T) {
	e := newDrEnv(t, "")
	first := testenv.Doc("TOOLS.md", "- first")
	e.Put(e.Inbox, "2026-12-01-first.md", first)
	e.sync()
	second := testenv.Handoff("Type", "workflow", "Title", "t", "Summary", "s", "Recommended memory action", "no-card",
		"Target document", "TOOLS.md", "Suggested document content", "- second", "Continues", "2026-12-01-first")
	third := testenv.Handoff("Type", "workflow", "Title", "t", "Summary", "s", "Recommended memory action", "no-card",
		"Target document", "TOOLS.md", "Suggested document content", "- third", "Continues", drSha12(second))
	e.Put(e.Inbox2, "2026-12-02-second.md", second)
	e.Put(e.Inbox, "2026-12-03-third.md", third)
	e.sync()

	ms := drWhere(t, e.WS, "2026-12-01-first.md")
	if len(ms) != 1 || ms[0].Continues != nil || len(ms[0].ContinuedBy) != 1 || ms[0].ContinuedBy[0].Sources[0].Name != "2026-12-02-second.md" {
		t.Fatalf("first: %+v", ms)
	}
	ms = drWhere(t, e.WS, "2026-12-02-second.md")
	if c := ms[0].Continues; c == nil || c.Key != "2026-12-01-first.md" || len(c.Sources) != 1 || c.Sources[0].Name != "2026-12-01-first.md" {
		t.Fatalf("second continues %+v", ms[0].Continues)
	}
	if by := ms[0].ContinuedBy; len(by) != 1 || by[0].Key != drSha12(second) || by[0].Sources[0].Name != "2026-12-03-third.md" {
		t.Fatalf("second continued by %+v", by)
	}
	// Without its thread row, the spool says what third continues.
	l, err := ledger.Open(filepath.Join(e.WS, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DB().Exec(`DELETE FROM threads WHERE sha256 = ?`, testenv.Sum(third)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	ms = drWhere(t, e.WS, "2026-12-03-third.md")
	if c := ms[0].Continues; c == nil || len(c.Sources) != 1 || c.Sources[0].Name != "2026-12-02-second.md" {
		t.Fatalf("third continues %+v", ms[0].Continues)
	}
}
