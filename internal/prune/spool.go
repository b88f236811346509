package prune

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/durable"
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
	root, err := os.OpenRoot(opts.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("spool: %w", err)
	}
	defer root.Close()
	for _, sha := range shas {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		name := spool.Name(sha)
		fi, err := root.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned before
		}
		if err != nil {
			return res, fmt.Errorf("spool: %w", err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if !opts.DryRun {
			if err := root.Remove(name); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return res, fmt.Errorf("spool: %w", err)
			}
		}
		res.Files++
		res.Bytes += fi.Size()
	}
	if res.Files > 0 && !opts.DryRun {
		if err := durable.SyncDir(root, "."); err != nil {
			return res, fmt.Errorf("spool: %w", err)
		}
	}
	return res, nil
}
