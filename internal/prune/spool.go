package prune

import (
	"context"
	"time"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
)

// SpoolResult says what PruneSpool removed, or would remove in a dry run.
type SpoolResult struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// SpoolOptions select the spool files PruneSpool removes.
type SpoolOptions struct {
	// Dir is the spool directory (<workspace>/.handoff/spool).
	Dir string
	// Before: a handoff whose latest source was ingested at or after this
	// time keeps its spool file.
	Before time.Time
	// Hosts, when not empty, limits pruning to handoffs whose every source
	// came from one of these hosts.
	Hosts []string
	// DryRun counts what would go and removes nothing.
	DryRun bool
}

// PruneSpool removes the spool files (<sha256>.md) of handoffs that are done
// with: every source with that content has a result, none of them is
// malformed (the spool is the quarantine for malformed content), no plan for
// it is unfinished, and the latest source was ingested before opts.Before.
// Ledger rows are never changed; a later copy of the same content is stored
// again and recorded as a duplicate, so nothing depends on the spool file
// once its handoff is finished.
//
// Only regular files whose names the ledger yields are removed: anything
// else in the spool (temporary files, names the ledger does not know,
// symlinks, directories) is left alone. The caller holds the workspace
// lock, so no run is storing or ingesting meanwhile.
func Spool(ctx context.Context, l *ledger.Ledger, opts SpoolOptions) (SpoolResult, error) {
	var res SpoolResult
	shas, err := l.PrunableSpool(ctx, opts.Before, opts.Hosts)
	if err != nil || len(shas) == 0 {
		return res, err
	}
	names := make([]string, len(shas))
	for i, sha := range shas {
		names[i] = spool.Name(sha)
	}
	removed, size, err := removeRegular(ctx, opts.Dir, names, opts.DryRun, "spool")
	res.Files, res.Bytes = len(removed), size
	if err != nil {
		return res, err
	}
	return res, nil
}
