package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migrationIdentity is the workspace table (migration 4): the identity
// `handoff init` gave the workspace, in one row, so that the ledger says
// which workspace it belongs to.
const migrationIdentity = `CREATE TABLE workspace (
		one         INTEGER PRIMARY KEY CHECK (one = 1),
		id          TEXT NOT NULL,
		created_at  TEXT NOT NULL,
		origin      TEXT NOT NULL,
		recorded_at TEXT NOT NULL
	);`

// Identity is the workspace identity a ledger records.
type Identity struct {
	ID        string
	CreatedAt time.Time
	Origin    string
}

// ErrOtherWorkspace means the ledger records another workspace's identity.
var ErrOtherWorkspace = errors.New("the ledger belongs to another workspace")

// Identity returns the workspace identity the ledger records; ok is false
// when it records none (a ledger made before identities, or a new one).
func (l *Ledger) Identity(ctx context.Context) (id Identity, ok bool, err error) {
	var created string
	err = l.db.QueryRowContext(ctx, `SELECT id, created_at, origin FROM workspace WHERE one = 1`).Scan(&id.ID, &created, &id.Origin)
	if errors.Is(err, sql.ErrNoRows) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, fmt.Errorf("ledger: workspace identity: %w", err)
	}
	if id.CreatedAt, err = time.Parse(time.RFC3339Nano, created); err != nil {
		return Identity{}, false, fmt.Errorf("ledger: workspace identity: created_at %q: %w", created, err)
	}
	return id, true, nil
}

// RecordIdentity records the workspace's identity, once: a ledger that
// records the same id is left as it is, one that records another is
// ErrOtherWorkspace (wrapped, naming both) and is not changed.
func (l *Ledger) RecordIdentity(ctx context.Context, id Identity) error {
	tx, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var have string
	err = tx.QueryRowContext(ctx, `SELECT id FROM workspace WHERE one = 1`).Scan(&have)
	switch {
	case err == nil && have == id.ID:
		return nil
	case err == nil:
		return fmt.Errorf("%w: it records workspace %s, not %s", ErrOtherWorkspace, have, id.ID)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("ledger: workspace identity: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO workspace (one, id, created_at, origin, recorded_at) VALUES (1, ?, ?, ?, ?)`,
		id.ID, id.CreatedAt.UTC().Format(time.RFC3339Nano), id.Origin, now()); err != nil {
		return fmt.Errorf("ledger: record the workspace identity: %w", err)
	}
	return tx.Commit()
}

// Identity returns the workspace identity the ledger records; see
// Ledger.Identity.
func (v *View) Identity(ctx context.Context) (Identity, bool, error) { return v.l.Identity(ctx) }
