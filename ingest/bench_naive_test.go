package ingest

// Ingest alone, for issue 6: the transactional ingester against a naive
// applier that does the same logical work (read the stored handoff, parse,
// validate, write the card, append to the document, drop review drafts)
// with no fsync, no backup and no ledger; and the cost of one fsync on this
// machine, the limit a durable ingester is measured against.
//
//	HANDOFF_BENCH_N=10000 go test -run '^$' -bench 'IngestVsNaive|Fsync4K' -benchtime 1x ./ingest/
//	bench/ingest.sh    # the same under strace -c and /usr/bin/time -v, one at a time
//
// HANDOFF_BENCH_N sets the number of handoffs (10,000 in bench/ingest.sh);
// without it BenchmarkIngestVsNaive is skipped, so that `make bench` stays
// as quick as it was.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/gctune"
	"github.com/handoff-sync/handoff/internal/layout"
)

func benchN(b *testing.B) int {
	if n, err := strconv.Atoi(os.Getenv("HANDOFF_BENCH_N")); err == nil && n > 0 {
		return n
	}
	b.Skip("set HANDOFF_BENCH_N (bench/ingest.sh uses 10000)")
	return 0
}

// seedSpool stores n mixed handoffs (the mix of BenchmarkIngest1000: 40%
// card creations, 40% document appends over four documents, 10% review,
// 10% malformed) in a fresh spool and ledger under dir.
func seedSpool(b *testing.B, dir string, n int) (*spool.Dir, *ledger.Ledger, []claim.Source) {
	b.Helper()
	ctx := context.Background()
	sp, err := spool.Open(filepath.Join(dir, "ws", layout.SpoolDir))
	if err != nil {
		b.Fatal(err)
	}
	led, err := ledger.Open(filepath.Join(dir, "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	var srcs []claim.Source
	batch := map[string][]byte{}
	flush := func() {
		if err := sp.Put(batch); err != nil {
			b.Fatal(err)
		}
		if _, err := led.RecordSources(ctx, "seed", srcs[len(srcs)-len(batch):]); err != nil {
			b.Fatal(err)
		}
		batch = map[string][]byte{}
	}
	for i := 0; i < n; i++ {
		data := []byte(mixedHandoff(i))
		sha := spool.Hash(data)
		batch[sha] = data
		srcs = append(srcs, claim.Source{Host: "h", Inbox: "/in", Name: fmt.Sprintf("h%d.md", i), SHA256: sha, Size: int64(len(data))})
		if len(batch) == 500 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return sp, led, srcs
}

// benchLog is the ingester's logger: its debug records (one per batch, with
// the time of each phase) on stderr when HANDOFF_BENCH_LOG is set, none
// otherwise.
func benchLog() *slog.Logger {
	if os.Getenv("HANDOFF_BENCH_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func maxRSSMiB() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}

// BenchmarkIngestVsNaive/transactional applies N stored handoffs through the
// real ingester (plan, backup, guarded durable write, ledger); /naive does
// the same logical work straight onto the files.
func BenchmarkIngestVsNaive(b *testing.B) {
	n := benchN(b)
	// seed-only does the setup of the others and nothing else: under strace
	// its fsyncs are the ones to subtract.
	b.Run("seed-only", func(b *testing.B) {
		for b.Loop() {
			_, led, _ := seedSpool(b, b.TempDir(), n)
			led.Close()
		}
	})
	// transactional is the ingester as shipped; transactional-unscreened
	// the same without the injection-like-content screen, for its cost
	// (bench/ingest.sh runs the two side by side).
	for _, v := range []struct {
		name     string
		screened bool
	}{{"transactional", true}, {"transactional-unscreened", false}} {
		b.Run(v.name, func(b *testing.B) {
			// As sync runs it; bench/ingest.sh gives each applier a
			// process of its own, so the naive one keeps Go's default.
			gctune.Start()
			screenInjection = v.screened
			defer func() { screenInjection = true }()
			ctx := context.Background()
			var syncs int64
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				sp, led, _ := seedSpool(b, dir, n)
				ing, err := New(Options{OpenClaw: olderReader, Workspace: filepath.Join(dir, "ws"), RunID: "bench", Log: benchLog()}, led, sp)
				if err != nil {
					b.Fatal(err)
				}
				before := durable.Syncs()
				b.StartTimer()
				entries, err := ing.Run(ctx)
				b.StopTimer()
				syncs += durable.Syncs() - before
				if err != nil || len(entries) != n {
					b.Fatalf("ingested %d of %d: %v", len(entries), n, err)
				}
				ing.Close()
				led.Close()
				sp.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "handoffs/s")
			b.ReportMetric(float64(syncs)/float64(b.N*n), "file-fsyncs/handoff")
			b.ReportMetric(maxRSSMiB(), "peak-RSS-MiB")
		})
	}
	b.Run("naive", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			dir := b.TempDir()
			_, led, srcs := seedSpool(b, dir, n)
			led.Close()
			ws := filepath.Join(dir, "ws")
			b.StartTimer()
			applied := naiveApply(b, ws, srcs)
			b.StopTimer()
			if applied != n {
				b.Fatalf("naive applier handled %d of %d", applied, n)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "handoffs/s")
		b.ReportMetric(0, "file-fsyncs/handoff")
		b.ReportMetric(maxRSSMiB(), "peak-RSS-MiB")
	})
}

// naiveApply is what a script would do: for each stored handoff, read it,
// parse and validate it with the same rules, then write the card, append to
// the document, or drop a review draft — os.WriteFile, no fsync, no backup,
// no ledger, no duplicate tracking beyond the run. It returns how many
// handoffs it handled.
func naiveApply(b *testing.B, ws string, srcs []claim.Source) int {
	spoolDir := filepath.Join(ws, layout.SpoolDir)
	for _, d := range []string{"memory/cards", ".handoff/review", "rules", ".learnings"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	seen := map[string]bool{}
	handled := 0
	for _, s := range srcs {
		handled++
		if seen[s.SHA256] {
			continue
		}
		seen[s.SHA256] = true
		data, err := os.ReadFile(filepath.Join(spoolDir, s.SHA256+".md"))
		if err != nil {
			b.Fatal(err)
		}
		h, err := Parse(data)
		if err != nil {
			continue // malformed: stays in the spool
		}
		if len(h.Validate()) > 0 {
			draft := filepath.Join(ws, ".handoff/review", s.Name[:len(s.Name)-3]+"."+s.SHA256[:12]+".md")
			if err := os.WriteFile(draft, data, 0o644); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if h.Card != nil {
			target := filepath.Join(ws, "memory/cards", h.Card.Name)
			if _, err := os.Lstat(target); err == nil && h.Action == ActionCreateCard {
				continue // card-exists: would go to review
			}
			if err := os.WriteFile(target, []byte(h.Card.Content), 0o644); err != nil {
				b.Fatal(err)
			}
			continue
		}
		target := filepath.Join(ws, h.Document.Target)
		old, err := os.ReadFile(target)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			b.Fatal(err)
		}
		if err := os.WriteFile(target, AppendDocument(old, h.Document.Content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return handled
}

// BenchmarkFsync4K measures one durable small write on this machine's disk:
// write 4 KiB at the start of a file and fsync it, over and over; reports
// the median (the mean is ns/op). Run it with -benchtime 2000x or so.
// HANDOFF_BENCH_DIR picks the directory (default: the test's temp dir).
func BenchmarkFsync4K(b *testing.B) {
	dir := os.Getenv("HANDOFF_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	f, err := os.CreateTemp(dir, "fsync-*.bin")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	var d []time.Duration
	for i := 0; b.Loop(); i++ {
		buf[0] = byte(i)
		t0 := time.Now()
		if _, err := f.WriteAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "median-µs/fsync")
	b.ReportMetric(float64(d[len(d)*9/10].Microseconds()), "p90-µs/fsync")
}

// BenchmarkFsyncNewFile4K measures the durable write pattern of a spool or
// target file: create a new file, write 4 KiB, fsync it, rename it into
// place, fsync the directory; reports the median of the whole step and of
// its two fsyncs.
func BenchmarkFsyncNewFile4K(b *testing.B) {
	dir := os.Getenv("HANDOFF_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	d, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	buf := make([]byte, 4096)
	var whole, syncs []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		tmp := filepath.Join(dir, fmt.Sprintf(".tmp-%d", i))
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		syncs = append(syncs, time.Since(t1))
		f.Close()
		if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("f-%d", i))); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		syncs = append(syncs, time.Since(t2))
		whole = append(whole, time.Since(t0))
	}
	slices.Sort(whole)
	slices.Sort(syncs)
	b.ReportMetric(float64(whole[len(whole)/2].Microseconds()), "median-µs/durable-file")
	b.ReportMetric(float64(syncs[len(syncs)/2].Microseconds()), "median-µs/fsync")
}
