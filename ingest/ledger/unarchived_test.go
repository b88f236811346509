package ledger

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
)

// TestUnarchived: one query returns every source of a host that is stored
// and not known to be archived, by inbox and in the order stored, and
// none of another host's or an archived one. Invariant: a stored handoff
// whose archive was never confirmed is looked at again on its host (it
// cannot be left on the host unconfirmed, nor confirmed twice).
func TestUnarchived(t *testing.T) {
	ctx := context.Background()
	l, err := Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	src := func(host, inbox, name string) claim.Source {
		return claim.Source{Host: host, Inbox: inbox, Name: name, SHA256: qSum(host + inbox + name), Size: 1, ArchivedAs: "processed/" + name}
	}
	all := []claim.Source{
		src("laptop", "/b", "1.md"), src("laptop", "/a", "2.md"), src("laptop", "/b", "3.md"),
		src("laptop", "/a", "4.md"), src("server", "/a", "5.md"),
	}
	for _, s := range all {
		if _, err := l.RecordSources(ctx, "run-1", []claim.Source{s}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.MarkArchived(ctx, []claim.Source{all[2]}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Unarchived(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		if s.Host != "laptop" || s.ArchivedAs == "" {
			t.Errorf("source %+v", s)
		}
		names = append(names, s.Inbox+"/"+s.Name)
	}
	if want := []string{"/a/2.md", "/a/4.md", "/b/1.md"}; !slices.Equal(names, want) {
		t.Errorf("Unarchived(laptop) = %q, want %q", names, want)
	}
	// It must not visit every source the host ever had: an inbox holds
	// thousands of archived ones after a year of runs.
	plan := queryPlan(t, l, `SELECT inbox, sha256, size, name, archived_as FROM sources
		WHERE host = ? AND acked = 0 ORDER BY inbox, id`, "laptop")
	if p := strings.Join(plan, "; "); !strings.Contains(p, "sources_unacked") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("query plan %q: want the partial index sources_unacked, no sort of its own", p)
	}
}
