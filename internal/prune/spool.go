package prune

import (
	"context"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/receipts"
)

// SpoolResult says what PruneSpool removed, or would remove in a dry run.
type SpoolResult struct {
	// Files counts the stored contents removed: rows of the ledger's
	// store, and files of the spool directory an earlier version wrote
	// (a content in both counts once).
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Held counts the contents that were old enough to go but stay for
	// a person: their handoff waits in review or the quarantine, or was
	// rejected less than the retention ago.
	Held int `json:"held"`
	// Temps counts the temporary files an earlier version's crashed
	// writer left in the legacy spool directory, removed (never in a dry
	// run). Nothing writes there any more, so a run does not look.
	Temps int `json:"temps"`
	// Notes counts the contents removed whose notes (what RECENT.md of
	// the mirror's repos/ shows of them) the ledger keeps: repos/ does
	// not change for them. Unkept counts the others: RECENT.md shows any
	// of them it lists as no longer stored.
	Notes  int `json:"notes"`
	Unkept int `json:"unkept"`
}

// SpoolOptions select the stored contents PruneSpool removes.
type SpoolOptions struct {
	// Dir is the spool directory earlier versions wrote
	// (<workspace>/.handoff/spool); it may not exist.
	Dir string
	// Before: a handoff whose latest source was ingested at or after this
	// time keeps its bytes, and so does one rejected at or after it.
	Before time.Time
	// Hosts, when not empty, limits pruning to handoffs whose every source
	// came from one of these hosts.
	Hosts []string
	// DryRun counts what would go and removes nothing.
	DryRun bool
}

// Spool removes the stored bytes of handoffs that are done with, from
// the ledger's store and from the legacy spool directory: every source
// with that content has a result, none of them is malformed (the store is
// the quarantine for malformed content), no plan for it is unfinished, and
// the latest source was ingested before opts.Before. No other ledger row
// changes; a later copy of the same content is stored again and recorded
// as a duplicate, so nothing depends on the bytes once the handoff is
// finished.
//
// The exact bytes of a handoff a person may still act on are never
// removed: one that waits for review (no decision, or only abandoned
// ones), one whose decision is under way, and one rejected at or after
// opts.Before, so that a rejection can be taken back from the bytes it
// was about for as long as the retention lasts.
//
// In the legacy directory only regular files whose names the ledger
// yields are removed, and the temporary files an earlier version's
// crashed writer left: anything else (names the ledger does not know,
// symlinks, directories) is left alone. The caller holds
// the workspace lock, so no run is storing or ingesting meanwhile. The
// ledger's file keeps its size; SQLite reuses the pages freed for the
// contents stored next (see docs/design.md, "The store").
func Spool(ctx context.Context, l *ledger.Ledger, opts SpoolOptions) (SpoolResult, error) {
	var res SpoolResult
	if !opts.DryRun {
		n, err := removeLegacyTemps(opts.Dir)
		if err != nil {
			return res, err
		}
		res.Temps = n
	}
	shas, err := l.PrunableSpool(ctx, opts.Before, opts.Hosts)
	if err != nil || len(shas) == 0 {
		return res, err
	}
	held, err := heldForReview(ctx, l, opts.Before)
	if err != nil {
		return res, err
	}
	gone := make([]string, 0, len(shas))
	names := make([]string, 0, len(shas))
	for _, sha := range shas {
		if held[sha] {
			res.Held++
			continue
		}
		gone = append(gone, sha)
		names = append(names, spool.Name(sha))
	}
	kept, err := l.NotesKept(ctx, gone)
	if err != nil {
		return res, err
	}
	res.Notes, res.Unkept = kept, len(gone)-kept
	counted := map[string]bool{}
	if opts.DryRun {
		sizes, err := l.ContentSizes(ctx, gone)
		if err != nil {
			return res, err
		}
		for sha, z := range sizes {
			counted[sha] = true
			res.Bytes += z
		}
	} else {
		deleted, size, err := l.DeleteContents(ctx, gone)
		if err != nil {
			return res, err
		}
		for _, sha := range deleted {
			counted[sha] = true
		}
		res.Bytes += size
	}
	removed, size, err := removeRegular(ctx, opts.Dir, names, opts.DryRun, "spool")
	for _, name := range removed {
		counted[strings.TrimSuffix(name, ".md")] = true
	}
	res.Files, res.Bytes = len(counted), res.Bytes+size
	return res, err
}

// removeLegacyTemps removes the temporary files in the legacy spool
// directory dir, if it exists. The caller holds the workspace lock, and
// this version never writes there, so each is a crashed writer's.
func removeLegacyTemps(dir string) (int, error) {
	legacy, err := spool.OpenReadOnly(dir)
	if err != nil || legacy == nil {
		return 0, err
	}
	defer legacy.Close()
	return legacy.RemoveTemps()
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
	// waiting, and a past one was about it before it returned).
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
			case d.State == ledger.DecisionAbandoned, d.State == ledger.DecisionPast:
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
