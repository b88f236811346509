package prune

import (
	"context"
	"time"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/receipts"
)

// SpoolResult says what PruneSpool removed, or would remove in a dry run.
type SpoolResult struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Held counts the spool files that were old enough to go but stay for
	// a person: their handoff waits in review or the quarantine, or was
	// rejected less than the retention ago.
	Held int `json:"held"`
}

// SpoolOptions select the spool files PruneSpool removes.
type SpoolOptions struct {
	// Dir is the spool directory (<workspace>/.handoff/spool).
	Dir string
	// Before: a handoff whose latest source was ingested at or after this
	// time keeps its spool file, and so does one rejected at or after it.
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
// The exact bytes of a handoff a person may still act on are never
// removed: one that waits for review (no decision, or only abandoned
// ones), one whose decision is under way, and one rejected at or after
// opts.Before, so that a rejection can be taken back from the bytes it
// was about for as long as the retention lasts.
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
	held, err := heldForReview(ctx, l, opts.Before)
	if err != nil {
		return res, err
	}
	names := make([]string, 0, len(shas))
	for _, sha := range shas {
		if held[sha] {
			res.Held++
			continue
		}
		names = append(names, spool.Name(sha))
	}
	removed, size, err := removeRegular(ctx, opts.Dir, names, opts.DryRun, "spool")
	res.Files, res.Bytes = len(removed), size
	if err != nil {
		return res, err
	}
	return res, nil
}

// heldForReview returns the contents whose bytes stay for a person: those
// that wait (a review or malformed result and no decision started or
// done), those whose latest decision is still started, and those whose
// latest decision is a reject made at or after cutoff.
func heldForReview(ctx context.Context, l *ledger.Ledger, cutoff time.Time) (map[string]bool, error) {
	items, err := l.ReviewItems(ctx, true)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	shas := make([]string, 0, len(items))
	for _, it := range items {
		if it.Result == receipts.ResultReview || it.Result == receipts.ResultMalformed {
			held[it.SHA256] = true // waits, until a decision says otherwise
		}
		shas = append(shas, it.SHA256)
	}
	// The decisions come oldest first; the latest one that was not
	// abandoned says what became of the handoff (an abandoned one left it
	// waiting).
	const chunk = 500
	for len(shas) > 0 {
		n := min(chunk, len(shas))
		ds, err := l.DecisionsFor(ctx, shas[:n])
		if err != nil {
			return nil, err
		}
		shas = shas[n:]
		for _, d := range ds {
			switch {
			case d.State == ledger.DecisionAbandoned:
			case d.State == ledger.DecisionStarted:
				held[d.SHA256] = true
			case d.Decision == ledger.DecisionRejected, d.Decision == ledger.DecisionSuperseded:
				held[d.SHA256] = !d.At.Before(cutoff)
			default:
				held[d.SHA256] = false // accepted or edited: nothing waits
			}
		}
	}
	return held, nil
}
