package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/internal/durable"
)

// SpoolPrune says what PruneSpool removed, or would remove in a dry run.
type SpoolPrune struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// PruneSpoolOptions select the spool files PruneSpool removes.
type PruneSpoolOptions struct {
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
func PruneSpool(ctx context.Context, l *Ledger, opts PruneSpoolOptions) (SpoolPrune, error) {
	var res SpoolPrune
	shas, err := l.prunableSpool(ctx, opts.Before, opts.Hosts)
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

// prunableSpool returns, sorted, the hashes whose spool files PruneSpool may
// remove. Timestamps are compared as times, not as strings (RFC 3339 with
// trimmed fractions does not sort as text); a timestamp that does not parse
// keeps the file.
func (l *Ledger) prunableSpool(ctx context.Context, before time.Time, hosts []string) ([]string, error) {
	type agg struct {
		keep   bool
		latest time.Time
	}
	by := map[string]*agg{}
	rows, err := l.db.QueryContext(ctx, `SELECT sha256, host, result, ingested_at FROM sources`)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	for rows.Next() {
		var sha, host, result, at string
		if err := rows.Scan(&sha, &host, &result, &at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: %w", err)
		}
		a := by[sha]
		if a == nil {
			a = &agg{}
			by[sha] = a
		}
		t, perr := time.Parse(time.RFC3339Nano, at)
		switch {
		case result == "" || result == ResultMalformed || perr != nil:
			a.keep = true
		case len(hosts) > 0 && !slices.Contains(hosts, host):
			a.keep = true
		case t.After(a.latest):
			a.latest = t
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	// A plan still open (a crashed run's) keeps its content, whatever the
	// sources say.
	open, err := l.db.QueryContext(ctx, `SELECT sha256 FROM plans WHERE state = ?`, planPlanned)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	for open.Next() {
		var sha string
		if err := open.Scan(&sha); err != nil {
			open.Close()
			return nil, fmt.Errorf("ledger: %w", err)
		}
		if a := by[sha]; a != nil {
			a.keep = true
		}
	}
	open.Close()
	if err := open.Err(); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	var out []string
	for sha, a := range by {
		if !a.keep && a.latest.Before(before) && isSHA256(sha) {
			out = append(out, sha)
		}
	}
	sort.Strings(out)
	return out, nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
