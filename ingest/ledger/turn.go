package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// writeTurn lets one of a process's writers at the ledger at a time. The
// connection pool gives each goroutine a connection of its own, and SQLite
// alone would make a writer that finds the database locked sleep and try
// again, up to 100 ms at a time: the lock sat idle while writers slept, and
// one could lose every race for seconds. A writer waiting for its turn is
// let in as soon as the one before it is done. Other processes' writers
// (there are none during a run: every command that writes holds the
// workspace lock, and a run's pull workers write through the run's record
// queue) are still kept out by SQLite's own locking.
type writeTurn chan struct{}

// errTurnWait is the end of a wait longer than busyTimeout.
var errTurnWait = errors.New("another writer has held the ledger for too long")

// take waits for the turn until ctx ends or busyTimeout passes, and
// returns the function that gives it back.
func (t writeTurn) take(ctx context.Context) (func(), error) {
	if t == nil {
		return nil, errors.New("ledger: opened for reading only")
	}
	timeout := time.NewTimer(busyTimeout)
	defer timeout.Stop()
	select {
	case t <- struct{}{}:
		return func() { <-t }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timeout.C:
		return nil, fmt.Errorf("ledger: %w (%s)", errTurnWait, busyTimeout)
	}
}

// writeTx is a write transaction that holds the turn until it is
// committed or rolled back.
type writeTx struct {
	*sql.Tx
	release func()
	ckpt    *checkpointer
	done    bool
}

func (t *writeTx) Commit() error {
	defer t.end()
	err := t.Tx.Commit()
	if err == nil {
		t.ckpt.committed()
	}
	return err
}

func (t *writeTx) Rollback() error {
	defer t.end()
	return t.Tx.Rollback()
}

func (t *writeTx) end() {
	if !t.done {
		t.done = true
		t.release()
	}
}

// begin starts a write transaction in its turn (the driver's _txlock
// makes it BEGIN IMMEDIATE, so it takes SQLite's write lock at once too).
func (l *Ledger) begin(ctx context.Context) (*writeTx, error) {
	release, err := l.turn.take(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		release()
		return nil, err
	}
	return &writeTx{Tx: tx, release: release, ckpt: l.ckpt}, nil
}

// rowContext is ctx without its end, for the statements a write
// transaction runs once for each of its rows. For a statement whose
// context can end, the driver starts a goroutine to watch it and sets a
// progress handler, which cost more than a one-row statement itself; the
// loops check ctx between rows instead, and database/sql rolls the
// transaction back once ctx ends.
func rowContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// exec runs one writing statement in its turn.
func (l *Ledger) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	release, err := l.turn.take(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := l.db.ExecContext(ctx, query, args...)
	if err == nil {
		l.ckpt.committed()
	}
	return res, err
}
