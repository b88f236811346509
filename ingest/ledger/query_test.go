package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/receipts"
)

func qSum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// qDirState maps every name in dir to its size and bytes' hash, so that a
// test can assert that nothing was created, removed or changed there.
func qDirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = qSum(string(b))
	}
	return out
}

func qSameDir(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("%s: directory changed from %v to %v", what, before, after)
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("%s: %s changed", what, k)
		}
	}
}

// qLedger builds a ledger holding: a promoted source a.md, a duplicate copy
// of it b.md on another host, a review source c.md, a source d.md not yet
// ingested, and a rejected big.md. It returns the ledger's path and the
// sources by name; the ledger is closed (checkpointed, no -wal left).
func qLedger(t *testing.T) (string, map[string]claim.Source) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	src := func(host, name, content string) claim.Source {
		sha := qSum(content)
		return claim.Source{Host: host, Inbox: "/home/me/app/.claude/memory-handoffs", Name: name, SHA256: sha,
			Size: int64(len(content)), ArchivedAs: "processed/" + claim.ArchiveName(name, sha), Parses: true}
	}
	srcs := map[string]claim.Source{
		"a.md": src("laptop", "a.md", "content A"),
		"b.md": src("desk", "b.md", "content A"),
		"c.md": src("laptop", "c.md", "content C"),
		"d.md": src("laptop", "d.md", "content D"),
	}
	for _, name := range []string{"a.md", "b.md", "c.md", "d.md"} {
		if _, err := l.RecordSources(ctx, "run-1", []claim.Source{srcs[name]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.MarkArchived(ctx, []claim.Source{srcs["a.md"], srcs["b.md"], srcs["c.md"]}); err != nil {
		t.Fatal(err)
	}
	pending, err := l.PendingSources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range pending {
		var o Outcome
		switch row.Name {
		case "a.md":
			o = Outcome{Result: receipts.ResultPromoted, Action: "create-card", Target: "memory/cards/a.md", After: qSum("card")}
		case "b.md":
			o = Outcome{Result: receipts.ResultDuplicate}
		case "c.md":
			o = Outcome{Result: receipts.ResultReview, Reason: "hash-conflict", Target: layout.ReviewDir + "/c." + row.SHA256[:12] + ".md"}
		default:
			continue
		}
		if err := l.Finish(ctx, "run-2", row, o, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.RecordReject(ctx, "run-2", claim.Item{Inbox: "/home/me/app/.claude/memory-handoffs", Name: "big.md", Size: 5 << 20,
		Result: claim.ResultRejected, Reason: claim.ReasonOversize, ArchivedAs: "malformed/big.md"}, "laptop"); err != nil {
		t.Fatal(err)
	}
	return path, srcs
}

func qNames(rs []SourceRecord) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Host+":"+r.Name)
	}
	return out
}

// TestFindSources: every way `handoff where` names a handoff finds exactly
// the sources it should, and each carries what became of its content.
func TestFindSources(t *testing.T) {
	path, srcs := qLedger(t)
	v, err := OpenReadOnly(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ctx := context.Background()
	a := srcs["a.md"]
	tests := []struct {
		q    string
		want []string
	}{
		{"a.md", []string{"laptop:a.md"}},
		{"a", []string{"laptop:a.md"}},
		{claim.ArchiveName("a.md", a.SHA256), []string{"laptop:a.md"}},
		{a.ArchivedAs, []string{"laptop:a.md"}},
		{a.Inbox + "/a.md", []string{"laptop:a.md"}},
		{"laptop:" + a.Inbox + "/a.md", []string{"laptop:a.md"}},
		{"desk:" + a.Inbox + "/a.md", nil},
		{a.SHA256[:4], []string{"laptop:a.md", "desk:b.md"}},
		{strings.ToUpper(a.SHA256[:10]), []string{"laptop:a.md", "desk:b.md"}},
		{a.SHA256, []string{"laptop:a.md", "desk:b.md"}},
		{a.SHA256[:3], nil}, // too short to be a hash prefix
		{"nope.md", nil},
		{"%", nil}, // no LIKE anywhere: wildcards match nothing
		{"d.md", []string{"laptop:d.md"}},
	}
	for _, tt := range tests {
		got, err := v.FindSources(ctx, tt.q)
		if err != nil {
			t.Fatalf("%q: %v", tt.q, err)
		}
		if !slices.Equal(qNames(got), tt.want) {
			t.Errorf("FindSources(%q) = %v, want %v", tt.q, qNames(got), tt.want)
		}
	}

	got, _ := v.FindSources(ctx, "b.md")
	if len(got) != 1 {
		t.Fatalf("b.md: %d matches", len(got))
	}
	b := got[0]
	if b.Result != receipts.ResultDuplicate || b.Content == nil || b.Content.Name != "a.md" || b.Content.Host != "laptop" ||
		b.Content.Result != receipts.ResultPromoted || b.Content.Target != "memory/cards/a.md" || b.IngestRun != "run-2" || b.StoredRun != "run-1" {
		t.Errorf("duplicate b.md: %+v content %+v", b, b.Content)
	}
	got, _ = v.FindSources(ctx, "c.md")
	if c := got[0]; c.Result != receipts.ResultReview || c.Reason != "hash-conflict" || c.Content.SourceID != c.ID || !c.Archived || c.StoredAt.IsZero() {
		t.Errorf("review c.md: %+v content %+v", c, c.Content)
	}
	got, _ = v.FindSources(ctx, "d.md")
	if d := got[0]; d.Result != "" || d.Content != nil || d.Archived || d.IngestRun != "" {
		t.Errorf("pending d.md: %+v", d)
	}

	rej, err := v.FindRejects(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(rej) != 1 || rej[0].Reason != "oversize" || rej[0].ArchivedAs != "malformed/big.md" || rej[0].Host != "laptop" || rej[0].RunID != "run-2" {
		t.Errorf("rejects for big: %+v", rej)
	}
	if rej, _ := v.FindRejects(ctx, "a.md"); len(rej) != 0 {
		t.Errorf("a.md found among rejects: %+v", rej)
	}

	tot, err := v.Totals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tot.Sources != 4 || tot.Pending != 1 || tot.Rejected != 1 || tot.Results[receipts.ResultPromoted] != 1 || tot.Results[receipts.ResultReview] != 1 || tot.Results[receipts.ResultDuplicate] != 0 {
		t.Errorf("totals %+v", tot)
	}
}

// TestOpenLedgerReadOnlyWritesNothing: a missing ledger is ErrNoLedger and
// stays missing; an idle ledger, cleanly closed or left with a crashed
// run's log, is read without creating or changing any file next to it; and
// a view cannot write.
func TestOpenLedgerReadOnlyWritesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "ledger.db")
	if _, err := OpenReadOnly(missing, true); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("missing ledger: %v, want ErrNoLedger", err)
	}
	if _, err := OpenReadOnly(missing, false); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("missing ledger (live): %v, want ErrNoLedger", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("opening a missing ledger created %v", ents)
	}

	path, _ := qLedger(t)
	before := qDirState(t, filepath.Dir(path))
	if _, ok := before["ledger.db-wal"]; ok {
		t.Fatal("fixture: a closed ledger left its log")
	}
	v, err := OpenReadOnly(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.l.db.ExecContext(ctx, `DELETE FROM sources`); err == nil {
		t.Fatal("a read-only view could delete")
	}
	v.Close()
	qSameDir(t, "idle, clean", before, qDirState(t, filepath.Dir(path)))

	// A writer that has not closed stands in for a crashed run: its log
	// holds a committed source the main file lacks. Its checkpointer is
	// stopped, as a crashed run's is.
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.ckpt.close()
	if _, err := w.RecordSources(ctx, "run-3", []claim.Source{{Host: "laptop", Inbox: "/i", Name: "late.md", SHA256: qSum("late"), Size: 4}}); err != nil {
		t.Fatal(err)
	}
	before = qDirState(t, filepath.Dir(path))
	if _, ok := before["ledger.db-wal"]; !ok {
		t.Fatal("fixture: no -wal while a writer is open")
	}
	for _, idle := range []bool{true, false} {
		v, err = OpenReadOnly(path, idle)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.FindSources(ctx, "late.md")
		if err != nil || len(got) != 1 {
			t.Fatalf("idle=%v: the source in the log is not visible: %v %v", idle, got, err)
		}
		v.Close()
		after := qDirState(t, filepath.Dir(path))
		if !idle {
			// Reading live follows SQLite's WAL protocol: a reader marks
			// its snapshot in the shared-memory index, which the running
			// writer owns and changes all the time anyway.
			before["ledger.db-shm"], after["ledger.db-shm"] = "", ""
		}
		qSameDir(t, fmt.Sprintf("with a log, idle=%v", idle), before, after)
	}
}

// TestOpenLedgerReadOnlyNewerSchema: a ledger from a newer handoff is
// refused, not misread.
func TestOpenLedgerReadOnlyNewerSchema(t *testing.T) {
	path, _ := qLedger(t)
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := OpenReadOnly(path, true); err == nil || !strings.Contains(err.Error(), "newer than this handoff") {
		t.Fatalf("newer schema: %v", err)
	}
}

func TestIsSHAPrefix(t *testing.T) {
	for q, want := range map[string]bool{
		"abcd": true, "ABCD12": true, "abc": false, "abcg": false, strings.Repeat("a", 64): true,
		strings.Repeat("a", 65): false, "a.md": false, "": false,
	} {
		if got := IsSHAPrefix(q); got != want {
			t.Errorf("IsSHAPrefix(%q) = %v, want %v", q, got, want)
		}
	}
}
