package ledger

import (
	"context"
)

// migrationTexts is migration 12: the normal text's hash of each content
// that is not in normal form (CRLF line ends, trailing whitespace, blank
// lines around it; see ingest.NormalText), keyed by the content's
// number. Two handoffs with one normal text are the same handoff: the
// later is a duplicate (reason same-text) and is never applied. A content
// already in normal form has no row: its normal text's hash is its own
// SHA-256, which handoffs answers for. Contents given a result before
// this migration have no row either; docs/handoff-format.md says so.
const migrationTexts = `CREATE TABLE texts (
		id   INTEGER PRIMARY KEY,
		norm TEXT NOT NULL
	);
	CREATE INDEX texts_norm ON texts (norm);`

// insertText records a content's normal text's hash under its number.
const insertText = `INSERT OR IGNORE INTO texts (id, norm) VALUES (` + shaID + `, ?)`

// KnownTexts returns which of the given hashes are the normal text of a
// content not in normal form that has a result: a handoff in normal form
// whose hash is among them is the same handoff as that content. One
// query for a whole batch.
func (l *Ledger) KnownTexts(ctx context.Context, norms []string) (map[string]bool, error) {
	return l.known(ctx, `SELECT DISTINCT norm FROM texts WHERE norm IN `, norms)
}

// SameText reports whether a content with a result has the normal text
// whose hash is norm: a content in normal form whose SHA-256 is norm, or
// one not in normal form recorded with it.
func (l *Ledger) SameText(ctx context.Context, norm string) (bool, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM handoffs WHERE id = `+shaID+`) + (SELECT count(*) FROM texts WHERE norm = ?)`, norm, norm).Scan(&n)
	return n > 0, err
}
