package ledger

import (
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sourcesByNameMigration is the number of the migration that drops
// sources_by_name.
const sourcesByNameMigration = 9

// A ledger that still has sources_by_name loses it on its next open, and
// a handoff's versions are then found through an index by name
// (migration 14's sources_key), not by reading every source.
func TestVersionsWithoutSourcesByName(t *testing.T) {
	l := openBefore(t, sourcesByNameMigration)
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
		if p := strings.Join(plan, "; "); !strings.Contains(p, "SEARCH s USING") || !strings.Contains(p, "INDEX sources_key (host=? AND inbox=? AND name=?)") {
			t.Errorf("versions of %d keys are read with %q, not through the index by name", keys, plan)
		}
	}
}

// openBefore makes a ledger as a handoff before migration number m left
// it (ledgerAt m-1), then opens it, which applies m and those after it.
func openBefore(t *testing.T, m int) *Ledger {
	t.Helper()
	path, db := ledgerAt(t, m-1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ledgerAt makes a ledger with migrations 1 to n applied and returns its
// path and the database, open, for a test to fill as that version would.
func ledgerAt(t *testing.T, n int) (string, *sql.DB) {
	t.Helper()
	if n < 0 || n >= len(migrations) {
		t.Fatalf("ledgerAt: no version %d before the last (%d)", n, len(migrations))
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for i, q := range migrations[:n] {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = ` + strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	return path, db
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
