package continuity

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkBuildIdle is the continuity step of an idle sync (nothing
// new): Build over a repository that holds no handoff, and over one that
// holds 16,000 handoffs of the last 30 days, each with a Continues naming
// nothing (the shape that made threads quadratic: 30 s an idle sync).
// Threads are grouped by index, so the 16,000 cost the rows' reading and
// grouping once, not a comparison of every pair.
func BenchmarkBuildIdle(b *testing.B) {
	for _, n := range []int{0, 16_000} {
		b.Run(fmt.Sprintf("handoffs=%d", n), func(b *testing.B) {
			w := newWorld(b)
			texts := map[string]string{}
			for i := range n {
				texts[fmt.Sprintf("2026-12-01-%05d.md", i)] = handoffText(fmt.Sprintf("card %d", i), "Continues", "nothing.md")
			}
			if n > 0 {
				w.storeMany(b, "laptop", lapInbox, texts, "routed", "")
			}
			recordApp(b, w, nil)
			now := time.Now()
			b.ResetTimer()
			for b.Loop() {
				if _, err := Build(context.Background(), Input{Ledger: w.led, Spool: w.sp, Manifest: w.m, Now: now}, w.m.HostConfigs()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
