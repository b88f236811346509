// Package fanout runs bounded numbers of calls at once: the one pattern
// behind discovery's parallel probes, the per-host pulls of sync, doctor
// and prune, and the ingester's staging.
//
// Guarantees: at most limit calls run at once (at least one); Each returns
// only after every call it started has returned; the first error cancels
// the context the others get, no call is started after it, and it is the
// error returned.
package fanout

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// Each runs fn(ctx, i) for every i in [0, n), at most limit at once. It
// returns the first error, or ctx's once every call returned.
func Each(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	if n == 0 {
		return ctx.Err()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(limit, 1))
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
