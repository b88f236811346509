package ledger

import (
	"context"
	"sync"
	"time"
)

// checkpointEvery is the least time between two of the checkpointer's
// checkpoints.
const checkpointEvery = 200 * time.Millisecond

// checkpointer folds the log into the database beside the writers. SQLite
// checkpoints in the commit that crosses wal_autocheckpoint, while that
// writer still holds its turn: on a big ledger one took up to 0.8 s, and
// every writer waited for it. A passive checkpoint on a connection of its
// own waits for nobody and makes nobody wait; it copies only frames
// already committed, so it changes nothing a crash or power loss leaves.
// The autocheckpoint stays as the bound if this one falls behind. See
// docs/design.md, "Checkpoints beside the writers".
type checkpointer struct {
	kick chan struct{} // a commit since the last checkpoint
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startCheckpoints starts l's checkpointer.
func (l *Ledger) startCheckpoints() {
	c := &checkpointer{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	l.ckpt = c
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stop:
				return
			case <-c.kick:
			}
			// An error (the database closed under it, say) is left to
			// the autocheckpoint and to Close, which fold the log too.
			l.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
			select {
			case <-c.stop:
				return
			case <-time.After(checkpointEvery):
			}
		}
	}()
}

// committed tells the checkpointer that a write transaction committed.
func (c *checkpointer) committed() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// close stops the checkpointer and waits for a checkpoint under way.
func (c *checkpointer) close() {
	if c == nil {
		return
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
