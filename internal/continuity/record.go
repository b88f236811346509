package continuity

import (
	"context"
	"fmt"
	"regexp"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
)

// maxHandoff bounds a spool file this package parses: a handoff is at
// most the manifest's max_file_size (64 MiB at the most).
const maxHandoff = 64 << 20

// Record writes into the ledger what a run learned: the repository of
// each inbox a pull read one for (claim.InboxReport.Repo), and, for the
// handoffs the run decided (shas), the handoff each continues.
func Record(ctx context.Context, led *ledger.Ledger, sp spool.Store, runID string, reports []claim.HostReport, shas []string) error {
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
	threads := map[string]string{}
	for _, sha := range shas {
		if _, done := threads[sha]; done {
			continue
		}
		threads[sha] = ""
		if key := continuesOf(sp, sha); key != "" {
			threads[sha] = key
		}
	}
	for sha, key := range threads {
		if key == "" {
			delete(threads, sha)
		}
	}
	if err := led.RecordThreads(ctx, threads); err != nil {
		return fmt.Errorf("continuity: %w", err)
	}
	return nil
}

// continuesRE finds a Continues heading, as the parser reads one.
var continuesRE = regexp.MustCompile(`(?im)^##[ \t]+continues[ \t\r]*$`)

// continuesOf returns the thread key of a stored handoff, "" when it has
// none or cannot be read.
func continuesOf(sp spool.Store, sha string) string {
	data, err := sp.Get(sha)
	if err != nil || len(data) > maxHandoff {
		return ""
	}
	// Most handoffs continue nothing: skip the parse for them.
	if !continuesRE.Match(data) {
		return ""
	}
	h, err := ingest.Parse(data)
	if err != nil {
		return ""
	}
	return ingest.ContinuesKey(h.Continues)
}
