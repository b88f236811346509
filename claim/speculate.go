package claim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/handoff-sync/handoff/transport"
)

// A WalkCall is one question discovery put to a host: an lstat, a listing
// with its entry budget, or a realpath. Discover records the calls it
// makes; the next run's Discover, given them as Config.Hint, asks them all
// at once as it starts, so that a walk of known directories costs one
// wave of round trips instead of one per level. The walk still asks every
// question it relies on, in this run, and acts only on this run's answers:
// a hint decides when a question is asked, never what the answer is
// (docs/design.md, "The speculative walk").
type WalkCall struct {
	Op   string `json:"op"` // WalkLstat, WalkReadDir or WalkRealPath
	Path string `json:"path"`
	N    int    `json:"n,omitempty"` // a listing's entry budget
}

// Walk call operations.
const (
	WalkLstat    = "lstat"
	WalkReadDir  = "readdir"
	WalkRealPath = "realpath"
)

const (
	// MaxHint bounds the calls a walk records and a hint may hold.
	MaxHint = 4096
	// MaxHintBytes bounds a hint file.
	MaxHintBytes = 4 << 20
)

// maxEarlyEntries bounds the listing entries held by answers that came
// early and that the walk has not taken yet; past it an early listing is
// dropped, and asked again when the walk gets to it. (A variable for the
// tests.)
var maxEarlyEntries = 64 << 10

// A Hint is what one discovery of a host leaves for the next: the
// questions it asked, and what it learnt from the git indexes it read.
type Hint struct {
	Calls   []WalkCall  `json:"calls"`
	Indexes []IndexMemo `json:"indexes,omitempty"`
}

// ParseHint reads a hint as MarshalHint wrote it (or, from before git
// index memos, a bare list of calls), keeping the calls a walk could have
// made (a known operation on a clean absolute path, a listing with a
// positive budget within smallListing, at most MaxHint) and the index
// memos that are well formed (IndexMemo.valid, at most MaxHint). A
// damaged hint is an error; the caller walks without one.
func ParseHint(data []byte) (Hint, error) {
	var h Hint
	var err error
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		err = json.Unmarshal(data, &h.Calls)
	} else {
		err = json.Unmarshal(data, &h)
	}
	if err != nil {
		return Hint{}, fmt.Errorf("walk hint: %w", err)
	}
	out := h.Calls[:0]
	for _, c := range h.Calls {
		if len(out) == MaxHint {
			break
		}
		if !cleanAbs(c.Path) {
			continue
		}
		switch c.Op {
		case WalkLstat, WalkRealPath:
			c.N = 0
		case WalkReadDir:
			if c.N <= 0 || c.N > smallListing {
				continue
			}
		default:
			continue
		}
		out = append(out, c)
	}
	h.Calls = out
	memos := h.Indexes[:0]
	for _, m := range h.Indexes {
		if len(memos) < MaxHint && m.valid() {
			memos = append(memos, m)
		}
	}
	h.Indexes = memos
	return h, nil
}

// cleanAbs reports whether p is an absolute path in its shortest form,
// as every path a walk asks about is.
func cleanAbs(p string) bool { return path.IsAbs(p) && path.Clean(p) == p }

// MarshalHint encodes a hint for the next run. A hint whose index memos
// would take it past MaxHintBytes is kept without them.
func MarshalHint(h Hint) ([]byte, error) {
	if h.Calls == nil {
		h.Calls = []WalkCall{}
	}
	data, err := json.Marshal(h)
	if err == nil && len(data) > MaxHintBytes && len(h.Indexes) > 0 {
		h.Indexes = nil
		data, err = json.Marshal(h)
	}
	return data, err
}

// speculative is the transport discovery walks through: it records each
// lstat, bounded listing and realpath, and answers one whose answer it
// asked for early (from the hint) with that answer, once.
type speculative struct {
	transport.FS
	res transport.Resolver // nil: the transport resolves nothing

	mu      sync.Mutex
	early   map[WalkCall]*earlyAnswer
	held    int // listing entries held by early answers not taken yet
	asked   []WalkCall
	seen    map[WalkCall]bool
	taken   int // calls answered early
	fresh   int // calls asked when the walk got to them
	stopped bool
}

var errStopped = errors.New("discovery ended before this call was asked")

// earlyCall is a call of the hint and its answer to come.
type earlyCall struct {
	c WalkCall
	a *earlyAnswer
}

type earlyAnswer struct {
	done    chan struct{}
	fi      transport.FileInfo
	ents    []transport.FileInfo
	real    string
	err     error
	dropped bool // over maxEarlyEntries: ask again
	started bool // a goroutine is asking it (s.mu)
	claimed bool // the walk took it before it started, and asks itself (s.mu)
}

// speculate wraps fsys for one discovery and asks every call of hint,
// at most limit at once, with ctx. Call stop when discovery is done.
func speculate(ctx context.Context, fsys transport.FS, hint []WalkCall, limit int) *speculative {
	s := &speculative{FS: fsys, early: map[WalkCall]*earlyAnswer{}, seen: map[WalkCall]bool{}}
	s.res = transport.Checker(fsys)
	// An early call under way when discovery ends is left to finish on
	// its own and its answer dropped, never cancelled: over SSH a call
	// whose context ends closes the connection, which the pull after
	// discovery needs. Calls not started by then are not asked (stop).
	askCtx := context.WithoutCancel(ctx)
	var wave []earlyCall
	for _, c := range hint {
		if s.early[c] != nil || c.Op == WalkRealPath && s.res == nil {
			continue
		}
		a := &earlyAnswer{done: make(chan struct{})}
		s.early[c] = a
		wave = append(wave, earlyCall{c, a})
	}
	// Where the transport asks many LSTATs at once more cheaply than one
	// each (transport.Batcher), those of the wave go as one batch.
	if b, ok := fsys.(transport.Batcher); ok {
		var lstats []earlyCall
		rest := wave[:0:0]
		for _, e := range wave {
			if e.c.Op == WalkLstat {
				lstats = append(lstats, e)
			} else {
				rest = append(rest, e)
			}
		}
		wave = rest
		go s.askBatch(askCtx, b, lstats)
	}
	// limit goroutines take the calls in the hint's order (the previous
	// walk's, shallow before deep). A call is answered once: stopped
	// or its context done, with an error.
	var next atomic.Int64
	for range min(limit, len(wave)) {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(wave) {
					return
				}
				c, a := wave[i].c, wave[i].a
				s.mu.Lock()
				stopped, skip := s.stopped, a.claimed
				a.started = true
				s.mu.Unlock()
				switch {
				case stopped || skip:
					a.err = errStopped
				case ctx.Err() != nil:
					a.err = ctx.Err()
				default:
					s.ask(askCtx, c, a)
				}
				close(a.done)
			}
		}()
	}
	return s
}

// askBatch asks the wave's LSTATs with one LstatAll. They are all started
// at once, so the walk waits for their answers rather than asking again.
func (s *speculative) askBatch(ctx context.Context, b transport.Batcher, wave []earlyCall) {
	var names []string
	var answers []*earlyAnswer
	s.mu.Lock()
	for _, e := range wave {
		if s.stopped || e.a.claimed {
			e.a.err = errStopped
			close(e.a.done)
			continue
		}
		e.a.started = true
		names = append(names, e.c.Path)
		answers = append(answers, e.a)
	}
	s.mu.Unlock()
	if len(names) == 0 {
		return
	}
	fis, errs := b.LstatAll(ctx, names)
	for i, a := range answers {
		a.fi, a.err = fis[i], errs[i]
		close(a.done)
	}
}

func (s *speculative) ask(ctx context.Context, c WalkCall, a *earlyAnswer) {
	switch c.Op {
	case WalkLstat:
		a.fi, a.err = s.FS.Lstat(ctx, c.Path)
	case WalkReadDir:
		a.ents, a.err = s.FS.ReadDir(ctx, c.Path, c.N)
		// Counted until taken; dropped if nobody waits for it yet and it
		// would hold too many.
		s.mu.Lock()
		if s.early[c] == a && s.held+len(a.ents) > maxEarlyEntries {
			delete(s.early, c)
			a.ents, a.dropped = nil, true
		}
		s.held += len(a.ents)
		s.mu.Unlock()
	case WalkRealPath:
		a.real, a.err = s.res.RealPath(ctx, c.Path)
	}
}

// take records c and returns its early answer, if there is one not taken
// yet, waiting for it; nil means the caller asks itself.
func (s *speculative) take(ctx context.Context, c WalkCall) *earlyAnswer {
	s.mu.Lock()
	if !s.seen[c] && len(s.asked) < MaxHint && (c.Op != WalkReadDir || c.N > 0 && c.N <= smallListing) {
		s.seen[c] = true
		s.asked = append(s.asked, c)
	}
	a := s.early[c]
	delete(s.early, c)
	if a != nil && !a.started {
		// Still queued behind other early calls: quicker to ask now.
		a.claimed, a = true, nil
	}
	if a == nil {
		s.fresh++
	}
	s.mu.Unlock()
	if a == nil {
		return nil
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil // the caller's own call fails with ctx
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held -= len(a.ents)
	if a.dropped || errors.Is(a.err, context.Canceled) && ctx.Err() == nil {
		s.fresh++
		return nil
	}
	s.taken++
	return a
}

func (s *speculative) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	if a := s.take(ctx, WalkCall{Op: WalkLstat, Path: name}); a != nil {
		return a.fi, a.err
	}
	return s.FS.Lstat(ctx, name)
}

// LstatAll takes the early answer of each name that has one, and asks
// about the others together (lstatEach).
func (s *speculative) LstatAll(ctx context.Context, names []string) ([]transport.FileInfo, []error) {
	fis := make([]transport.FileInfo, len(names))
	errs := make([]error, len(names))
	var rest []int
	for i, name := range names {
		if a := s.take(ctx, WalkCall{Op: WalkLstat, Path: name}); a != nil {
			fis[i], errs[i] = a.fi, a.err
		} else {
			rest = append(rest, i)
		}
	}
	if len(rest) == 0 {
		return fis, errs
	}
	ask := make([]string, len(rest))
	for j, i := range rest {
		ask[j] = names[i]
	}
	rf, re := lstatEach(ctx, s.FS, ask)
	for j, i := range rest {
		fis[i], errs[i] = rf[j], re[j]
	}
	return fis, errs
}

func (s *speculative) ReadDir(ctx context.Context, name string, maxEntries int) ([]transport.FileInfo, error) {
	if a := s.take(ctx, WalkCall{Op: WalkReadDir, Path: name, N: maxEntries}); a != nil {
		return a.ents, a.err
	}
	return s.FS.ReadDir(ctx, name, maxEntries)
}

// ReadContent is the transport's, if it has one (transport.ReadContent):
// git index reads go through it, with fewer round trips than ReadFile.
func (s *speculative) ReadContent(ctx context.Context, name string, limit int64) ([]byte, error) {
	return transport.ReadContent(ctx, s.FS, name, limit)
}

// ReadTail is the transport's, if it has one (transport.ReadTail): a git
// index whose memo matches is checked by its last 20 bytes.
func (s *speculative) ReadTail(ctx context.Context, name string, listed transport.FileInfo, n int64) ([]byte, error) {
	return transport.ReadTail(ctx, s.FS, name, listed, n)
}

// The optional interfaces discovery uses must survive the wrapping.
var (
	_ transport.Resolver      = (*speculative)(nil)
	_ transport.ContentReader = (*speculative)(nil)
	_ transport.TailReader    = (*speculative)(nil)
	_ transport.LinkSafe      = (*speculative)(nil)
	_ transport.Batcher       = (*speculative)(nil)
)

// LstatNoFollow is the transport's (transport.LinkSafe).
func (s *speculative) LstatNoFollow() bool { return transport.IsLinkSafe(s.FS) }

// RealPath is the transport's; without one it fails, which discovery
// treats as a transport that resolves nothing.
func (s *speculative) RealPath(ctx context.Context, name string) (string, error) {
	if s.res == nil {
		return "", errors.ErrUnsupported
	}
	if a := s.take(ctx, WalkCall{Op: WalkRealPath, Path: name}); a != nil {
		return a.real, a.err
	}
	return s.res.RealPath(ctx, name)
}

// stop ends speculation: early calls not started yet are not asked, and
// those under way are abandoned, neither cancelled nor waited for (their
// answers would go unused). It returns the calls discovery made, shallow
// before deep and then by path, whatever order the concurrent walk asked
// them in: an unchanged tree leaves the same hint, which is then not
// written again.
func (s *speculative) stop() []WalkCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	slices.SortFunc(s.asked, func(a, b WalkCall) int {
		return cmp.Or(
			cmp.Compare(strings.Count(a.Path, "/"), strings.Count(b.Path, "/")),
			cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Op, b.Op),
			cmp.Compare(a.N, b.N))
	})
	return s.asked
}
