package ledger

import (
	"context"
	"fmt"

	"github.com/handoff-sync/handoff/receipts"
)

// TargetWrite is a card or document a handoff from an inbox wrote: promoted,
// routed, or accepted in review into it.
type TargetWrite struct {
	Host, Inbox, Target string
}

// Writes returns every (host, inbox, target) a handoff ever wrote, for
// the mirror's privacy rule (a private handoff's cards and documents
// reach no other host). Every source with a content counts, not only the
// first: a copy from a private inbox makes the target private too. A
// content whose handoff row a return made a review item (returns.go)
// still wrote what its done plan says.
func (l *Ledger) Writes(ctx context.Context) ([]TargetWrite, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT DISTINCT t.host, t.inbox, h.target
			FROM sources t JOIN handoffs h ON h.id = t.sha_id
			WHERE h.result IN (?, ?) AND h.target != ''
		UNION
		SELECT DISTINCT t.host, t.inbox, d.target
			FROM decisions d JOIN sources t ON t.sha256 = d.sha256
			WHERE d.decision = ? AND d.state IN (?, ?) AND d.result IN (?, ?) AND d.target != ''
		UNION
		SELECT DISTINCT t.host, t.inbox, p.target
			FROM handoffs h JOIN plans p ON p.sha_id = h.id JOIN sources t ON t.sha_id = h.id
			WHERE h.result NOT IN (?, ?) AND p.state = ? AND p.target != ''`,
		receipts.ResultPromoted, receipts.ResultRouted, DecisionAccepted, DecisionDone, DecisionPast, receipts.ResultPromoted, receipts.ResultRouted,
		receipts.ResultPromoted, receipts.ResultRouted, planDone)
	if err != nil {
		return nil, fmt.Errorf("ledger: writes: %w", err)
	}
	defer rows.Close()
	var out []TargetWrite
	for rows.Next() {
		var w TargetWrite
		if err := rows.Scan(&w.Host, &w.Inbox, &w.Target); err != nil {
			return nil, fmt.Errorf("ledger: writes: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: writes: %w", err)
	}
	return out, nil
}
