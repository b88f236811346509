package ingest

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/durable"
)

// mixedHandoff returns the i-th of a mix: card creations, document appends
// spread over a few targets, reviews and malformed files.
func mixedHandoff(i int) string {
	head := fmt.Sprintf("# Memory Handoff\n\n## Type\nworkflow\n\n## Title\nh%d\n\n## Summary\ns\n\n", i)
	switch i % 5 {
	case 0, 1:
		return head + fmt.Sprintf("## Recommended memory action\ncreate-card\n\n## Target card\ncard-%d.md\n\n## Suggested card content\n---\ntopic: t%d\ncategory: c\ntags: [x]\n---\nbody %d\n", i, i, i)
	case 2, 3:
		targets := []string{"TOOLS.md", "USER.md", "rules/go.md", ".learnings/LEARNINGS.md"}
		return head + fmt.Sprintf("## Recommended memory action\nno-card\n\n## Target document\n%s\n\n## Suggested document content\n- note %d\n", targets[i%4], i)
	default:
		if i%10 == 4 {
			return fmt.Sprintf("not a handoff %d\n", i)
		}
		return head + fmt.Sprintf("## Recommended memory action\nno-card\n\n## Target document\n../x%d.md\n\n## Suggested document content\nx\n", i)
	}
}

// BenchmarkIngest1000 applies 1,000 stored mixed handoffs per iteration
// through the full transaction (plan, backup, guarded write, bookkeeping).
func BenchmarkIngest1000(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	var syncs int64
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		ws := filepath.Join(dir, "ws")
		led, err := ledger.Open(filepath.Join(dir, "ledger.db"))
		if err != nil {
			b.Fatal(err)
		}
		batch := map[string][]byte{}
		var srcs []claim.Source
		for i := 0; i < n; i++ {
			data := []byte(mixedHandoff(i))
			sha := spool.Hash(data)
			batch[sha] = data
			srcs = append(srcs, claim.Source{Host: "h", Inbox: "/in", Name: fmt.Sprintf("h%d.md", i), SHA256: sha, Size: int64(len(data))})
		}
		if _, err := led.StoreSources(ctx, "seed", srcs, batch); err != nil {
			b.Fatal(err)
		}
		sp := led.Store(nil)
		ing, err := New(Options{OpenClaw: olderReader, Workspace: ws, RunID: "bench"}, led, sp)
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
	b.ReportMetric(float64(syncs)/float64(b.N*n), "file-fsyncs/handoff")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/handoff")
}

// BenchmarkValidateMix parses and validates the mix of BenchmarkIngest1000
// (no I/O), with the injection-like-content screen and without it: the
// screen's CPU cost per handoff.
func BenchmarkValidateMix(b *testing.B) {
	const n = 1000
	data := make([][]byte, n)
	for i := range data {
		data[i] = []byte(mixedHandoff(i))
	}
	for _, v := range []struct {
		name     string
		screened bool
	}{{"screened", true}, {"unscreened", false}} {
		b.Run(v.name, func(b *testing.B) {
			screenInjection = v.screened
			defer func() { screenInjection = true }()
			for b.Loop() {
				for _, d := range data {
					Lint(d)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/handoff")
		})
	}
}

// BenchmarkInjectionScreen is the injection-like-content screen alone on
// the parsed handoffs of the mix (the ones that parse): its CPU per
// handoff, next to BenchmarkValidateMix's whole check.
func BenchmarkInjectionScreen(b *testing.B) {
	var hs []*Handoff
	for i := range 1000 {
		if h, err := Parse([]byte(mixedHandoff(i))); err == nil {
			hs = append(hs, h)
		}
	}
	for b.Loop() {
		for _, h := range hs {
			if injectionProblem(h) != nil {
				b.Fatal("the mix holds injection-like text")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(hs)), "ns/handoff")
}

// BenchmarkDocumentAppends: a batch's 100 appends of a 300-byte note to a
// 256 KiB document, planned one after another, each with the hash of the
// document it leaves: continued from the tail state (appendDocument), and
// the whole document hashed again at each step, as before.
func BenchmarkDocumentAppends(b *testing.B) {
	doc := bytes.Repeat([]byte("- a learned fact about the tools, kept for later\n"), 256<<10/50)
	note := strings.Repeat("n", 299)
	b.Run("continued", func(b *testing.B) {
		for b.Loop() {
			v := viewed{data: doc, exists: true}
			v.sum, v.tail = sums(doc)
			for range 100 {
				next, sum, tail := appendDocument(v, note)
				v = viewed{data: next, exists: true, sum: sum, tail: tail}
			}
		}
	})
	b.Run("rehashed", func(b *testing.B) {
		for b.Loop() {
			v := viewed{data: doc, exists: true, sum: hash(doc)}
			for range 100 {
				next := AppendDocument(v.data, note)
				v = viewed{data: next, exists: true, sum: hash(next)}
			}
		}
	})
}

// BenchmarkParseMix parses 1,000 handoffs of the bench mix, as the
// ingester and a pull's worker each do once a handoff.
func BenchmarkParseMix(b *testing.B) {
	data := make([][]byte, 1000)
	for i := range data {
		data[i] = []byte(mixedHandoff(i))
	}
	for b.Loop() {
		for _, d := range data {
			Parse(d)
		}
	}
}
