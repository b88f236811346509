package ledger

import (
	"context"
	"fmt"
)

// migrationDrafts is migration 11: review drafts moved out of OpenClaw's
// memory, from memory/handoff-inbox/ to .handoff/review/ (layout.ReviewDir).
// The rows that name a draft are renamed here, in the migration's own
// transaction; the files follow when the ingester opens the workspace
// (ingest.moveLegacyDrafts), which finds them by these names. The prefix
// is spelled out: a migration is frozen text and must not follow a
// constant that may change again.
const migrationDrafts = `UPDATE handoffs SET target = '.handoff/review/' || substr(target, 22)
		WHERE substr(target, 1, 21) = 'memory/handoff-inbox/';
	UPDATE decisions SET draft = '.handoff/review/' || substr(draft, 22)
		WHERE substr(draft, 1, 21) = 'memory/handoff-inbox/';
	UPDATE decisions SET target = '.handoff/review/' || substr(target, 22)
		WHERE substr(target, 1, 21) = 'memory/handoff-inbox/';`

// DraftNames returns the names of the review drafts the ledger has ever
// named under dir (a handoff's review target, or a decision's draft),
// without dir: the files handoff made there.
func (l *Ledger) DraftNames(ctx context.Context, dir string) (map[string]bool, error) {
	prefix := dir + "/"
	rows, err := l.db.QueryContext(ctx, `SELECT substr(target, ?) FROM handoffs WHERE substr(target, 1, ?) = ?
		UNION SELECT substr(draft, ?) FROM decisions WHERE substr(draft, 1, ?) = ?`,
		len(prefix)+1, len(prefix), prefix, len(prefix)+1, len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("ledger: drafts: %w", err)
	}
	defer rows.Close()
	names := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("ledger: drafts: %w", err)
		}
		names[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: drafts: %w", err)
	}
	return names, nil
}
