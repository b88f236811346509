package ledger

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sourcesByNameMigration is the number of the migration that drops
// sources_by_name.
const sourcesByNameMigration = 9

// A ledger that still has sources_by_name loses it on its next open, and
// a handoff's versions are then found through the unique index on
// (host, inbox, name, sha256), not by reading every source.
func TestVersionsWithoutSourcesByName(t *testing.T) {
	l := openBefore(t, migrationVersions, sourcesByNameMigration)
	defer l.Close()
	var n int
	if err := l.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'sources_by_name'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("sources_by_name after the migration: %d, %v", n, err)
	}

	for _, keys := range []int{1, 3} {
		args := make([]any, 0, 3*keys)
		for i := range keys {
			args = append(args, "h", "/in", strconv.Itoa(i)+".md")
		}
		plan := queryPlan(t, l, versionsQuery(keys), args...)
		if p := strings.Join(plan, "; "); !strings.Contains(p, "SEARCH s USING") || !strings.Contains(p, "INDEX sqlite_autoindex_sources_1 (host=? AND inbox=? AND name=?)") {
			t.Errorf("versions of %d keys are read with %q, not through the unique index", keys, plan)
		}
	}
}

// openBefore makes a ledger as it was before migration number m: it opens
// a new one, runs undo on it and sets its user_version to m-1, then
// opens it again, which applies m and those after it.
func openBefore(t *testing.T, undo string, m int) *Ledger {
	t.Helper()
	if m < 1 || m > len(migrations) {
		t.Fatalf("openBefore: no migration %d (there are %d)", m, len(migrations))
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(undo); err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(`PRAGMA user_version = ` + strconv.Itoa(m-1)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err = Open(path); err != nil {
		t.Fatal(err)
	}
	return l
}

// queryPlan is SQLite's plan for q, a line a step.
func queryPlan(t *testing.T, l *Ledger, q string, args ...any) []string {
	t.Helper()
	rows, err := l.db.Query(`EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
