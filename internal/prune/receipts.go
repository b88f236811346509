package prune

import (
	"context"
	"sort"
	"time"

	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/receipts"
)

// ReceiptsResult says which per-run receipts Receipts removed, or would
// remove in a dry run.
type ReceiptsResult struct {
	Files int      `json:"files"`
	Bytes int64    `json:"bytes"`
	Names []string `json:"names"` // file names in the receipts directory
}

// ReceiptsOptions select the receipts Receipts removes.
type ReceiptsOptions struct {
	Dir    string    // the receipts directory (<workspace>/.handoff/receipts)
	Before time.Time // a run that finished at or after this keeps its receipt
	DryRun bool      // list what would go; remove nothing
}

// Receipts removes the per-run receipts (<run-id>.json) of runs the
// ledger says finished before opts.Before. It never removes latest.json or
// latest.log, the newest finished run's receipt of each mode (so that
// latest.json always names a run whose own receipt exists), the receipt
// of the newest run whose outcome was not ok (the last word on what went
// wrong, however old), a receipt of a run the ledger does not know or
// that has not finished, or anything that is not a regular file. The
// caller holds the workspace lock.
func Receipts(ctx context.Context, l *ledger.Ledger, opts ReceiptsOptions) (ReceiptsResult, error) {
	res := ReceiptsResult{Names: []string{}}
	runs, err := l.Runs(ctx)
	if err != nil {
		return res, err
	}
	// The newest run of each mode, and the newest that did not end ok,
	// keep their receipts.
	newest := map[string]ledger.RunRecord{}
	for _, r := range runs {
		if r.Outcome == "" {
			continue
		}
		if n, ok := newest[r.Mode]; !ok || !r.FinishedAt.Before(n.FinishedAt) {
			newest[r.Mode] = r
		}
		if n, ok := newest[""]; r.Outcome != receipts.OutcomeOK && (!ok || !r.FinishedAt.Before(n.FinishedAt)) {
			newest[""] = r // "" is no mode: it holds the newest run not ok
		}
	}
	keep := map[string]bool{}
	for _, r := range newest {
		keep[r.ID] = true
	}
	var names []string
	for _, r := range runs {
		if r.Outcome == "" || r.FinishedAt.IsZero() || !r.FinishedAt.Before(opts.Before) || keep[r.ID] || !isRunID(r.ID) {
			continue
		}
		names = append(names, r.ID+".json")
	}
	if len(names) == 0 {
		return res, nil
	}
	sort.Strings(names)
	removed, size, err := removeRegular(ctx, opts.Dir, names, opts.DryRun, "receipts")
	res.Files, res.Bytes, res.Names = len(removed), size, removed
	if err != nil {
		return res, err
	}
	return res, nil
}

// isRunID reports whether id can name a receipt file: no separators, not
// a latest.* name, nothing a path could climb with.
func isRunID(id string) bool {
	if id == "" || id == "latest" || len(id) > 200 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
