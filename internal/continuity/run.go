package continuity

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/repoid"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// Run is a sync's continuity step, after its last ingest pass: Record
// what the pulls found and the run decided, then, when ingest succeeded,
// Build the repos/ files of each host that asks for them. A failure to
// record is logged and changes nothing else (repos/ then shows what
// earlier runs recorded). A failure to build is returned: the caller
// publishes no mirror that asks for repos/ this run (publishing it
// without its repos/ files would remove them), makes those hosts'
// mirrors fail, and ingest is untouched.
func Run(ctx context.Context, led *ledger.Ledger, sp spool.Store, m *manifest.Manifest, hosts []manifest.HostConfig,
	reports []claim.HostReport, shas []string, threads Threads, runID string, now time.Time, ingested bool, log *slog.Logger) (map[string][]mirror.File, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := Record(ctx, led, sp, runID, reports, shas, threads); err != nil {
		log.Warn("continuity: could not record repositories and threads; repos/ shows what earlier runs recorded", "err", err)
	}
	if !ingested {
		return nil, nil
	}
	files, err := Build(ctx, Input{Ledger: led, Spool: sp, Manifest: m, Now: now, Log: log}, hosts)
	if err != nil {
		log.Warn("continuity: could not build repos/", "err", err)
		return nil, fmt.Errorf("repos/ could not be built (%v); the mirror keeps what it had", err)
	}
	return files, nil
}

// ReceiptRepo is a pull's repository identity as the receipt shows it.
func ReceiptRepo(id *repoid.Identity) *receipts.Repo {
	if id == nil {
		return nil
	}
	return &receipts.Repo{Path: id.Path, Origin: id.Origin, Problem: id.Problem}
}

// EntrySHAs are the hashes of a run's ingest entries, for Record.
func EntrySHAs(entries []ingest.Entry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.SHA256)
	}
	return out
}
