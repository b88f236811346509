package continuity

import (
	"context"
	"fmt"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
)

// maxHandoff bounds a spool file this package parses: a handoff is at
// most the manifest's max_file_size (64 MiB at the most).
const maxHandoff = 64 << 20

// Threads says the thread key (ingest.ThreadKey) of a handoff it knows,
// and whether it knows it.
type Threads func(sha string) (key string, known bool)

// Record writes into the ledger what a run learned: the repository of
// each inbox a pull read one for (claim.InboxReport.Repo), and, for the
// handoffs the run decided (shas), the handoff each continues: as
// threads says, for a handoff it knows (the ingester's Thread, of what it
// read already), else read from the spool (ingest.ThreadKey). threads may
// be nil.
func Record(ctx context.Context, led *ledger.Ledger, sp spool.Store, runID string, reports []claim.HostReport, shas []string, threads Threads) error {
	var rows []ledger.InboxRepo
	for _, rep := range reports {
		for _, in := range rep.Inboxes {
			if in.Repo == nil {
				continue
			}
			rows = append(rows, ledger.InboxRepo{Host: rep.Name, Inbox: in.Path, Repo: in.Repo.Path, Origin: in.Repo.Origin,
				Problem: in.Repo.Problem, Home: rep.Home})
		}
	}
	if err := led.RecordRepos(ctx, runID, rows); err != nil {
		return err
	}
	keys := map[string]string{}
	for _, sha := range shas {
		if _, done := keys[sha]; done {
			continue
		}
		key, known := "", false
		if threads != nil {
			key, known = threads(sha)
		}
		if !known {
			key = continuesOf(sp, sha)
		}
		keys[sha] = key
	}
	for sha, key := range keys {
		if key == "" {
			delete(keys, sha)
		}
	}
	if err := led.RecordThreads(ctx, keys); err != nil {
		return fmt.Errorf("continuity: %w", err)
	}
	return nil
}

// continuesOf returns the thread key of a stored handoff, "" when it has
// none or cannot be read.
func continuesOf(sp spool.Store, sha string) string {
	data, err := sp.Get(sha)
	if err != nil {
		return ""
	}
	return ingest.ThreadKey(data)
}
