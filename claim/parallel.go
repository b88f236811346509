package claim

import (
	"cmp"
	"context"
	"errors"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/transport"
)

// Concurrency bounds for one host. Requests are issued from many goroutines
// at once over the host's one connection, so that a pull pays a round trip
// per stage (list a level, read, rename, verify) rather than per file.
const (
	// walkParallel bounds the listings, lstats and git index reads
	// discovery keeps in flight.
	walkParallel = 256
	// earlyParallel bounds the calls of a walk hint asked at once
	// (speculate.go). They are known before the walk starts, so all of a
	// typical hint go in one wave: 100 repositories made 1,314 calls,
	// which 256 at a time took 6 round trips. Listings among them are
	// bounded by the transport's handles as well.
	earlyParallel = 2048
	// smallListing is the entry budget of a listing made concurrently with
	// others. A directory with more entries is listed again alone with the
	// transport's full budget, so that concurrent listings together hold
	// at most walkParallel×smallListing entries.
	smallListing = 512
	// maxIndexBytes bounds the git index bytes held at once by concurrent
	// index reads (each is at most maxGitIndex).
	maxIndexBytes = maxGitIndex
)

// inParallel runs fn(ctx, i) for i in [0, n) with at most limit running at
// once. The first error cancels the others' context and is returned.
func inParallel(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	return fanout.Each(ctx, n, limit, fn)
}

// lstatAll asks about every name at once, so that they cost one round trip
// together: fis[i] and errs[i] are Lstat's answers for names[i]. It
// returns an error only when ctx ended before every answer came.
func lstatAll(ctx context.Context, fsys transport.FS, names ...string) (fis []transport.FileInfo, errs []error, err error) {
	fis, errs = lstatEach(ctx, fsys, names)
	return fis, errs, ctx.Err()
}

// lstatEach is LstatAll for fsys (transport.Batcher): its own, or one
// Lstat for each name, all at once. A name ctx ended before asking gets
// ctx's error.
func lstatEach(ctx context.Context, fsys transport.FS, names []string) ([]transport.FileInfo, []error) {
	if b, ok := fsys.(transport.Batcher); ok {
		return b.LstatAll(ctx, names)
	}
	fis := make([]transport.FileInfo, len(names))
	errs := make([]error, len(names))
	asked := make([]bool, len(names))
	inParallel(ctx, len(names), len(names), func(ctx context.Context, i int) error {
		fis[i], errs[i] = fsys.Lstat(ctx, names[i])
		asked[i] = true
		return nil
	})
	for i := range names {
		if !asked[i] {
			errs[i] = cmp.Or(ctx.Err(), context.Canceled)
		}
	}
	return fis, errs
}

// lister lists directories for discovery with bounded memory.
type lister struct {
	fsys       transport.FS
	alone      sync.Mutex          // one full-budget listing at a time
	indexBytes *semaphore.Weighted // git index bytes held at once
}

func newLister(fsys transport.FS) *lister {
	return &lister{fsys: fsys, indexBytes: semaphore.NewWeighted(maxIndexBytes)}
}

// readDir lists dir with a small budget, and a listing that fails for any
// reason but a missing or unreadable directory or a broken connection again,
// alone, with the transport's full budget.
func (l *lister) readDir(ctx context.Context, dir string) ([]transport.FileInfo, error) {
	ents, err := l.fsys.ReadDir(ctx, dir, smallListing)
	if err == nil || errors.Is(err, transport.ErrNotExist) || isPermission(err) ||
		errors.Is(err, transport.ErrBroken) || ctx.Err() != nil {
		return ents, err
	}
	l.alone.Lock()
	defer l.alone.Unlock()
	return l.fsys.ReadDir(ctx, dir, 0)
}

// firstError keeps the first failure of a group of goroutines and cancels
// their context with it, so that the others stop early.
type firstError struct {
	once   sync.Once
	err    error
	cancel context.CancelCauseFunc
}

// withFirstError returns a context that the first fail cancels.
func withFirstError(ctx context.Context) (context.Context, *firstError) {
	ctx, cancel := context.WithCancelCause(ctx)
	return ctx, &firstError{cancel: cancel}
}

func (f *firstError) fail(err error) {
	f.once.Do(func() { f.err = err })
	f.cancel(err)
}

// Err is the first failure, once the goroutines that could fail are done.
func (f *firstError) Err() error { return f.err }
