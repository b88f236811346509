package ledger

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/handoff-sync/handoff/claim"
)

// runContext is a context that can end, as a run's can: the driver
// treats such statements differently (rowContext).
func runContext(b *testing.B) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	return ctx
}

// BenchmarkMarkArchived: one archive batch of a pull (256 sources, the
// usual size at the bulk cell) confirmed in one transaction.
func BenchmarkMarkArchived(b *testing.B) {
	ctx := runContext(b)
	l, err := Open(filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := make([]claim.Source, 256)
	for i := range batch {
		name := fmt.Sprintf("h%04d.md", i)
		batch[i] = claim.Source{Host: "laptop", Inbox: "/r/.claude/memory-handoffs", Name: name, SHA256: qSum(name), Size: 1, ArchivedAs: "processed/" + name}
	}
	if _, err := l.RecordSources(ctx, "run", batch); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := l.MarkArchived(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordSources: one stored batch of a pull (256 sources) recorded
// in one transaction, into a ledger that already holds 8,000.
func BenchmarkRecordSources(b *testing.B) {
	ctx := runContext(b)
	l, err := Open(filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := func(run, n int) []claim.Source {
		out := make([]claim.Source, n)
		for i := range out {
			name := fmt.Sprintf("r%06d-%04d.md", run, i)
			out[i] = claim.Source{Host: "laptop", Inbox: fmt.Sprintf("/r/repo%d/.claude/memory-handoffs", i%100), Name: name, SHA256: qSum(name), Size: 1, ArchivedAs: "processed/" + name}
		}
		return out
	}
	if _, err := l.RecordSources(ctx, "run", batch(0, 8000)); err != nil {
		b.Fatal(err)
	}
	run := 0
	for b.Loop() {
		run++
		if _, err := l.RecordSources(ctx, "run", batch(run, 256)); err != nil {
			b.Fatal(err)
		}
	}
}
