package claim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

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
	Ignored    []string // quoted names that are not plain *.md names, at most MaxIgnored
	IgnoredN   int      // how many names were ignored in all
}

// Discover finds the inboxes of a host: every declared inbox, and every
// <repo>/<harness>/memory-handoffs under a discovery root, walking at most
// MaxDepth directory levels below the root. It never follows a symlink,
// never descends into dot-directories, and skips any directory holding
// OptOutMarker with everything below it. Declared inboxes always appear in
// the result, whatever their state; discovered ones appear when they exist.
func Discover(ctx context.Context, fsys transport.FS, cfg Config) ([]*Inbox, error) {
	home, err := fsys.Home(ctx)
	if err != nil {
		return nil, fmt.Errorf("home directory: %w", err)
	}
	l := newLister(fsys)
	seen := map[string]bool{}
	var out []*Inbox
	add := func(in *Inbox) {
		if seen[in.Path] {
			return
		}
		seen[in.Path] = true
		out = append(out, in)
	}
	declared := make([]*Inbox, len(cfg.Inboxes))
	err = inParallel(ctx, len(cfg.Inboxes), walkParallel, func(ctx context.Context, i int) error {
		var err error
		declared[i], err = declaredInbox(ctx, fsys, expand(cfg.Inboxes[i], home))
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, in := range declared {
		add(in)
	}
	for _, r := range cfg.Roots {
		found, err := l.walk(ctx, expand(r.Path, home), r.MaxDepth, cfg.Harnesses)
		if err != nil {
			return nil, err
		}
		for _, in := range found {
			add(in)
		}
	}
	if err := l.listAll(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

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
func declaredInbox(ctx context.Context, fsys transport.FS, p string) (*Inbox, error) {
	in := &Inbox{Path: p, Repo: path.Dir(path.Dir(p)), State: StateOK}
	fi, err := fsys.Lstat(ctx, p)
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
	for _, dir := range []string{p, path.Dir(p), in.Repo} {
		_, err := fsys.Lstat(ctx, path.Join(dir, OptOutMarker))
		if err == nil {
			in.State = StateOptedOut
			return in, nil
		}
		if !errors.Is(err, transport.ErrNotExist) {
			return nil, fmt.Errorf("lstat %s: %w", path.Join(dir, OptOutMarker), err)
		}
	}
	return in, nil
}

// walk looks for repositories under root, breadth first, level by level.
// The directories of one level are listed concurrently; what is found is
// handled in name order, so the result does not depend on timing.
func (l *lister) walk(ctx context.Context, root string, maxDepth int, harnesses []string) ([]*Inbox, error) {
	fsys := l.fsys
	fi, err := fsys.Lstat(ctx, root)
	if errors.Is(err, transport.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lstat discovery root %s: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("discovery root %s is not a directory (symlinks are never followed; name the real path)", root)
	}
	isHarness := map[string]bool{}
	for _, h := range harnesses {
		isHarness[h] = true
	}
	tooMany := func() error {
		return fmt.Errorf("discovery root %s holds more than %d directories within max_depth %d; lower max_depth or name deeper roots", Quote(root), MaxWalkDirs, maxDepth)
	}
	type harnessAt struct {
		repo string
		fi   transport.FileInfo
	}
	var out []*Inbox
	level := []string{root}
	visited := 0
	for depth := 0; depth <= maxDepth && len(level) > 0; depth++ {
		if visited += len(level); visited > MaxWalkDirs {
			return nil, tooMany()
		}
		listed := make([][]transport.FileInfo, len(level))
		err := inParallel(ctx, len(level), walkParallel, func(ctx context.Context, i int) error {
			ents, err := l.readDir(ctx, level[i])
			if err != nil {
				if errors.Is(err, transport.ErrNotExist) || ctx.Err() == nil && isPermission(err) {
					return nil // vanished or unreadable: nothing to find there
				}
				return fmt.Errorf("list %s: %w", level[i], err)
			}
			listed[i] = ents
			return nil
		})
		if err != nil {
			return nil, err
		}
		var next []string
		var found []harnessAt
		for i, dir := range level {
			ents := listed[i]
			listed[i] = nil
			sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
			if hasEntry(ents, OptOutMarker) {
				continue
			}
			for _, e := range ents {
				if CheckName(e.Name) != "" && CheckName(e.Name) != "not-markdown" {
					continue // a name no real directory has
				}
				if isHarness[e.Name] {
					found = append(found, harnessAt{dir, e})
					continue
				}
				if strings.HasPrefix(e.Name, ".") || !e.IsDir() || depth == maxDepth {
					continue
				}
				if visited+len(next) >= MaxWalkDirs {
					return nil, tooMany()
				}
				next = append(next, path.Join(dir, e.Name))
			}
		}
		inboxes := make([]*Inbox, len(found))
		err = inParallel(ctx, len(found), walkParallel, func(ctx context.Context, i int) error {
			inboxes[i] = harnessInbox(ctx, fsys, found[i].repo, found[i].fi)
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, in := range inboxes {
			if in != nil {
				out = append(out, in)
			}
		}
		level = next
	}
	return out, nil
}

// harnessInbox returns the inbox under a harness directory entry, or nil if
// the harness directory holds none.
func harnessInbox(ctx context.Context, fsys transport.FS, repo string, harness transport.FileInfo) *Inbox {
	p := path.Join(repo, harness.Name, InboxDir)
	in := &Inbox{Path: p, Repo: repo, State: StateOK}
	if harness.IsSymlink() {
		in.State = StateSymlink
		return in
	}
	if !harness.IsDir() {
		return nil
	}
	switch _, err := fsys.Lstat(ctx, path.Join(repo, harness.Name, OptOutMarker)); {
	case err == nil:
		in.State = StateOptedOut
		return in
	case !errors.Is(err, transport.ErrNotExist):
		in.State, in.Err = StateError, err
		return in
	}
	fi, err := fsys.Lstat(ctx, p)
	switch {
	case errors.Is(err, transport.ErrNotExist):
		return nil
	case err != nil:
		in.State, in.Err = StateError, err
	case fi.IsSymlink():
		in.State = StateSymlink
	case !fi.IsDir():
		return nil
	}
	return in
}

// listAll fills the candidates of every usable inbox. Inboxes are listed
// concurrently, and each repository's git index is read once, concurrently
// with the others, only when one of its inboxes holds a candidate.
func (l *lister) listAll(ctx context.Context, inboxes []*Inbox) error {
	var usable []*Inbox
	for _, in := range inboxes {
		if in.State == StateOK {
			usable = append(usable, in)
		}
	}
	listed := make([][]transport.FileInfo, len(usable))
	err := inParallel(ctx, len(usable), walkParallel, func(ctx context.Context, i int) error {
		var err error
		listed[i], err = listInbox(ctx, l, usable[i])
		return err
	})
	if err != nil {
		return err
	}
	var repos []string
	indexes := map[string]*trackedResult{}
	for i, in := range usable {
		if len(listed[i]) > 0 && indexes[in.Repo] == nil {
			indexes[in.Repo] = &trackedResult{}
			repos = append(repos, in.Repo)
		}
	}
	err = inParallel(ctx, len(repos), walkParallel, func(ctx context.Context, i int) error {
		tr := indexes[repos[i]]
		tr.set, tr.err = readTracked(ctx, l.fsys, repos[i], l.indexBytes)
		if tr.err != nil && !errors.Is(tr.err, errGitUnreadable) {
			return tr.err // the transport broke
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, in := range usable {
		cands := listed[i]
		if len(cands) == 0 {
			continue
		}
		tr := indexes[in.Repo]
		if tr.err != nil {
			in.State, in.Err = StateGitUnreadable, tr.err
			continue
		}
		rel := strings.TrimPrefix(in.Path, in.Repo+"/")
		for _, c := range cands {
			if tr.set[rel+"/"+c.Name] {
				in.Tracked++
				continue
			}
			in.Candidates = append(in.Candidates, c)
		}
	}
	return nil
}

type trackedResult struct {
	set trackedSet
	err error
}

// listInbox lists one inbox and returns its plain *.md entries in name
// order, noting the names it ignores. An inbox that cannot be listed gets
// state "error"; only a broken transport is returned as an error.
func listInbox(ctx context.Context, l *lister, in *Inbox) ([]transport.FileInfo, error) {
	ents, err := l.readDir(ctx, in.Path)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, transport.ErrBroken) {
			return nil, err
		}
		in.State, in.Err = StateError, fmt.Errorf("list %s: %w", in.Path, err)
		return nil, nil
	}
	if hasEntry(ents, OptOutMarker) {
		in.State = StateOptedOut
		return nil, nil
	}
	var cands []transport.FileInfo
	for _, e := range ents {
		switch CheckName(e.Name) {
		case "":
			cands = append(cands, e)
		case "not-markdown":
		default:
			in.IgnoredN++
			if len(in.Ignored) < MaxIgnored {
				in.Ignored = append(in.Ignored, Quote(e.Name))
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Name < cands[j].Name })
	return cands, nil
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
