package ledger

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
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
