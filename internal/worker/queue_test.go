package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest/ledger"
)

// fakeStore is a RecordStore that keeps what it was given, holds its first
// Apply until hold is closed (nil: it does not), and fails any Apply that
// holds a source named poison.
type fakeStore struct {
	hold   chan struct{}
	poison string

	mu      sync.Mutex
	applies [][]string // the sources' names of each Apply that committed
	held    bool
}

func (f *fakeStore) Apply(_ context.Context, _ string, ws []*ledger.Write) error {
	f.mu.Lock()
	first := !f.held
	f.held = true
	f.mu.Unlock()
	if first && f.hold != nil {
		<-f.hold
	}
	var names []string
	for _, w := range ws {
		for _, s := range append(slices.Clone(w.Record), w.Archived...) {
			if s.Name == f.poison {
				return fmt.Errorf("cannot write %s", s.Name)
			}
			names = append(names, s.Name)
		}
		w.Added = len(w.Record)
	}
	f.mu.Lock()
	f.applies = append(f.applies, names)
	f.mu.Unlock()
	return nil
}

func (f *fakeStore) Unarchived(context.Context, string) ([]claim.Source, error) { return nil, nil }

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func src(host, name string) claim.Source {
	return claim.Source{Host: host, Inbox: "/in", Name: name, SHA256: strings.Repeat("a", 64), Size: 1}
}

// The writes that wait while the ledger is busy go in one transaction,
// and each writer learns its own count only after that commit. Invariant:
// no source lost, none recorded before its caller is told.
// fakeContents is the content of every src: all share one hash, and the
// fake store checks none.
var fakeContents = map[string][]byte{strings.Repeat("a", 64): []byte("a")}

func TestRecordQueueGroupsWaitingWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStore{hold: make(chan struct{})}
		q := StartRecordQueue(f, "run", quietLog())
		defer q.Stop()
		ctx := context.Background()
		var wg sync.WaitGroup
		wg.Go(func() {
			if n, err := q.Recorder("h0").StoreSources(ctx, "run", []claim.Source{src("h0", "first.md")}, fakeContents); n != 1 || err != nil {
				t.Errorf("first write: %d, %v", n, err)
			}
		})
		synctest.Wait() // the first Apply is under way, held
		const waiting = 5
		for i := range waiting {
			host := fmt.Sprintf("h%d", i+1)
			wg.Go(func() {
				n, err := q.Recorder(host).StoreSources(ctx, "run", []claim.Source{src(host, host+"-a.md"), src(host, host+"-b.md")}, fakeContents)
				if n != 2 || err != nil {
					t.Errorf("write of %s: %d, %v; want 2 added", host, n, err)
				}
			})
		}
		synctest.Wait()
		if len(f.applies) != 0 {
			t.Fatalf("%d writes committed while the first was held", len(f.applies))
		}
		close(f.hold)
		wg.Wait()
		if len(f.applies) != 2 || len(f.applies[1]) != 2*waiting {
			t.Fatalf("commits %q; want the first alone, then the %d waiting writes in one", f.applies, waiting)
		}
	})
}

// heldQueue starts a queue over a fakeStore that fails any write of
// poison, and returns once its first commit (h0's archive record of
// first.md, in wg) is under way and held until f.hold is closed. It runs
// in a synctest bubble; the caller stops the queue.
func heldQueue(poison string) (*fakeStore, *RecordQueue, *sync.WaitGroup) {
	f := &fakeStore{hold: make(chan struct{}), poison: poison}
	q := StartRecordQueue(f, "run", quietLog())
	wg := &sync.WaitGroup{}
	wg.Go(func() { q.Recorder("h0").MarkArchived(context.Background(), []claim.Source{src("h0", "first.md")}) })
	synctest.Wait()
	return f, q, wg
}

// A group that fails is written again one write at a time: one bad write
// fails only its own caller. Invariant: no source lost because of another
// host's error. The three writes are three hosts': a host's later batches
// are refused once one of its own failed (TestRecordQueueKeepsAHostsBatchesAPrefix),
// and their order here is the scheduler's.
func TestRecordQueueFailureIsItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, wg := heldQueue("bad.md")
		defer q.Stop()
		ctx := context.Background()
		errs := make([]error, 3)
		for i, name := range []string{"ok1.md", "bad.md", "ok2.md"} {
			host := fmt.Sprintf("h%d", i+1)
			wg.Go(func() {
				_, errs[i] = q.Recorder(host).StoreSources(ctx, "run", []claim.Source{src(host, name)}, fakeContents)
			})
		}
		synctest.Wait()
		close(f.hold)
		wg.Wait()
		if errs[0] != nil || errs[1] == nil || errs[2] != nil {
			t.Fatalf("errors %v; want only the write of bad.md to fail", errs)
		}
		var all []string
		for _, a := range f.applies {
			all = append(all, a...)
		}
		slices.Sort(all)
		if want := []string{"first.md", "ok1.md", "ok2.md"}; !slices.Equal(all, want) {
			t.Fatalf("committed %q, want %q", all, want)
		}
	})
}

// Invariant: nothing written where it does not belong. A host's recorder
// refuses sources of another host and questions about another host,
// before anything reaches the ledger; and a write after the pulls ended
// fails instead of waiting forever.
func TestHostRecorderOwnHostOnly(t *testing.T) {
	f := &fakeStore{}
	q := StartRecordQueue(f, "run", quietLog())
	rec := q.Recorder("laptop")
	ctx := context.Background()
	if _, err := rec.StoreSources(ctx, "run", []claim.Source{src("laptop", "a.md"), src("server", "b.md")}, fakeContents); err == nil {
		t.Error("StoreSources took a source of another host")
	}
	// Invariant: no source recorded without its bytes, and no bytes
	// stored that no source of the host names.
	if _, err := rec.StoreSources(ctx, "run", []claim.Source{src("laptop", "a.md")}, nil); err == nil {
		t.Error("StoreSources recorded a source sent without its content")
	}
	stray := map[string][]byte{strings.Repeat("a", 64): []byte("a"), strings.Repeat("b", 64): []byte("b")}
	if _, err := rec.StoreSources(ctx, "run", []claim.Source{src("laptop", "a.md")}, stray); err == nil {
		t.Error("StoreSources stored a content no source names")
	}
	if err := rec.MarkArchived(ctx, []claim.Source{src("server", "b.md")}); err == nil {
		t.Error("MarkArchived took a source of another host")
	}
	if _, err := rec.Unarchived(ctx, "server"); err == nil {
		t.Error("Unarchived answered for another host")
	}
	if len(f.applies) != 0 {
		t.Errorf("the ledger was written: %q", f.applies)
	}
	q.Stop()
	if _, err := rec.StoreSources(ctx, "run", []claim.Source{src("laptop", "a.md")}, fakeContents); !errors.Is(err, errQueueClosed) {
		t.Errorf("StoreSources after stop: %v, want errQueueClosed", err)
	}
}

// Invariant: what a pull stored is counted whatever became of the pull.
// The queue counts each host's committed writes itself, also one whose
// caller gave up waiting (a worker killed by an interrupted run), and
// never a write that failed.
func TestRecordQueueCountsWhatWasCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStore{hold: make(chan struct{}), poison: "bad.md"}
		q := StartRecordQueue(f, "run", quietLog())
		ctx, cancel := context.WithCancel(context.Background())
		gaveUp := make(chan error, 1)
		go func() {
			_, err := q.Recorder("laptop").StoreSources(ctx, "run", []claim.Source{src("laptop", "a.md"), src("laptop", "b.md")}, fakeContents)
			gaveUp <- err
		}()
		synctest.Wait() // the write is held in the ledger
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("the caller that gave up got %v", err)
		}
		close(f.hold) // ... and commits after all
		bg := context.Background()
		if err := q.Recorder("laptop").MarkArchived(bg, []claim.Source{src("laptop", "a.md")}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Recorder("server").StoreSources(bg, "run", []claim.Source{src("server", "bad.md")}, fakeContents); err == nil {
			t.Fatal("the poisoned write was committed")
		}
		q.Stop()
		if s, a := q.RecordedFor("laptop"); s != 2 || a != 1 {
			t.Errorf("laptop: stored %d, archived %d; want 2 and 1", s, a)
		}
		if s, a := q.RecordedFor("server"); s != 0 || a != 0 {
			t.Errorf("server: stored %d, archived %d for a write that failed", s, a)
		}
	})
}

// Invariant: none applied twice, none lost, in the order found. A host's
// batches queued one after another (claim.QueueRecorder) are committed in
// that order, and once one fails every later store of that host fails
// too, even one that would commit: what is recorded of the host is a
// prefix of what it sent, so the next run, storing the rest, stores it
// after. Its archive records, and other hosts' writes, still commit; so
// does nothing of a batch the recorder refused outright.
func TestRecordQueueKeepsAHostsBatchesAPrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, wg := heldQueue("bad.md")
		defer q.Stop()
		ctx := context.Background()
		h1 := q.Recorder("h1").(claim.QueueRecorder)
		var waits []func() (int, error)
		wg.Go(func() {
			for _, name := range []string{"ok1.md", "bad.md", "ok2.md"} {
				wait, err := h1.QueueSources(ctx, "run", []claim.Source{src("h1", name)}, fakeContents)
				if err != nil {
					t.Errorf("queue %s: %v", name, err)
					return
				}
				waits = append(waits, wait)
			}
		})
		wg.Go(func() {
			if _, err := q.Recorder("h2").StoreSources(ctx, "run", []claim.Source{src("h2", "other.md")}, fakeContents); err != nil {
				t.Errorf("another host's store: %v", err)
			}
		})
		synctest.Wait()
		close(f.hold)
		wg.Wait()
		var errs []error
		for _, wait := range waits {
			_, err := wait()
			errs = append(errs, err)
		}
		if len(errs) != 3 || errs[0] != nil || errs[1] == nil || errs[2] == nil || !strings.Contains(errs[2].Error(), "an earlier batch") {
			t.Fatalf("errors %v; want ok1 committed, bad failed, ok2 refused after it", errs)
		}
		if _, err := q.Recorder("h1").StoreSources(ctx, "run", []claim.Source{src("h1", "later.md")}, fakeContents); err == nil {
			t.Fatal("a later store of h1 committed after one of its batches failed")
		}
		if err := q.Recorder("h1").MarkArchived(ctx, []claim.Source{src("h1", "ok1.md")}); err != nil {
			t.Fatalf("h1's archive record refused: %v", err)
		}
		// A batch the recorder refuses before queueing counts as failed.
		h3 := q.Recorder("h3").(claim.QueueRecorder)
		if _, err := h3.QueueSources(ctx, "run", []claim.Source{src("h3", "bare.md")}, nil); err == nil {
			t.Fatal("a source without its content was queued")
		}
		if _, err := q.Recorder("h3").StoreSources(ctx, "run", []claim.Source{src("h3", "next.md")}, fakeContents); err == nil {
			t.Fatal("h3's next store committed after its batch was refused")
		}
		var all []string
		for _, a := range f.applies {
			all = append(all, a...)
		}
		slices.Sort(all)
		if want := []string{"first.md", "ok1.md", "ok1.md", "other.md"}; !slices.Equal(all, want) {
			t.Fatalf("committed %q, want %q", all, want)
		}
		if stored, archived := q.RecordedFor("h1"); stored != 1 || archived != 1 {
			t.Fatalf("h1 counted %d stored, %d archived; want 1 and 1", stored, archived)
		}
	})
}
