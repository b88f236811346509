package ledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
)

// lockSources is n sources of one host, distinct by name.
func lockSources(host string, n int) []claim.Source {
	srcs := make([]claim.Source, n)
	for i := range srcs {
		name := fmt.Sprintf("%03d.md", i)
		srcs[i] = claim.Source{Host: host, Inbox: "/in", Name: name, SHA256: qSum(host + name), Size: 1}
	}
	return srcs
}

// Invariant: no source lost. Several goroutines on each of two ledgers on
// one file (as two processes have) take their turns, and every source
// each recorded is there.
func TestWritersQueue(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	var ls []*Ledger
	for range 2 {
		l, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ls = append(ls, l)
	}
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			l := ls[w%2]
			host := fmt.Sprintf("h%d", w)
			for _, s := range lockSources(host, each) {
				if _, err := l.RecordSources(ctx, "run", []claim.Source{s}); err != nil {
					t.Errorf("RecordSources %s: %v", host, err)
					return
				}
				if err := l.MarkArchived(ctx, []claim.Source{s}); err != nil {
					t.Errorf("MarkArchived %s: %v", host, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var n, acked int
	if err := ls[0].db.QueryRow(`SELECT count(*), sum(acked) FROM sources`).Scan(&n, &acked); err != nil {
		t.Fatal(err)
	}
	if n != writers*each || acked != n {
		t.Errorf("%d sources, %d acknowledged; want %d of each", n, acked, writers*each)
	}
}

// Invariant: a writer never writes while another of the process's has
// its turn, and is let in once it is given back. One that gives up waiting
// (its context ended) leaves nothing held.
func TestWriterWaitsForItsTurn(t *testing.T) {
	ctx := context.Background()
	l, err := Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	release, err := l.turn.take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := l.RecordSources(short, "run", lockSources("gave-up", 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RecordSources while another writer has the turn, context ended: %v, want the deadline", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.RecordSources(ctx, "run", lockSources("waited", 3))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("RecordSources went ahead while another writer had the turn: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("RecordSources after the turn was given back: %v", err)
	}
	if err := l.MarkArchived(ctx, lockSources("waited", 3)[:1]); err != nil {
		t.Fatal(err)
	}
	var n, acked int
	if err := l.db.QueryRow(`SELECT count(*), sum(acked) FROM sources`).Scan(&n, &acked); err != nil || n != 3 || acked != 1 {
		t.Fatalf("%d sources, %d acknowledged (%v); want 3 and 1, none of the writer that gave up", n, acked, err)
	}
}

// Invariant: no source lost, none recorded twice. One Apply records and
// marks archived the writes of several callers, each told how many of its
// sources were new.
func TestApplyGroup(t *testing.T) {
	ctx := context.Background()
	l, err := Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, b := lockSources("a", 4), lockSources("b", 3)
	if _, err := l.RecordSources(ctx, "run-0", a[:2]); err != nil {
		t.Fatal(err)
	}
	ws := []*Write{{Record: a}, {Record: b}, {Archived: a[:1]}}
	if err := l.Apply(ctx, "run-1", ws); err != nil {
		t.Fatal(err)
	}
	if ws[0].Added != 2 || ws[1].Added != 3 || ws[2].Added != 0 {
		t.Errorf("added %d, %d, %d; want 2, 3, 0", ws[0].Added, ws[1].Added, ws[2].Added)
	}
	var n, acked, run1 int
	if err := l.db.QueryRow(`SELECT count(*), sum(acked), sum(stored_run = 'run-1') FROM sources`).Scan(&n, &acked, &run1); err != nil {
		t.Fatal(err)
	}
	if n != 7 || acked != 1 || run1 != 5 {
		t.Errorf("%d sources, %d acknowledged, %d stored by run-1; want 7, 1, 5", n, acked, run1)
	}
}

// endingCtx ends, as far as its Err says, after its first n calls, as a
// run interrupted between two rows of a batch would; its Done channel
// never closes, so that only the loops' own checks can see the end.
type endingCtx struct {
	context.Context
	left atomic.Int32
}

func endAfter(n int32) *endingCtx {
	c := &endingCtx{Context: context.Background()}
	c.left.Store(n)
	return c
}

func (c *endingCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// Invariant: nothing recorded in part. A write transaction's per-row
// statements run without the context's end (rowContext), so its loops
// look at the context between rows: a batch whose run is interrupted in
// the middle stops there and commits none of its rows, and the next run
// finds the batch as it was.
func TestRowsStopWhenContextEnds(t *testing.T) {
	const n = 30
	t.Run("record", func(t *testing.T) {
		l := openTemp(t)
		if _, err := l.RecordSources(endAfter(n/2), "run", lockSources("laptop", n)); !errors.Is(err, context.Canceled) {
			t.Fatalf("recording through an interruption: %v", err)
		}
		if rows, err := l.PendingSources(context.Background()); err != nil || len(rows) != 0 {
			t.Fatalf("%d sources recorded (%v), want none", len(rows), err)
		}
	})
	t.Run("archived", func(t *testing.T) {
		l := openTemp(t)
		srcs := lockSources("laptop", n)
		if _, err := l.RecordSources(context.Background(), "run", srcs); err != nil {
			t.Fatal(err)
		}
		if err := l.MarkArchived(endAfter(n/2), srcs); !errors.Is(err, context.Canceled) {
			t.Fatalf("marking through an interruption: %v", err)
		}
		if left, err := l.Unarchived(context.Background(), "laptop"); err != nil || len(left) != n {
			t.Fatalf("%d sources still unarchived (%v), want all %d", len(left), err, n)
		}
	})
	t.Run("plans", func(t *testing.T) {
		l := openTemp(t)
		if _, err := l.RecordSources(context.Background(), "run", lockSources("laptop", n)); err != nil {
			t.Fatal(err)
		}
		rows, err := l.PendingSources(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var ps []*Plan
		for _, r := range rows {
			ps = append(ps, &Plan{SHA256: r.SHA256, SourceID: r.ID, Kind: "card", Action: "create", Target: "memory/cards/x-" + r.Name, After: r.SHA256, Content: []byte("card")})
		}
		if err := l.InsertPlans(endAfter(n/2), "run2", ps); !errors.Is(err, context.Canceled) {
			t.Fatalf("planning through an interruption: %v", err)
		}
		var planned int
		if err := l.db.QueryRow(`SELECT count(*) FROM plans`).Scan(&planned); err != nil || planned != 0 {
			t.Fatalf("%d plans of the interrupted batch (%v), want none", planned, err)
		}
	})
	t.Run("finish", func(t *testing.T) {
		l, fs := finishLedger(t, n)
		if err := l.FinishAll(endAfter(n/2), "run2", fs); !errors.Is(err, context.Canceled) {
			t.Fatalf("finishing through an interruption: %v", err)
		}
		if rows, err := l.PendingSources(context.Background()); err != nil || len(rows) != n {
			t.Fatalf("%d sources still pending (%v), want all %d", len(rows), err, n)
		}
	})
}
