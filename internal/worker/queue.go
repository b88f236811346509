package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest/ledger"
)

// RecordQueue is a run's one writer of what its pulls store and archive.
// Every host's pull, in a worker process (over its records connection,
// records.go) or in the run's own, sends its batches here, and
// whatever waits when the ledger is free goes into one transaction: the
// hosts share commits instead of queuing for the database's lock, each
// with a commit of its own. A pull is told its batch is recorded only once
// the transaction holding it has committed, so no remote copy is archived
// before its record is durable. See docs/design.md, "One writer for the
// ledger".
type RecordQueue struct {
	led   RecordStore
	runID string
	log   *slog.Logger
	reqs  chan *recordReq
	quit  chan struct{}
	ended chan struct{}

	mu     sync.Mutex
	done   map[string]*recorded // by host: what its committed writes held
	failed map[string]bool      // hosts one of whose stores failed
}

// recorded is what a host's committed writes held: sources newly stored,
// and sources marked archived. It is the run's own account of its pulls,
// whatever became of the worker that sent them.
type recorded struct{ stored, archived int }

// RecordStore is the ledger as the queue uses it (*ledger.Ledger).
type RecordStore interface {
	Apply(ctx context.Context, runID string, ws []*ledger.Write) error
	Unarchived(ctx context.Context, host string) ([]claim.Source, error)
}

// maxGroup bounds the writes in one transaction: a write is one batch of
// one host (at most 256 sources). maxGroupBytes bounds the contents they
// carry together: a batch holds up to 16 MiB.
const (
	maxGroup      = 64
	maxGroupBytes = 32 << 20
)

// contentSize is the size of the contents a request carries.
func contentSize(r *recordReq) int {
	n := 0
	for _, d := range r.w.Contents {
		n += len(d)
	}
	return n
}

type recordReq struct {
	host string
	w    ledger.Write
	done chan error
}

// errQueueClosed answers a write that came after the pulls ended.
var errQueueClosed = errors.New("the run's pulls are over: nothing more is recorded")

// StartRecordQueue starts the writer; Stop ends it.
func StartRecordQueue(led RecordStore, runID string, log *slog.Logger) *RecordQueue {
	q := &RecordQueue{led: led, runID: runID, log: log, reqs: make(chan *recordReq), quit: make(chan struct{}), ended: make(chan struct{}),
		done: map[string]*recorded{}, failed: map[string]bool{}}
	go q.run()
	return q
}

// Stop ends the writer once the write it is making is done. Writes sent
// later fail with errQueueClosed.
func (q *RecordQueue) Stop() {
	close(q.quit)
	<-q.ended
}

func (q *RecordQueue) run() {
	defer close(q.ended)
	for {
		var group []*recordReq
		select {
		case r := <-q.reqs:
			group = append(group, r)
		case <-q.quit:
			return
		}
		size := contentSize(group[0])
	gather:
		for len(group) < maxGroup && size < maxGroupBytes {
			select {
			case r := <-q.reqs:
				group = append(group, r)
				size += contentSize(r)
			default:
				break gather
			}
		}
		q.apply(group)
	}
}

// apply commits a group's writes together. If that fails, each is tried
// alone, so that one write's error is its own. A store of a host one of
// whose stores failed is refused, here and in every later group: a
// host's recorded batches stay a prefix of those it sent, in order
// (claim.QueueRecorder).
func (q *RecordQueue) apply(group []*recordReq) {
	live := group[:0]
	for _, r := range group {
		if !q.refuse(r) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	ws := make([]*ledger.Write, len(live))
	for i, r := range live {
		ws[i] = &r.w
	}
	began := time.Now()
	err := q.led.Apply(context.Background(), q.runID, ws)
	n := 0
	for _, w := range ws {
		n += len(w.Record) + len(w.Archived)
	}
	q.log.Debug("recorded a group", "writes", len(live), "sources", n, "took", time.Since(began))
	if err != nil && len(live) > 1 {
		q.log.Debug("a group of records failed; writing each alone", "writes", len(live), "err", err)
		for _, r := range live {
			if !q.refuse(r) {
				q.settle(r, q.led.Apply(context.Background(), q.runID, []*ledger.Write{&r.w}))
			}
		}
		return
	}
	for _, r := range live {
		q.settle(r, err)
	}
}

// refuse answers r with an error, and reports true, when r stores
// sources for a host one of whose stores failed.
func (q *RecordQueue) refuse(r *recordReq) bool {
	q.mu.Lock()
	failed := len(r.w.Record) > 0 && q.failed[r.host]
	q.mu.Unlock()
	if failed {
		r.done <- fmt.Errorf("not recorded: an earlier batch of host %q was not, and a host's batches are recorded in order; the next run stores them", r.host)
	}
	return failed
}

// failStores makes the queue refuse host's stores from now on (q.mu
// held): one of them failed, and a later one would record past it.
func (q *RecordQueue) failStores(host string) { q.failed[host] = true }

// settle answers r with err. A committed write (err nil) is added to its
// host's account first, so that a worker killed while waiting for the
// answer still has it counted; a failed store makes the queue refuse the
// host's later stores.
func (q *RecordQueue) settle(r *recordReq, err error) {
	q.mu.Lock()
	switch {
	case err != nil && len(r.w.Record) > 0:
		q.failStores(r.host)
	case err == nil:
		c := q.done[r.host]
		if c == nil {
			c = &recorded{}
			q.done[r.host] = c
		}
		c.stored += r.w.Added
		c.archived += len(r.w.Archived)
	}
	q.mu.Unlock()
	r.done <- err
}

// RecordedFor returns what the committed writes of host's pull held: the
// sources it newly stored and those it marked archived.
func (q *RecordQueue) RecordedFor(host string) (stored, archived int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c := q.done[host]; c != nil {
		return c.stored, c.archived
	}
	return 0, 0
}

// write sends w to the writer and waits until it is committed. A write
// whose caller gives up (ctx) may still be committed: a source recorded
// and not archived is only acknowledged by the next run.
func (q *RecordQueue) write(ctx context.Context, host string, w ledger.Write) (int, error) {
	r, err := q.enqueue(ctx, host, w)
	if err != nil {
		return 0, err
	}
	return r.wait(ctx)
}

// enqueue hands w to the writer and returns once it holds it: writes
// enqueued one after another are committed in that order.
func (q *RecordQueue) enqueue(ctx context.Context, host string, w ledger.Write) (*recordReq, error) {
	r := &recordReq{host: host, w: w, done: make(chan error, 1)}
	select {
	case q.reqs <- r:
		return r, nil
	case <-q.quit:
		return nil, errQueueClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// wait returns once r is committed or has failed, or ctx is done.
func (r *recordReq) wait(ctx context.Context) (int, error) {
	select {
	case err := <-r.done:
		return r.w.Added, err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Recorder is the claim.Recorder of one host's pull.
func (q *RecordQueue) Recorder(host string) claim.Recorder {
	return hostRecorder{q: q, host: host}
}

// hostRecorder writes through the queue only sources of its own host: a
// worker gone wrong cannot record or archive another host's files.
type hostRecorder struct {
	q    *RecordQueue
	host string
}

var _ claim.QueueRecorder = hostRecorder{}

func (h hostRecorder) check(srcs []claim.Source) error {
	for _, s := range srcs {
		if s.Host != h.host {
			return fmt.Errorf("a source of host %q sent for host %q", s.Host, h.host)
		}
	}
	return nil
}

// StoreSources stores contents and records srcs as stored by the queue's
// run, whatever runID says: a worker's sources belong to the run that
// started it. Each source's content must come with it, and nothing else:
// a worker cannot record a source without its bytes, or store bytes no
// source of its host names.
func (h hostRecorder) StoreSources(ctx context.Context, runID string, srcs []claim.Source, contents map[string][]byte) (int, error) {
	wait, err := h.QueueSources(ctx, runID, srcs, contents)
	if err != nil {
		return 0, err
	}
	return wait()
}

// QueueSources checks a batch as StoreSources does and returns once the
// queue holds it. A batch refused here counts as a failed store: the
// host's later ones are refused too.
func (h hostRecorder) QueueSources(ctx context.Context, _ string, srcs []claim.Source, contents map[string][]byte) (wait func() (int, error), err error) {
	if err := h.checkStore(srcs, contents); err != nil {
		h.q.mu.Lock()
		h.q.failStores(h.host)
		h.q.mu.Unlock()
		return nil, err
	}
	r, err := h.q.enqueue(ctx, h.host, ledger.Write{Record: srcs, Contents: contents})
	if err != nil {
		return nil, err
	}
	return func() (int, error) { return r.wait(ctx) }, nil
}

// checkStore checks that srcs are the host's and come each with its
// content, and with no other.
func (h hostRecorder) checkStore(srcs []claim.Source, contents map[string][]byte) error {
	if err := h.check(srcs); err != nil {
		return err
	}
	named := make(map[string]bool, len(srcs))
	for _, s := range srcs {
		if _, ok := contents[s.SHA256]; !ok {
			return fmt.Errorf("source %s of host %q sent without its content", s.Name, h.host)
		}
		named[s.SHA256] = true
	}
	for sha := range contents {
		if !named[sha] {
			return fmt.Errorf("a content (%.12s) no source of host %q names", sha, h.host)
		}
	}
	return nil
}

func (h hostRecorder) MarkArchived(ctx context.Context, srcs []claim.Source) error {
	if err := h.check(srcs); err != nil {
		return err
	}
	_, err := h.q.write(ctx, h.host, ledger.Write{Archived: srcs})
	return err
}

func (h hostRecorder) Unarchived(ctx context.Context, host string) ([]claim.Source, error) {
	if host != h.host {
		return nil, fmt.Errorf("the unarchived sources of host %q asked for host %q", host, h.host)
	}
	return h.q.led.Unarchived(ctx, host)
}
