package prune

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"

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
	keep := keptRuns(runs)
	var names []string
	for _, r := range runs {
		if r.Outcome == "" || r.FinishedAt.IsZero() || !r.FinishedAt.Before(opts.Before) || keep[r.ID] || !isRunID(r.ID) {
			continue
		}
		names = append(names, r.ID+".json")
	}
	return remove(ctx, opts.Dir, names, opts.DryRun)
}

// keptRuns are the runs whose receipts stay however old: the newest
// finished run of each mode (latest.json copies the newest sync's), and
// the newest that did not end ok.
func keptRuns(runs []ledger.RunRecord) map[string]bool {
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
	return keep
}

// remove removes the named receipts from dir, sorted.
func remove(ctx context.Context, dir string, names []string, dryRun bool) (ReceiptsResult, error) {
	res := ReceiptsResult{Names: []string{}}
	if len(names) == 0 {
		return res, nil
	}
	sort.Strings(names)
	removed, size, err := removeRegular(ctx, dir, names, dryRun, "receipts")
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

// Policy is how long sync keeps per-run receipts (manifest receipts:).
type Policy struct {
	Keep     time.Duration // a busy run's receipt; 0 keeps every receipt
	KeepIdle time.Duration // an idle run's, at most Keep; 0 means Keep
}

// Retain removes the per-run receipts the policy no longer keeps, as of
// now: a run's that finished more than Keep ago, and an idle run's
// (mode apply, outcome ok, nothing pulled, applied or published) that
// finished more than KeepIdle ago. Like Receipts it never removes
// latest.*, the newest receipt of each mode, the newest run's that was
// not ok, or a receipt of a run the ledger does not know or that has not
// finished. Whether a run was idle is read from its receipt (its counts
// and mirrors, which come before its handoffs); one that cannot be read
// is kept. The caller holds the workspace lock.
func Retain(ctx context.Context, l *ledger.Ledger, dir string, p Policy, now time.Time) (ReceiptsResult, error) {
	if p.Keep == 0 {
		return ReceiptsResult{Names: []string{}}, nil
	}
	if p.KeepIdle == 0 || p.KeepIdle > p.Keep {
		p.KeepIdle = p.Keep
	}
	runs, err := l.Runs(ctx)
	if err != nil {
		return ReceiptsResult{Names: []string{}}, err
	}
	keep := keptRuns(runs)
	var names []string
	for _, r := range runs {
		if r.Outcome == "" || r.FinishedAt.IsZero() || keep[r.ID] || !isRunID(r.ID) {
			continue
		}
		age := now.Sub(r.FinishedAt)
		switch {
		case age > p.Keep:
		case age > p.KeepIdle && r.Mode == receipts.ModeApply && r.Outcome == receipts.OutcomeOK &&
			idle(filepath.Join(dir, r.ID+".json")):
		default:
			continue
		}
		names = append(names, r.ID+".json")
	}
	return remove(ctx, dir, names, false)
}

// idle reports whether the receipt at path is of a run that said nothing
// new (receipts.Receipt.NoUpdates). It decodes the receipt's fields up to
// its handoffs and stops there: a busy run's list of handoffs is never
// read. A receipt that is not a regular file, or not one this handoff
// reads, is not idle.
func idle(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	var r receipts.Receipt
	dec := json.NewDecoder(bufio.NewReader(f))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		switch t {
		case "handoffs":
			// Everything NoUpdates reads comes before the handoffs.
			return r.SchemaVersion == receipts.SchemaVersion && r.Outcome == receipts.OutcomeOK && r.NoUpdates()
		case "schema_version":
			err = dec.Decode(&r.SchemaVersion)
		case "outcome":
			err = dec.Decode(&r.Outcome)
		case "counts":
			err = dec.Decode(&r.Counts)
		case "hosts":
			err = dec.Decode(&r.Hosts)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return false
		}
	}
	return false
}
