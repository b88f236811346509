package ledger

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
)

// TestRepoSources: sources are found through their inbox's recorded
// repository, newest first, with what became of their content and what
// they continue; an inbox without a row, a source older than since and a
// legacy import are left out; a newer pull's row replaces an older one;
// a thread row is recorded once.
func TestRepoSources(t *testing.T) {
	ctx := context.Background()
	path, srcs := qLedger(t) // a.md promoted, b.md its duplicate (desk), c.md review, d.md pending
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	inbox := "/home/me/app/.claude/memory-handoffs"
	if err := l.RecordRepos(ctx, "run-3", []InboxRepo{
		{Host: "laptop", Inbox: inbox, Repo: "/home/me/app", Origin: "github.com/acme/old", Home: "/home/me"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordRepos(ctx, "run-4", []InboxRepo{
		{Host: "laptop", Inbox: inbox, Repo: "/home/me/app", Origin: "github.com/acme/app", Home: "/home/me"},
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := l.InboxRepos(ctx)
	if err != nil || len(rows) != 1 || rows[0].Origin != "github.com/acme/app" || rows[0].RunID != "run-4" || rows[0].SeenAt.IsZero() {
		t.Fatalf("inbox repos %+v, %v; want the newer row alone", rows, err)
	}
	c := srcs["c.md"]
	if err := l.RecordThreads(ctx, map[string]string{c.SHA256: "a.md"}); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordThreads(ctx, map[string]string{c.SHA256: "other.md"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RecordLegacy(ctx, "run-5", []claim.Source{{Host: "laptop", Inbox: inbox, Name: "old.md", SHA256: qSum("legacy"), Size: 6, ArchivedAs: "processed/old.md", Parses: true}}); err != nil {
		t.Fatal(err)
	}

	got, err := l.RepoSources(ctx, []string{"laptop", "desk"}, time.Now().Add(-time.Hour), 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	// b.md is desk's: desk's inbox has no row.
	if want := []string{"d.md", "c.md", "a.md"}; !slices.Equal(names, want) {
		t.Fatalf("sources %q; want %q (newest first; desk's and the legacy one left out)", names, want)
	}
	if got[1].Continues != "a.md" {
		t.Errorf("c.md continues %q; want the first row kept", got[1].Continues)
	}
	if got[2].Content == nil || got[2].Content.Result != "promoted" || got[2].Content.Target != "memory/cards/a.md" {
		t.Errorf("a.md content %+v", got[2].Content)
	}
	if got[0].Content != nil || got[0].Result != "" {
		t.Errorf("d.md is pending: %+v", got[0])
	}
	if got, _ := l.RepoSources(ctx, []string{"laptop", "desk"}, time.Now().Add(-time.Hour), 1, 1); len(got) != 1 || got[0].Name != "d.md" {
		t.Errorf("limit 1: %+v", got)
	}
	if got, _ := l.RepoSources(ctx, []string{"laptop", "desk"}, time.Now().Add(time.Hour), 100, 100); len(got) != 0 {
		t.Errorf("since in the future: %+v", got)
	}

	// Who continues a.md: by its name, its archived name or its hash.
	a := srcs["a.md"]
	for _, tc := range []struct {
		key   string
		names []string
		sha   string
	}{
		{"a.md", []string{"a.md"}, ""},
		{claim.ArchiveName("a.md", a.SHA256), []string{claim.ArchiveName("a.md", a.SHA256)}, ""},
		{a.SHA256[:12], nil, a.SHA256},
		{a.SHA256, nil, a.SHA256},
	} {
		if err := l.RecordThreads(ctx, map[string]string{qSum("continues " + tc.key): tc.key}); err != nil {
			t.Fatal(err)
		}
		m, err := l.ThreadsNaming(ctx, tc.names, tc.sha)
		if err != nil || m[qSum("continues "+tc.key)] != tc.key {
			t.Errorf("ThreadsNaming(%q, %q) = %v, %v; want the handoff continuing %q", tc.names, tc.sha, m, err, tc.key)
		}
	}
	if m, _ := l.ThreadsNaming(ctx, nil, qSum("unrelated")); len(m) != 0 {
		t.Errorf("an unrelated hash names %v", m)
	}
	if m, _ := l.ThreadsNaming(ctx, nil, "abc"); len(m) != 0 {
		t.Errorf("too short a prefix matches %v", m)
	}
}

// TestRepoSourcesLongInbox: an inbox with more handoffs than RepoSources
// counts (1,500 here, then 1,500 junk files newer than them). Invariants:
// its share is its newest handoffs, never junk (a flood fills no share);
// the count says "at least" past MaxInboxRows; and the rows read do not
// depend on how long the inbox's history is (sources_inbox is walked, not
// the host's every row: checked by the query plan).
func TestRepoSourcesLongInbox(t *testing.T) {
	ctx := context.Background()
	l := openTemp(t)
	inbox := "/home/me/app/.claude/memory-handoffs"
	if err := l.RecordRepos(ctx, "run-1", []InboxRepo{{Host: "laptop", Inbox: inbox, Repo: "/home/me/app", Home: "/home/me"}}); err != nil {
		t.Fatal(err)
	}
	record := func(prefix, result string, n int) {
		var srcs []claim.Source
		contents := map[string][]byte{}
		for i := range n {
			v := fmt.Sprintf("%s %d", prefix, i)
			s := claim.Source{Host: "laptop", Inbox: inbox, Name: fmt.Sprintf("%s-%04d.md", prefix, i), SHA256: spool.Hash([]byte(v)), Size: int64(len(v))}
			srcs = append(srcs, s)
			contents[s.SHA256] = []byte(v)
		}
		if _, err := l.StoreSources(ctx, "run-1", srcs, contents); err != nil {
			t.Fatal(err)
		}
		pending, err := l.PendingSources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var fs []Finished
		for _, p := range pending {
			fs = append(fs, Finished{Src: p, O: Outcome{Result: result, Reason: map[bool]string{true: "parse-error"}[result == "malformed"]}})
		}
		if err := l.FinishAll(ctx, "run-1", fs); err != nil {
			t.Fatal(err)
		}
	}
	record("note", "routed", 1500)
	record("junk", "malformed", 1500)
	got, err := l.RepoSources(ctx, []string{"laptop"}, time.Now().Add(-time.Hour), 20, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 || got[0].Name != "note-1499.md" || got[19].Name != "note-1480.md" {
		t.Fatalf("%d rows, first %q; want the 20 newest notes", len(got), got[0].Name)
	}
	if got[0].InboxRows != MaxInboxRows+1 {
		t.Errorf("InboxRows %d; want the count to stop at %d", got[0].InboxRows, MaxInboxRows+1)
	}
	for _, line := range queryPlan(t, l, `SELECT 1 FROM sources s LEFT JOIN handoffs hs ON hs.id = s.sha_id WHERE `+repoFilter+` ORDER BY s.id DESC LIMIT 20`,
		"laptop", inbox, "2026") {
		if strings.Contains(line, "TEMP B-TREE") || strings.HasPrefix(line, "SCAN s") {
			t.Errorf("an inbox's rows are read with %q: sorted or scanned, not walked newest first", line)
		}
	}
}
