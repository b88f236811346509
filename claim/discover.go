package claim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/handoff-sync/handoff/transport"
)

// InboxDir is the directory name of every handoff inbox.
const InboxDir = "memory-handoffs"

// MaxWalkDirs bounds the directories one discovery root may make a walk
// list, so that a hostile or huge tree cannot exhaust memory or time.
const MaxWalkDirs = 100_000

// Inbox is one inbox found on a host, with the files that may be claimed.
type Inbox struct {
	Path       string // absolute on the host
	Repo       string // the directory holding the harness directory
	State      string
	Err        error
	Candidates []transport.FileInfo // plain *.md names not tracked by git
	Tracked    int
	// TrackedNames are the first MaxIgnored of the names the repository's
	// git index tracks, which are skipped (doctor names them).
	TrackedNames []string
	Ignored      []string // quoted names that are not plain *.md names, at most MaxIgnored
	IgnoredN     int      // how many names were ignored in all
	// ArchiveDirs are the entries named ProcessedDir and MalformedDir the
	// inbox's listing holds (a name not in it was not there); nil when
	// the inbox was not listed.
	ArchiveDirs map[string]transport.FileInfo
	// FollowsSymlinks: the inbox is a symlink (State is StateSymlink)
	// that the server's LSTAT called a directory.
	FollowsSymlinks bool
}

// Discover finds the inboxes of a host: every declared inbox, and every
// <repo>/<harness>/memory-handoffs under a discovery root, walking at most
// MaxDepth directory levels below the root. It never follows a symlink,
// never descends into dot-directories, and skips any directory holding
// OptOutMarker with everything below it. Declared inboxes always appear in
// the result, whatever their state; discovered ones appear when they exist.
//
// Listings run concurrently (a directory's children are listed as soon as
// it is, and an inbox as soon as it is found), within bounds on the
// listings and git index bytes held at once; the result is in the same
// order as a breadth-first walk in name order: declared inboxes first, then
// each root's by depth and path.
func Discover(ctx context.Context, fsys transport.FS, cfg Config) (_ []*Inbox, err error) {
	gctx, first := withFirstError(ctx)
	defer first.cancel(nil)
	// The previous walk's questions, asked at once (speculate.go); the
	// walk below takes their answers as it gets to them.
	spec := speculate(gctx, fsys, cfg.Hint.Calls, earlyParallel)
	var d *discovery
	defer func() {
		calls := spec.stop()
		if cfg.Log != nil {
			cfg.Log.Debug("walk", "host", cfg.Host, "hint", len(cfg.Hint.Calls), "early", spec.taken, "asked", spec.fresh)
		}
		if err == nil && cfg.Walked != nil {
			cfg.Walked(Hint{Calls: calls, Indexes: d.memos()})
		}
	}()
	fsys = spec
	// The home directory costs a round trip: ask only if a path needs it.
	var home string
	needHome := false
	for _, p := range cfg.Inboxes {
		needHome = needHome || tilde(p)
	}
	for _, r := range cfg.Roots {
		needHome = needHome || tilde(r.Path)
	}
	if needHome {
		var err error
		if home, err = fsys.Home(ctx); err != nil {
			return nil, fmt.Errorf("home directory: %w", err)
		}
	}
	d = newDiscovery(fsys, cfg.Hint.Indexes)
	var g errgroup.Group
	g.SetLimit(walkParallel)
	d.g, d.ctx, d.first = &g, gctx, first
	declared := make([]*Inbox, len(cfg.Inboxes))
	for i, p := range cfg.Inboxes {
		d.spawn(func() error {
			in, err := declaredInbox(gctx, d.l, expand(p, home))
			if err != nil {
				return err
			}
			declared[i] = in
			d.list(in)
			return nil
		})
	}
	harnesses := slices.Sorted(slices.Values(cfg.Harnesses))
	harnesses = slices.Compact(harnesses)
	walks := make([]*walk, len(cfg.Roots))
	for i, r := range cfg.Roots {
		walks[i] = &walk{d: d, root: expand(r.Path, home), maxDepth: r.MaxDepth, harnesses: harnesses, isHarness: map[string]bool{}}
		for _, h := range harnesses {
			walks[i].isHarness[h] = true
		}
		d.spawn(walks[i].start)
	}
	g.Wait()
	if err := first.Err(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []*Inbox
	add := func(in *Inbox) {
		if seen[in.Path] {
			return
		}
		seen[in.Path] = true
		d.fill(in)
		out = append(out, in)
	}
	for _, in := range declared {
		add(in)
	}
	for _, w := range walks {
		slices.SortFunc(w.found, func(a, b found) int {
			if c := cmp.Compare(a.depth, b.depth); c != 0 {
				return c
			}
			return slices.Compare(a.key, b.key)
		})
		for _, f := range w.found {
			add(f.in)
		}
	}
	return out, nil
}

// discovery is the shared state of one Discover call.
type discovery struct {
	l     *lister
	g     *errgroup.Group
	ctx   context.Context
	first *firstError // the first failure cancels ctx

	mu       sync.Mutex
	listings map[string]*listing       // inbox path -> its listing (each inbox listed once)
	indexes  map[string]*trackedResult // repository -> its git index (each read once)
	repos    map[string]bool           // every repository with an inbox listed
	// lastMemos is the previous run's git index memos by index path
	// (read only).
	lastMemos map[string]IndexMemo
}

func newDiscovery(fsys transport.FS, memos []IndexMemo) *discovery {
	d := &discovery{l: newLister(fsys), listings: map[string]*listing{}, indexes: map[string]*trackedResult{}, repos: map[string]bool{}, lastMemos: map[string]IndexMemo{}}
	for _, m := range memos {
		d.lastMemos[m.Path] = m
	}
	return d
}

// memos is the git index memos to keep for the next run, sorted by path:
// one for each index this discovery read or found unchanged, and the
// previous run's memo of the index of each repository it listed an inbox
// of but had no need to read (no candidates). Such a memo is carried
// unchecked: it is checked when a run next needs the index.
func (d *discovery) memos() []IndexMemo {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	keep := map[string]IndexMemo{}
	for repo := range d.repos {
		if d.indexes[repo] != nil {
			continue
		}
		name := path.Join(repo, ".git", "index")
		if m, ok := d.lastMemos[name]; ok {
			keep[name] = m
		}
	}
	for _, tr := range d.indexes {
		if tr.memo != nil {
			keep[tr.memo.Path] = *tr.memo
		}
	}
	out := make([]IndexMemo, 0, len(keep))
	for _, m := range keep {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b IndexMemo) int { return cmp.Compare(a.Path, b.Path) })
	if len(out) > MaxHint {
		out = out[:MaxHint]
	}
	return out
}

// spawn runs fn in the group if a slot is free, else right here, so that a
// walk of any size holds at most walkParallel goroutines (plus the inline
// recursion, bounded by max_depth).
func (d *discovery) spawn(fn func() error) {
	run := func() error {
		if err := fn(); err != nil {
			d.first.fail(err)
		}
		return nil
	}
	if !d.g.TryGo(run) {
		run()
	}
}

// listing is what listing an inbox found.
type listing struct {
	state    string
	err      error
	ignored  []string
	ignoredN int
	cands    []transport.FileInfo
	archive  map[string]transport.FileInfo // the ArchiveDirs entries
}

type trackedResult struct {
	set  trackedSet
	memo *IndexMemo // for the next run; nil: none
	err  error
}

// list starts listing a usable inbox (once per path) and, when it holds
// candidates, reading its repository's git index (once per repository).
func (d *discovery) list(in *Inbox) {
	if in.State != StateOK {
		return
	}
	d.mu.Lock()
	if d.listings[in.Path] != nil {
		d.mu.Unlock()
		return
	}
	li := &listing{state: StateOK}
	d.listings[in.Path] = li
	d.repos[in.Repo] = true
	d.mu.Unlock()
	d.spawn(func() error {
		if err := listInbox(d.ctx, d.l, in.Path, li); err != nil {
			return err
		}
		if len(li.cands) == 0 {
			return nil
		}
		d.mu.Lock()
		tr := d.indexes[in.Repo]
		if tr != nil {
			d.mu.Unlock()
			return nil
		}
		tr = &trackedResult{}
		d.indexes[in.Repo] = tr
		d.mu.Unlock()
		d.spawn(func() error {
			set, memo, err := readTracked(d.ctx, d.l.fsys, in.Repo, d.l.indexBytes, d.lastMemos)
			d.mu.Lock()
			tr.set, tr.memo, tr.err = set, memo, err
			d.mu.Unlock()
			if err != nil && !errors.Is(err, errGitUnreadable) {
				return err // the transport broke
			}
			return nil
		})
		return nil
	})
}

// fill copies an inbox's listing into it, keeping the candidates its
// repository's git index does not track. Call it after every listing is
// done.
func (d *discovery) fill(in *Inbox) {
	li := d.listings[in.Path]
	if li == nil {
		return
	}
	in.State, in.Err, in.Ignored, in.IgnoredN = li.state, li.err, li.ignored, li.ignoredN
	in.ArchiveDirs = li.archive
	if in.State != StateOK || len(li.cands) == 0 {
		return
	}
	tr := d.indexes[in.Repo]
	if tr.err != nil {
		in.State, in.Err = StateGitUnreadable, tr.err
		return
	}
	rel := strings.TrimPrefix(in.Path, in.Repo+"/")
	for _, c := range li.cands {
		if tr.set[rel+"/"+c.Name] {
			in.Tracked++
			if len(in.TrackedNames) < MaxIgnored {
				in.TrackedNames = append(in.TrackedNames, c.Name)
			}
			continue
		}
		in.Candidates = append(in.Candidates, c)
	}
}

// tilde reports whether p names a place under the home directory.
func tilde(p string) bool { return p == "~" || strings.HasPrefix(p, "~/") }

func expand(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return path.Join(home, rest)
	}
	return path.Clean(p)
}

// declaredInbox checks a declared inbox: it must be a real directory, and
// neither it, its harness directory nor its repository may opt out.
func declaredInbox(ctx context.Context, l *lister, p string) (*Inbox, error) {
	in := &Inbox{Path: p, Repo: path.Dir(path.Dir(p)), State: StateOK}
	// The inbox and the three places a marker may be, in one round trip,
	// with where the inbox and its parent resolve.
	markers := []string{path.Join(p, OptOutMarker), path.Join(path.Dir(p), OptOutMarker), path.Join(in.Repo, OptOutMarker)}
	fis, errs, reals, err := lstatResolve(ctx, l.fsys, append([]string{p}, markers...), []string{p, path.Dir(p)})
	if err != nil {
		return nil, err
	}
	fi, err, markerErrs := fis[0], errs[0], errs[1:]
	switch {
	case errors.Is(err, transport.ErrNotExist):
		in.State = StateMissing
		return in, nil
	case err != nil:
		return nil, fmt.Errorf("lstat inbox %s: %w", p, err)
	case fi.IsSymlink():
		in.State = StateSymlink
		return in, nil
	case !fi.IsDir():
		in.State = StateError
		in.Err = fmt.Errorf("%s is not a directory", p)
		return in, nil
	}
	var want string
	if reals[1] != "" {
		want = path.Join(reals[1], path.Base(p))
	}
	switch via, err := symlinkedDir(ctx, l, reals[0], want, p); {
	case err != nil && fatal(ctx, err):
		return nil, err
	case err != nil:
		in.State, in.Err = StateError, err
		return in, nil
	case via:
		in.State, in.FollowsSymlinks = StateSymlink, true
		return in, nil
	}
	for i, err := range markerErrs {
		if err == nil {
			in.State = StateOptedOut
			return in, nil
		}
		if !errors.Is(err, transport.ErrNotExist) {
			return nil, fmt.Errorf("lstat %s: %w", markers[i], err)
		}
	}
	return in, nil
}

// walk looks for repositories under one root. Every directory is listed
// as soon as its parent is; found records each inbox with its place in a
// breadth-first walk in name order.
type walk struct {
	d         *discovery
	root      string
	maxDepth  int
	harnesses []string // sorted
	isHarness map[string]bool
	visited   atomic.Int64

	rootOK   bool   // the root is a real directory
	rootReal string // where the host resolves the root; "" when unknown

	mu    sync.Mutex
	found []found
}

type found struct {
	depth int      // of the repository below the root
	key   []string // the path from the root to the harness directory, by component
	in    *Inbox
}

func (w *walk) start() error {
	ctx := w.d.ctx
	// Where the root and its parent resolve, asked with the root's
	// lstat: the inboxes below are checked against it (symlinks.go).
	var reals []string
	resolved := make(chan struct{})
	go func() {
		defer close(resolved)
		_, _, reals, _ = lstatResolve(ctx, w.d.l.fsys, nil, []string{w.root, path.Dir(w.root)})
	}()
	if w.maxDepth == 0 {
		fi, err := w.d.l.fsys.Lstat(ctx, w.root)
		<-resolved
		if err := w.checkRoot(fi, err); err != nil || !w.rootOK {
			return err
		}
		if err := w.checkRootReal(reals); err != nil {
			return err
		}
		return w.leaf(w.root, nil)
	}
	// The root is asked about and listed in the same round trip; the
	// listing counts only once the lstat has said the root is a real
	// directory (an SFTP OPENDIR follows symlinks).
	if w.visited.Add(1) > MaxWalkDirs {
		return w.tooMany()
	}
	var ents []transport.FileInfo
	var listErr error
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		ents, listErr = w.d.l.readDir(ctx, w.root)
	}()
	fi, err := w.d.l.fsys.Lstat(ctx, w.root)
	<-listed
	<-resolved
	if err := w.checkRoot(fi, err); err != nil || !w.rootOK {
		return err
	}
	if err := w.checkRootReal(reals); err != nil {
		return err
	}
	return w.listed(w.root, nil, ents, listErr)
}

// checkRootReal refuses a root that LSTAT called a directory but that is
// a symlink (a server whose LSTAT follows them), and keeps where the root
// resolves for the inboxes below.
func (w *walk) checkRootReal(reals []string) error {
	if reals[0] == "" || reals[1] == "" || w.root == "/" {
		return nil
	}
	via, err := symlinkedDir(w.d.ctx, w.d.l, reals[0], path.Join(reals[1], path.Base(w.root)), w.root)
	if err != nil {
		return fmt.Errorf("discovery root %s: %w", w.root, err)
	}
	if via {
		w.rootOK = false
		return fmt.Errorf("discovery root %s is a symlink, which this server's LSTAT follows (symlinks are never followed; name the real path)", w.root)
	}
	w.rootReal = reals[0]
	return nil
}

// checkRoot judges the root's lstat: rootOK if it is a real directory; a
// missing root is no error (nothing to find), anything else but a
// directory is.
func (w *walk) checkRoot(fi transport.FileInfo, err error) error {
	switch {
	case errors.Is(err, transport.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("lstat discovery root %s: %w", w.root, err)
	case !fi.IsDir():
		return fmt.Errorf("discovery root %s is not a directory (symlinks are never followed; name the real path)", w.root)
	}
	w.rootOK = true
	return nil
}

func (w *walk) tooMany() error {
	return fmt.Errorf("discovery root %s holds more than %d directories within max_depth %d; lower max_depth or name deeper roots", Quote(w.root), MaxWalkDirs, w.maxDepth)
}

// dir lists one directory at depth len(key) below max_depth and starts on
// what it holds.
func (w *walk) dir(dir string, key []string) error {
	if w.visited.Add(1) > MaxWalkDirs {
		return w.tooMany()
	}
	ents, err := w.d.l.readDir(w.d.ctx, dir)
	return w.listed(dir, key, ents, err)
}

// listed starts on what listing dir found: each harness directory's inbox,
// and each subdirectory (listed if it is above max_depth, probed by leaf
// if it is at it).
func (w *walk) listed(dir string, key []string, ents []transport.FileInfo, err error) error {
	ctx := w.d.ctx
	if err != nil {
		if errors.Is(err, transport.ErrNotExist) || ctx.Err() == nil && isPermission(err) {
			return nil // vanished or unreadable: nothing to find there
		}
		return fmt.Errorf("list %s: %w", dir, err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
	if hasEntry(ents, OptOutMarker) {
		return nil
	}
	depth := len(key)
	for _, e := range ents {
		if CheckName(e.Name) != "" && CheckName(e.Name) != "not-markdown" {
			continue // a name no real directory has
		}
		child := append(slices.Clip(key), e.Name)
		if w.isHarness[e.Name] {
			w.d.spawn(func() error {
				if in := w.harnessInbox(ctx, dir, e); in != nil {
					w.found1(depth, child, in)
				}
				return nil
			})
			continue
		}
		if strings.HasPrefix(e.Name, ".") || !e.IsDir() || depth == w.maxDepth {
			continue
		}
		if w.visited.Load() >= MaxWalkDirs {
			return w.tooMany()
		}
		sub := path.Join(dir, e.Name)
		if depth+1 == w.maxDepth {
			w.d.spawn(func() error { return w.leaf(sub, child) })
		} else {
			w.d.spawn(func() error { return w.dir(sub, child) })
		}
	}
	return nil
}

// leaf looks for inboxes in a directory at max_depth, below which the walk
// does not go. Rather than list it (two round trips over SFTP: open and
// read; the close is not waited for) it asks about each harness directory
// by name, all at once, and only where one exists about the opt-out
// markers and the inbox: one round trip for a directory without a
// harness, two for a repository. Its .git is asked about only once an
// inbox has candidates (readTracked), so an idle tick asks nothing of git;
// a walk hint that holds those questions has them asked in its first wave.
func (w *walk) leaf(dir string, key []string) error {
	if w.visited.Add(1) > MaxWalkDirs {
		return w.tooMany()
	}
	ctx, fsys := w.d.ctx, w.d.l.fsys
	names := make([]string, len(w.harnesses))
	for i, h := range w.harnesses {
		names[i] = path.Join(dir, h)
	}
	fis, errs, err := lstatAll(ctx, fsys, names...)
	if err != nil {
		return err
	}
	var present []transport.FileInfo
	for i, err := range errs {
		switch {
		case err == nil:
			fi := fis[i]
			fi.Name = w.harnesses[i]
			present = append(present, fi)
		case errors.Is(err, transport.ErrNotExist), ctx.Err() == nil && isPermission(err):
		default:
			return fmt.Errorf("lstat %s: %w", names[i], err)
		}
	}
	if len(present) == 0 {
		return nil
	}
	// The directory's own opt-out marker and each harness directory's
	// marker and inbox, in one batch.
	ins := make([]*Inbox, len(present))
	lnames := []string{path.Join(dir, OptOutMarker)}
	var rnames []string
	at := make([]int, len(present)) // where present[i]'s questions start; -1: none
	for i, h := range present {
		in, decided := harnessEntry(dir, h)
		ins[i], at[i] = in, -1
		if decided {
			continue
		}
		at[i] = len(rnames)
		l, r := harnessQuestions(in)
		lnames, rnames = append(lnames, l...), append(rnames, r...)
	}
	fis, errs, reals, err := lstatResolve(ctx, fsys, lnames, rnames)
	if err != nil {
		return err
	}
	switch optErr := errs[0]; {
	case optErr == nil:
		return nil // opted out, with everything below
	case errors.Is(optErr, transport.ErrNotExist):
	case ctx.Err() == nil && isPermission(optErr):
		return nil
	default:
		return fmt.Errorf("lstat %s: %w", path.Join(dir, OptOutMarker), optErr)
	}
	for i, a := range at {
		if a >= 0 {
			ins[i] = w.harnessJudge(ctx, ins[i], fis[1+2*a:3+2*a], errs[1+2*a:3+2*a], reals[a:a+1])
		}
	}
	for i, in := range ins {
		if in != nil {
			w.found1(len(key), append(slices.Clip(key), present[i].Name), in)
		}
	}
	return nil
}

// found1 records an inbox found in the repository at depth, harness
// directory key, and starts listing it.
func (w *walk) found1(depth int, key []string, in *Inbox) {
	w.mu.Lock()
	w.found = append(w.found, found{depth: depth, key: key, in: in})
	w.mu.Unlock()
	w.d.list(in)
}

// harnessInbox returns the inbox under a harness directory entry, or nil if
// the harness directory holds none.
func (w *walk) harnessInbox(ctx context.Context, repo string, harness transport.FileInfo) *Inbox {
	in, decided := harnessEntry(repo, harness)
	if decided {
		return in
	}
	// Both questions in one round trip: is there an opt-out marker, and
	// what is the inbox; and where the inbox resolves.
	lnames, rnames := harnessQuestions(in)
	fis, errs, reals, err := lstatResolve(ctx, w.d.l.fsys, lnames, rnames)
	if err != nil {
		in.State, in.Err = StateError, err
		return in
	}
	return w.harnessJudge(ctx, in, fis, errs, reals)
}

// harnessEntry is the inbox under a harness directory entry, and whether
// the entry alone decides it: a symlink is refused, and anything else
// but a directory holds no inbox (nil).
func harnessEntry(repo string, harness transport.FileInfo) (in *Inbox, decided bool) {
	in = &Inbox{Path: path.Join(repo, harness.Name, InboxDir), Repo: repo, State: StateOK}
	switch {
	case harness.IsSymlink():
		in.State = StateSymlink
		return in, true
	case !harness.IsDir():
		return nil, true
	}
	return in, false
}

// harnessQuestions is what harnessJudge needs to know of in: LSTAT of the
// harness directory's opt-out marker and of the inbox, and where the
// inbox resolves.
func harnessQuestions(in *Inbox) (lnames, rnames []string) {
	return []string{path.Join(path.Dir(in.Path), OptOutMarker), in.Path}, []string{in.Path}
}

// harnessJudge decides in from the answers to harnessQuestions, or
// returns nil where there is no inbox.
func (w *walk) harnessJudge(ctx context.Context, in *Inbox, fis []transport.FileInfo, errs []error, reals []string) *Inbox {
	optErr, fi, err := errs[0], fis[1], errs[1]
	switch {
	case optErr == nil:
		in.State = StateOptedOut
		return in
	case !errors.Is(optErr, transport.ErrNotExist):
		in.State, in.Err = StateError, optErr
		return in
	}
	switch {
	case errors.Is(err, transport.ErrNotExist):
		return nil
	case err != nil:
		in.State, in.Err = StateError, err
	case fi.IsSymlink():
		in.State = StateSymlink
	case !fi.IsDir():
		return nil
	default:
		// Every directory above the repository's was typed by a listing;
		// the harness directory may have been typed by LSTAT alone (at
		// max_depth), and the inbox was.
		var want string
		if w.rootReal != "" {
			want = path.Join(w.rootReal, strings.TrimPrefix(in.Path, w.root))
		}
		via, err := symlinkedDir(ctx, w.d.l, reals[0], want, path.Dir(in.Path), in.Path)
		switch {
		case err != nil:
			in.State, in.Err = StateError, err
		case via:
			in.State, in.FollowsSymlinks = StateSymlink, true
		}
	}
	return in
}

// listInbox lists one inbox into li: its plain *.md entries in name order,
// and the names it ignores. An inbox that cannot be listed gets state
// "error"; only a broken transport is returned as an error.
func listInbox(ctx context.Context, l *lister, dir string, li *listing) error {
	ents, err := l.readDir(ctx, dir)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, transport.ErrBroken) {
			return err
		}
		li.state, li.err = StateError, fmt.Errorf("list %s: %w", dir, err)
		return nil
	}
	if hasEntry(ents, OptOutMarker) {
		li.state = StateOptedOut
		return nil
	}
	li.archive = map[string]transport.FileInfo{}
	for _, e := range ents {
		if e.Name == ProcessedDir || e.Name == MalformedDir {
			li.archive[e.Name] = e
		}
		switch CheckName(e.Name) {
		case "":
			li.cands = append(li.cands, e)
		case "not-markdown":
		default:
			li.ignoredN++
			if len(li.ignored) < MaxIgnored {
				li.ignored = append(li.ignored, Quote(e.Name))
			}
		}
	}
	sort.Slice(li.cands, func(i, j int) bool { return li.cands[i].Name < li.cands[j].Name })
	return nil
}

func isPermission(err error) bool { return errors.Is(err, fs.ErrPermission) }

func hasEntry(ents []transport.FileInfo, name string) bool {
	for _, e := range ents {
		if e.Name == name {
			return true
		}
	}
	return false
}
