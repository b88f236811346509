package ledger

import (
	"context"
	"fmt"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/receipts"
)

// RecordLegacy records files found already archived in processed/ (by
// another tool, or before this ledger) as ingested before, with result
// legacy, all in one transaction: each becomes a source (acknowledged,
// archived_as its processed/ name) and, unless its content already has a
// result, that content's result, so that a later copy of the same bytes
// is a duplicate and is never applied. A file the ledger already knows by
// host, inbox and archived name (or name) with these bytes is left as it
// is. It returns which of srcs were recorded.
func (l *Ledger) RecordLegacy(ctx context.Context, runID string, srcs []claim.Source) ([]bool, error) {
	recorded := make([]bool, len(srcs))
	tx, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	at := now()
	var nums numbers
	defer nums.close()
	for i, s := range srcs {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sources
			WHERE host = ? AND inbox = ? AND sha256 = ? AND (archived_as = ? OR name = ?)`,
			s.Host, s.Inbox, s.SHA256, s.ArchivedAs, s.Name).Scan(&n); err != nil {
			return nil, fmt.Errorf("ledger: legacy: %w", err)
		}
		if n > 0 {
			continue
		}
		num, err := nums.of(ctx, tx, s.SHA256)
		if err != nil {
			return nil, fmt.Errorf("ledger: legacy: %w", err)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO sources
			(sha256, sha_id, size, host, inbox, name, archived_as, acked, stored_at, stored_run, result, ingest_run, ingested_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)`,
			s.SHA256, num, s.Size, s.Host, s.Inbox, s.Name, s.ArchivedAs, at, runID, receipts.ResultLegacy, runID, at)
		if err != nil {
			return nil, fmt.Errorf("ledger: legacy: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return nil, fmt.Errorf("ledger: legacy: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO handoffs (id, sha256, source_id, result, run_id, ingested_at)
			VALUES (?, ?, ?, ?, ?, ?)`, num, s.SHA256, id, receipts.ResultLegacy, runID, at); err != nil {
			return nil, fmt.Errorf("ledger: legacy: %w", err)
		}
		recorded[i] = true
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("ledger: legacy: %w", err)
	}
	return recorded, nil
}
