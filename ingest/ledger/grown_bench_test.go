package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
)

// The bulk cell's ledger work on a grown ledger (issue 34): what a run
// that pulls and ingests 8,000 handoffs asks of the ledger, batch by
// batch, into a ledger that already holds HANDOFF_BENCH_GROWN handoffs
// (0 unless set; bench/bigws.sh's workspace holds 200,000). Comparing
// the two tells how much of a bulk run's cost grows with the memory.

// grownBatch is the bulk cell's pull batch.
const grownBatch = 256

// grownHandoff is the i-th handoff a grown ledger records: a source in
// one of 1,600 inboxes (8 hosts x 100 repositories x 2 harnesses, the
// bench's shape), named by date as agents name them, with about 700
// bytes of content.
func grownHandoff(i int) (claim.Source, []byte) {
	host, repo, harness := i%8+1, i/8%100+1, ".claude"
	if i/800%2 == 1 {
		harness = ".codex"
	}
	data := fmt.Appendf(nil, "# Memory Handoff\n\n## Type\nworkflow\n\n## Title\nh%d\n\n## Summary\n%0600d\n", i, i)
	name := fmt.Sprintf("2026-%02d-%02d-%06d-note.md", i/200000%12+1, i/8000%28+1, i)
	return claim.Source{
		Host:       "h" + strconv.Itoa(host),
		Inbox:      fmt.Sprintf("/home/hbench/code/g%d/repo%d/%s/memory-handoffs", (repo-1)/10+1, repo, harness),
		Name:       name,
		SHA256:     spool.Hash(data),
		Size:       int64(len(data)),
		ArchivedAs: "processed/" + name,
	}, data
}

// grownRun makes the ledger writes of one run that pulls and ingests
// handoffs from to from+n-1: per batch, the sources and their bytes, the
// archive, the plans and the results, each its own commit as in a run.
func grownRun(ctx context.Context, l *Ledger, run string, from, n, batch int) error {
	for at := from; at < from+n; at += batch {
		end := min(at+batch, from+n)
		srcs := make([]claim.Source, 0, end-at)
		contents := make(map[string][]byte, end-at)
		for i := at; i < end; i++ {
			s, data := grownHandoff(i)
			srcs = append(srcs, s)
			contents[s.SHA256] = data
		}
		if _, err := l.StoreSources(ctx, run, srcs, contents); err != nil {
			return err
		}
		if err := l.MarkArchived(ctx, srcs); err != nil {
			return err
		}
		rows, err := l.PendingSourcesAfter(ctx, 0, -1)
		if err != nil {
			return err
		}
		ps := make([]*Plan, len(rows))
		for j, r := range rows {
			ps[j] = &Plan{SHA256: r.SHA256, SourceID: r.ID, Kind: "document", Action: "no-card", Target: "TOOLS.md",
				Before: r.SHA256, After: r.SHA256, Content: []byte("- note\n")}
		}
		if err := l.InsertPlans(ctx, run, ps); err != nil {
			return err
		}
		fs := make([]Finished, len(rows))
		for j, r := range rows {
			fs[j] = Finished{Src: r, O: Outcome{Result: "routed", Action: "no-card", Target: "TOOLS.md", Before: r.SHA256, After: r.SHA256}, PlanID: ps[j].ID}
		}
		if err := l.FinishAll(ctx, run, fs); err != nil {
			return err
		}
	}
	return nil
}

// grownLedger returns the path of a ledger holding n handoffs, made once
// per process and copied for each caller.
func grownLedger(b *testing.B, dir string, n int) string {
	b.Helper()
	seed := filepath.Join(os.TempDir(), fmt.Sprintf("handoff-grown-%d-v%d.db", n, len(migrations)))
	if _, err := os.Stat(seed); err != nil {
		l, err := Open(seed + ".tmp")
		if err != nil {
			b.Fatal(err)
		}
		if err := grownRun(context.Background(), l, "seed", 0, n, 4096); err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(seed+".tmp", seed); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(dir, "ledger.db")
	if err := Copy(seed, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkBulkGrown: one bulk run's ledger writes (8,000 handoffs in
// batches of 256) into a ledger of HANDOFF_BENCH_GROWN handoffs.
func BenchmarkBulkGrown(b *testing.B) {
	grown, _ := strconv.Atoi(os.Getenv("HANDOFF_BENCH_GROWN"))
	const n = 8000
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		path := grownLedger(b, b.TempDir(), grown)
		l, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := grownRun(ctx, l, "bulk", grown, n, grownBatch); err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/handoff")
}
