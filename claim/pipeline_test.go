package claim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/transport"
)

// slowFS delays every call, as a link with a round trip would, and records
// how many calls were in flight at once and in which order sources were
// recorded relative to reads.
type slowFS struct {
	transport.FS
	delay time.Duration

	cur, peak     atomic.Int64
	reads, peakRd atomic.Int64
}

func (s *slowFS) enter(read bool) func() {
	n := s.cur.Add(1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	if read {
		r := s.reads.Add(1)
		for p := s.peakRd.Load(); r > p && !s.peakRd.CompareAndSwap(p, r); p = s.peakRd.Load() {
		}
	}
	time.Sleep(s.delay)
	return func() {
		s.cur.Add(-1)
		if read {
			s.reads.Add(-1)
		}
	}
}

func (s *slowFS) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	defer s.enter(false)()
	return s.FS.Lstat(ctx, name)
}

func (s *slowFS) ReadDir(ctx context.Context, name string, max int) ([]transport.FileInfo, error) {
	defer s.enter(false)()
	return s.FS.ReadDir(ctx, name, max)
}

func (s *slowFS) ReadFile(ctx context.Context, name string, limit int64) ([]byte, transport.FileInfo, error) {
	defer s.enter(true)()
	return s.FS.ReadFile(ctx, name, limit)
}

func (s *slowFS) Rename(ctx context.Context, oldname, newname string) error {
	defer s.enter(false)()
	return s.FS.Rename(ctx, oldname, newname)
}

// slowPullEnv builds specs below root and returns a spool, a recorder, the
// guard transport (checking the pipeline's invariants) slowed by delay per
// call, and a config walking root to depth 1.
func slowPullEnv(t *testing.T, root string, delay time.Duration, specs []string) (*spool.Dir, *fakeRecorder, *slowFS, claim.Config) {
	t.Helper()
	build(t, root, specs...)
	sp, err := spool.Open(filepath.Join(tempRoot(t), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	rec := newRecorder()
	guard := &guardFS{t: t, spool: sp, rec: rec, within: root, max: mib}
	cfg := baseConfig()
	cfg.Roots = []claim.Root{{Path: root, MaxDepth: 1}}
	return sp, rec, &slowFS{FS: guard, delay: delay}, cfg
}

// TestPullPipelined protects "no remote copy archived before local storage"
// and "none lost" when a pull keeps many requests in flight: 3 repositories
// × 2 harnesses × 70 handoffs over a transport where every call takes 2 ms.
// The guard transport fails the test on any rename into processed/ whose
// bytes are not yet stored and recorded; every handoff must end stored,
// archived and marked, recorded in discovery order; and requests must
// really overlap (more than one in flight), within the pipeline's bound.
func TestPullPipelined(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	var specs []string
	var want []string // inbox/name in discovery order
	for _, repo := range []string{"a", "b", "c"} {
		for _, h := range []string{".claude", ".codex"} {
			for i := range 70 {
				rel := fmt.Sprintf("%s/%s/memory-handoffs/h%03d.md", repo, h, i)
				specs = append(specs, rel)
				want = append(want, rel)
			}
		}
	}
	sp, rec, fsys, cfg := slowPullEnv(t, root, 2*time.Millisecond, specs)

	rep := pull(t, fsys, cfg, sp, rec)
	if rep.Outcome != "ok" || rep.Stored != len(want) {
		t.Fatalf("outcome %q (%s), stored %d, want ok and %d", rep.Outcome, rep.Error, rep.Stored, len(want))
	}
	recorded := rec.recordedNames()
	if len(recorded) != len(want) {
		t.Fatalf("recorded %d sources, want %d", len(recorded), len(want))
	}
	for i, rel := range want {
		if recorded[i] != filepath.Base(rel) {
			t.Fatalf("source %d recorded as %s, want %s (discovery order)", i, recorded[i], filepath.Base(rel))
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err == nil {
			t.Fatalf("%s still in its inbox (%d bytes)", rel, len(data))
		}
		inbox := filepath.Join(root, filepath.Dir(rel))
		found := false
		for k, s := range rec.sources {
			if s.Inbox == inbox && s.Name == filepath.Base(rel) {
				found = rec.isArchived(s.Inbox, s.Name, s.SHA256)
				if _, err := os.Stat(filepath.Join(inbox, s.ArchivedAs)); err != nil {
					t.Errorf("%s: archive %s: %v", k, s.ArchivedAs, err)
				}
				rec.assertOrder(t, s.Name)
			}
		}
		if !found {
			t.Errorf("%s not marked archived", rel)
		}
	}
	if p := fsys.peak.Load(); p < 2 {
		t.Errorf("at most %d call in flight; the pull did not overlap requests", p)
	}
	if p := fsys.peakRd.Load(); p > 384 {
		t.Errorf("%d reads in flight, over the bound of 384", p)
	}
	t.Logf("peak calls in flight %d, peak reads %d", fsys.peak.Load(), fsys.peakRd.Load())
}

// TestPullPipelineFailsFast protects "no remote copy archived before local
// storage" when storing fails midway through a pipelined pull: the pull
// ends with the storage error, and no file whose batch was not stored has
// left its inbox.
func TestPullPipelineFailsFast(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	var specs []string
	for i := range 300 {
		specs = append(specs, fmt.Sprintf("r/.claude/memory-handoffs/h%03d.md", i))
	}
	sp, rec, fsys, cfg := slowPullEnv(t, root, time.Millisecond, specs)
	fs := &failAfterSpool{Store: sp, after: 1}

	rep := pull(t, fsys, cfg, fs, rec)
	if rep.Outcome != "error" {
		t.Fatalf("outcome %q, want error", rep.Outcome)
	}
	left, _ := os.ReadDir(filepath.Join(root, "r/.claude/memory-handoffs"))
	files := 0
	for _, e := range left {
		if e.Type().IsRegular() {
			files++
		}
	}
	if files+rec.count() < 300 {
		t.Errorf("%d in the inbox + %d recorded < 300: a handoff was lost", files, rec.count())
	}
	if files == 0 {
		t.Errorf("every file left its inbox though storing failed after the first batch")
	}
}

// failAfterSpool stores the first `after` batches, then fails.
type failAfterSpool struct {
	spool.Store
	mu    sync.Mutex
	after int
}

func (f *failAfterSpool) Put(b map[string][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.after == 0 {
		return fmt.Errorf("spool: no space left on device")
	}
	f.after--
	return f.Store.Put(b)
}

// queueRecorder is a claim.QueueRecorder over a test's recorder, as the
// run's record queue behaves: batches are committed one after another in
// the order they were queued, each delay after the one before; the
// failAt-th (from 1; 0: none) fails, and so does every one after it.
type queueRecorder struct {
	claim.Recorder
	delay  time.Duration
	failAt int

	mu          sync.Mutex
	queued      int           // batches queued so far
	last        chan struct{} // closed when the last queued is settled
	failed      bool
	outstanding int // queued and not yet settled
	peak        int // most outstanding at once
}

func (q *queueRecorder) QueueSources(ctx context.Context, runID string, srcs []claim.Source, contents map[string][]byte) (func() (int, error), error) {
	q.mu.Lock()
	q.queued++
	k, prev, done := q.queued, q.last, make(chan struct{})
	q.last = done
	q.outstanding++
	q.peak = max(q.peak, q.outstanding)
	q.mu.Unlock()
	var n int
	var err error
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		time.Sleep(q.delay)
		q.mu.Lock()
		q.failed = q.failed || k == q.failAt
		failed := q.failed
		q.mu.Unlock()
		if failed {
			err = fmt.Errorf("ledger: disk full")
		} else {
			n, err = q.Recorder.StoreSources(ctx, runID, srcs, contents)
		}
		q.mu.Lock()
		q.outstanding--
		q.mu.Unlock()
	}()
	return func() (int, error) { <-done; return n, err }, nil
}

// queuedPull pulls specs (one inbox) through a queueRecorder that commits a
// batch every 20 ms and fails the failAt-th, over a transport whose calls
// take 1 ms, and returns the report, the names recorded in order, the
// names in discovery order, and the queue.
func queuedPull(t *testing.T, files, failAt int) (claim.HostReport, []string, []string, *queueRecorder, string) {
	root := tempRoot(t)
	var specs, want []string
	for i := range files {
		specs = append(specs, fmt.Sprintf("r/.claude/memory-handoffs/h%03d.md", i))
		want = append(want, fmt.Sprintf("h%03d.md", i))
	}
	sp, rec, fsys, cfg := slowPullEnv(t, root, time.Millisecond, specs)
	q := &queueRecorder{Recorder: storingRecorder{sp, rec}, delay: 20 * time.Millisecond, failAt: failAt}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep := claim.Pull(ctx, fsys, cfg, q, runID, parses)
	recorded := rec.recordedNames()
	return rep, recorded, want, q, filepath.Join(root, "r/.claude/memory-handoffs")
}

// TestPullQueuesBatches protects "none lost" and "no remote copy archived
// before local storage" when a pull has several batches being recorded at
// once (a claim.QueueRecorder): the guard transport fails the test on any
// archive of a file not yet recorded, every handoff ends recorded in
// discovery order and archived, and more than one batch, never more than
// four, waited on the recorder at once.
func TestPullQueuesBatches(t *testing.T) {
	t.Parallel()
	rep, recorded, want, q, inbox := queuedPull(t, 600, 0)
	if rep.Outcome != "ok" || rep.Stored != len(want) {
		t.Fatalf("outcome %q (%s), stored %d, want ok and %d", rep.Outcome, rep.Error, rep.Stored, len(want))
	}
	if !slices.Equal(recorded, want) {
		t.Fatalf("recorded %d sources, not in discovery order: %q", len(recorded), recorded)
	}
	if left := regularFiles(t, inbox); len(left) != 0 {
		t.Errorf("%d handoffs still in the inbox after an ok pull", len(left))
	}
	if q.peak < 2 || q.peak > 4 {
		t.Errorf("at most %d batches waited on the recorder at once, want 2 to 4", q.peak)
	}
	t.Logf("%d batches, at most %d at once", q.queued, q.peak)
}

// TestPullQueuedFailureKeepsPrefix protects "none lost" and "none applied
// twice" when a batch fails while later ones are queued behind it: what
// is recorded is a prefix of the handoffs in discovery order (what the
// next run stores comes after it, as it would have), and every handoff
// not recorded is still in its inbox.
func TestPullQueuedFailureKeepsPrefix(t *testing.T) {
	t.Parallel()
	rep, recorded, want, q, inbox := queuedPull(t, 600, 2)
	if rep.Outcome != "error" || !strings.Contains(rep.Error, "disk full") {
		t.Fatalf("outcome %q (%s), want an error naming the failed store", rep.Outcome, rep.Error)
	}
	if len(recorded) == 0 || !slices.Equal(recorded, want[:len(recorded)]) {
		t.Fatalf("recorded %q: not a prefix of the discovery order", recorded)
	}
	// Every handoff not recorded is still in its inbox. A recorded one
	// may be too: the failure cancels the archives under way, and the
	// next run finishes them (the ledger holds them as not archived).
	left := regularFiles(t, inbox)
	for _, name := range want[len(recorded):] {
		if !slices.Contains(left, name) {
			t.Errorf("%s was not recorded and is gone from its inbox", name)
		}
	}
	if extra := len(left) - (len(want) - len(recorded)); extra > 0 {
		for _, name := range left {
			if !slices.Contains(recorded, name) && !slices.Contains(want[len(recorded):], name) {
				t.Errorf("%s is in the inbox and was never listed", name)
			}
		}
		t.Logf("%d recorded handoffs left unarchived by the failure", extra)
	}
	if q.queued < 3 {
		t.Errorf("%d batches queued; the test needs one queued after the failed one", q.queued)
	}
}

// regularFiles names the regular files directly in dir.
func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out
}
