package ledger

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/handoff-sync/handoff/claim"
)

// umask sets the process's umask for the rest of the test. Tests that use
// it do not run in parallel: the umask is the whole process's.
func umask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// checkMode fails the test unless the file at p has mode want.
func checkMode(t *testing.T, p string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %v, want %v", filepath.Base(p), got, want)
	}
}

// record writes one source, so that the ledger's -wal and -shm exist.
func record(t *testing.T, l *Ledger, name string) {
	t.Helper()
	src := claim.Source{Host: "h", Inbox: "/in", Name: name, SHA256: "ab", Size: 1}
	if _, err := l.RecordSources(context.Background(), "run", []claim.Source{src}); err != nil {
		t.Fatal(err)
	}
}

// TestOpenCreatesPrivate: under umask 022 Open creates the database 0600,
// and the -wal and -shm files SQLite makes next to it while it is open are
// 0600 too. Invariant: no ledger file is readable by group or others.
func TestOpenCreatesPrivate(t *testing.T) {
	umask(t, 0o022)
	p := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	record(t, l, "a.md")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		checkMode(t, p+suffix, 0o600)
	}
}

// TestOpenNarrowsAWideLedger: a ledger an earlier version made 0644, with
// the -wal and -shm another handle has open, is narrowed to 0600 by the
// next Open. Invariant: an existing workspace's ledger becomes private on
// its next run.
func TestOpenNarrowsAWideLedger(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.db")
	first, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	record(t, first, "a.md")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Chmod(p+suffix, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	second, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	record(t, second, "b.md")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		checkMode(t, p+suffix, 0o600)
	}
}

// TestOpenKeepsTempInMemory: every connection of the pool keeps SQLite's
// temporary data (a statement journal that outgrew 64 KiB, a large
// sort) in memory (temp_store 2). On a file, the statement journal of
// recordSource cost 34 pwrite calls a source (BenchmarkRecordSources
// under strace -c).
func TestOpenKeepsTempInMemory(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	// Hold two connections at once, so the pool has more than one.
	a, err := l.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := l.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, c := range []interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}{a, b} {
		var mode int
		if err := c.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != 2 {
			t.Errorf("connection %d: temp_store %d, want 2 (MEMORY)", i, mode)
		}
	}
}
