package mirror

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/transport"
)

// Outcomes of a publish.
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomeSkipped = "skipped"
)

// Mode of every published file: read-only, as the mirror is.
const fileMode fs.FileMode = 0o444

// Options say what to publish where.
type Options struct {
	Host string // the host's name in the manifest, for messages
	// Dir is the mirror directory as the manifest gives it, possibly
	// starting with "~".
	Dir string
	// Files are what the mirror holds: Snapshot's files and the guide.
	// SHA256SUMS and MIRROR.json are added.
	Files     []File
	Canonical string // the canonical host's name, for MIRROR.json
	RunID     string
	Now       time.Time
	DryRun    bool // plan only: list, write nothing
	Log       *slog.Logger
	Parallel  int // files written at once; 0 means 16
}

// Result is what a publish did (or, in a dry run, would do).
type Result struct {
	Outcome    string   `json:"outcome"`
	Dir        string   `json:"dir,omitempty"`
	Sent       []string `json:"sent"`
	Removed    []string `json:"removed"`
	Bytes      int64    `json:"bytes"`
	Generation int64    `json:"generation"`
	Error      string   `json:"error,omitempty"`
}

// Info is MIRROR.json.
type Info struct {
	Format      int       `json:"format"`
	Canonical   string    `json:"canonical_host"`
	Host        string    `json:"host"`
	RunID       string    `json:"run_id"`
	PublishedAt time.Time `json:"published_at"`
	Generation  int64     `json:"generation"`
	// Files counts the files SHA256SUMS lists.
	Files int `json:"files"`
	// Complete is false while a publish is changing the mirror.
	Complete bool `json:"complete"`
}

// Publish brings the mirror on fsys up to date with o.Files. prev is what
// the last publish to this host left (LoadState); the returned state is
// what this one left, to be saved even when the publish failed part way,
// so that the next run sends only what is still missing. A dry run
// returns prev unchanged.
func Publish(ctx context.Context, fsys transport.FS, prev *State, o Options) (Result, *State) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Parallel <= 0 {
		o.Parallel = 16
	}
	if prev == nil {
		prev = &State{Files: map[string]Stamp{}}
	}
	p := &publisher{fsys: fsys, o: o, prev: prev}
	res, err := p.run(ctx)
	res.Dir = p.dir
	res.Generation = max(res.Generation, prev.Generation)
	if p.next == nil {
		p.next = prev
	}
	if err != nil {
		res.Outcome, res.Error = OutcomeError, fmt.Sprintf("mirror %s: %v", o.Dir, err)
		o.Log.Warn("mirror failed", "host", o.Host, "err", err)
		return res, p.next
	}
	res.Outcome = OutcomeOK
	return res, p.next
}

type publisher struct {
	fsys transport.FS
	w    transport.Writer
	o    Options
	prev *State
	next *State
	dir  string // absolute
	home string
}

// listing is one directory of the mirror as the host listed it.
type listing struct {
	entries []transport.FileInfo
	err     error
}

func (p *publisher) run(ctx context.Context) (Result, error) {
	res := Result{Sent: []string{}, Removed: []string{}}
	w, ok := p.fsys.(transport.Writer)
	if !ok {
		return res, errors.New("this transport cannot write files")
	}
	p.w = w
	home, err := p.fsys.Home(ctx)
	if err != nil {
		return res, err
	}
	p.home = path.Clean(home)
	dir := path.Clean(manifest.ExpandHome(p.o.Dir, p.home))
	if !path.IsAbs(dir) {
		return res, fmt.Errorf("%q is not an absolute path", dir)
	}
	p.dir = dir
	if dir == "/" || dir == p.home || strings.HasPrefix(p.home+"/", dir+"/") {
		return res, fmt.Errorf("%s is the login's home directory or above it; a mirror needs a directory of its own", dir)
	}
	files, err := p.fileSet()
	if err != nil {
		return res, err
	}

	// One wave: the path's components, its resolution, and every
	// directory of the mirror, all at once.
	chain, base := p.chain()
	var (
		wg        sync.WaitGroup
		stats     = make([]error, len(chain))
		infos     = make([]transport.FileInfo, len(chain))
		lists     = make([]listing, len(dirs))
		realDir   string
		realBase  string
		realErr   error
		maxListed = 2*len(files) + 1000
	)
	for i, c := range chain {
		wg.Go(func() { infos[i], stats[i] = p.fsys.Lstat(ctx, c) })
	}
	for i, d := range dirs {
		wg.Go(func() {
			ents, err := p.fsys.ReadDir(ctx, path.Join(dir, d), maxListed)
			lists[i] = listing{ents, err}
		})
	}
	rs, resolves := p.fsys.(transport.Resolver)
	var baseErr error
	if resolves {
		wg.Go(func() { realDir, realErr = rs.RealPath(ctx, dir) })
		wg.Go(func() { realBase, baseErr = rs.RealPath(ctx, base) })
	}
	wg.Wait()
	if realErr == nil {
		realErr = baseErr
	}

	missing, err := p.checkChain(chain, base, infos, stats)
	if err != nil {
		return res, err
	}
	if missing == len(chain) && resolves {
		rel := strings.TrimPrefix(strings.TrimPrefix(dir, base), "/")
		if realErr != nil {
			return res, fmt.Errorf("resolve %s: %w", dir, realErr)
		}
		if want := path.Join(realBase, rel); realDir != want {
			return res, fmt.Errorf("%s resolves to %s, not %s: a symlink is on the path (the server's LSTAT follows symlinks)", dir, realDir, want)
		}
	}
	remote := map[string]transport.FileInfo{}
	var leftovers []string
	if missing == len(chain) {
		remote, leftovers, err = p.checkListings(lists, files)
		if err != nil {
			return res, err
		}
	}

	// The plan.
	var sends []File
	for _, f := range files {
		if !p.unchanged(remote[f.Path], f) {
			sends = append(sends, f)
		}
	}
	published := map[string]bool{InfoFile: true}
	for _, f := range files {
		published[f.Path] = true
	}
	var removes []string
	for _, rel := range slices.Sorted(maps.Keys(remote)) {
		if !published[rel] {
			removes = append(removes, rel)
		}
	}
	changed := len(sends) > 0 || len(removes) > 0
	gen := p.prev.Generation
	if changed {
		gen++
	}
	infoStale := changed || !p.infoCurrent(remote[InfoFile])
	for _, f := range sends {
		res.Sent = append(res.Sent, f.Path)
		res.Bytes += int64(len(f.Data))
	}
	if infoStale {
		res.Sent = append(res.Sent, InfoFile)
	}
	res.Removed = append(res.Removed, removes...)
	res.Generation = gen
	if p.o.DryRun {
		return res, nil
	}

	next := &State{Host: p.o.Host, Dir: dir, Generation: p.prev.Generation, RunID: p.prev.RunID,
		PublishedAt: p.prev.PublishedAt, Files: map[string]Stamp{}}
	if p.prev.Dir == dir {
		maps.Copy(next.Files, p.prev.Files)
	}
	p.next = next
	var mu sync.Mutex
	stamp := func(rel string, s Stamp) {
		mu.Lock()
		defer mu.Unlock()
		next.Files[rel] = s
	}

	for _, c := range chain[missing:] {
		if err := p.fsys.Mkdir(ctx, c); err != nil {
			return res, err
		}
	}
	info := Info{Format: 1, Canonical: p.o.Canonical, Host: p.o.Host, RunID: p.o.RunID,
		PublishedAt: p.o.Now.UTC(), Generation: gen, Files: len(files) - 1} // as SHA256SUMS lists them
	if changed {
		s, err := p.putInfo(ctx, info)
		if err != nil {
			return res, err
		}
		stamp(InfoFile, s)
		failpoint.Inject("mirror.opened")
	}
	if err := p.mkdirs(ctx, lists, sends); err != nil {
		return res, err
	}
	// Every file, then SHA256SUMS, which lists them, then the removals.
	var body []File
	var sums *File
	for i, f := range sends {
		if f.Path == SumsFile {
			sums = &sends[i]
		} else {
			body = append(body, f)
		}
	}
	err = fanout.Each(ctx, len(body), p.o.Parallel, func(ctx context.Context, i int) error {
		f := body[i]
		s, err := p.put(ctx, f.Path, f.Data)
		if err != nil {
			return err
		}
		s.SHA256 = f.SHA256
		stamp(f.Path, s)
		return nil
	})
	if err != nil {
		return res, err
	}
	if sums != nil {
		s, err := p.put(ctx, sums.Path, sums.Data)
		if err != nil {
			return res, err
		}
		s.SHA256 = sums.SHA256
		stamp(sums.Path, s)
		failpoint.Inject("mirror.sums-written")
	}
	for _, rel := range removes {
		if err := p.fsys.Remove(ctx, path.Join(dir, rel)); err != nil && !errors.Is(err, transport.ErrNotExist) {
			return res, err
		}
		delete(next.Files, rel)
		failpoint.Inject("mirror.removed")
	}
	for _, name := range leftovers {
		if err := p.fsys.Remove(ctx, name); err != nil && !errors.Is(err, transport.ErrNotExist) {
			p.o.Log.Warn("mirror: could not remove a leftover temporary file", "host", p.o.Host, "file", name, "err", err)
		}
	}
	if infoStale {
		info.Complete = true
		s, err := p.putInfo(ctx, info)
		if err != nil {
			return res, err
		}
		stamp(InfoFile, s)
	}
	next.Generation, next.RunID, next.PublishedAt = gen, p.o.RunID, p.o.Now.UTC()
	if changed {
		p.o.Log.Info("mirror published", "host", p.o.Host, "dir", dir, "sent", len(sends), "removed", len(removes), "generation", gen)
	}
	return res, nil
}

// fileSet is o.Files and SHA256SUMS, checked: every path is in one of the
// mirror's directories and appears once.
func (p *publisher) fileSet() ([]File, error) {
	files := slices.Clone(p.o.Files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	var sums bytes.Buffer
	for i, f := range files {
		d, base := path.Split(f.Path)
		d = strings.TrimSuffix(d, "/")
		if d == "" {
			d = "."
		}
		if !slices.Contains(dirs, d) || oddName(base) || ours(base) || base == SumsFile || base == InfoFile {
			return nil, fmt.Errorf("internal error: %q is not a name a mirror holds", f.Path)
		}
		if i > 0 && files[i-1].Path == f.Path {
			return nil, fmt.Errorf("internal error: %q is given twice", f.Path)
		}
		fmt.Fprintf(&sums, "%s  %s\n", f.SHA256, f.Path)
	}
	return append(files, NewFile(SumsFile, sums.Bytes())), nil
}

// chain returns the paths from the first component below base down to
// the mirror directory, and base: the login's home for a mirror inside
// it, else "/".
func (p *publisher) chain() ([]string, string) {
	base := "/"
	if strings.HasPrefix(p.dir, p.home+"/") {
		base = p.home
	}
	var chain []string
	for d := p.dir; d != base; d = path.Dir(d) {
		chain = append(chain, d)
	}
	slices.Reverse(chain)
	return chain, base
}

// checkChain checks the path's components and returns how many exist
// (the rest are missing and get created). Every existing one must be a
// directory, never a symlink; only directories inside the login's home,
// and the mirror directory itself, may be created.
func (p *publisher) checkChain(chain []string, base string, infos []transport.FileInfo, errs []error) (int, error) {
	missing := len(chain)
	for i, c := range chain {
		err := errs[i]
		switch {
		case errors.Is(err, transport.ErrNotExist):
			if missing == len(chain) {
				missing = i
			}
			continue
		case err != nil:
			return 0, fmt.Errorf("lstat %s: %w", c, err)
		case missing < i:
			return 0, fmt.Errorf("%s exists below the missing %s: the host's answers disagree", c, chain[missing])
		case infos[i].IsSymlink():
			return 0, fmt.Errorf("%s is a symlink; a mirror's path must be real directories", c)
		case !infos[i].IsDir():
			return 0, fmt.Errorf("%s is a %s, not a directory", c, transport.Kind(infos[i].Mode))
		}
	}
	if base == "/" && missing < len(chain)-1 {
		return 0, fmt.Errorf("%s does not exist; outside the login's home only the mirror directory itself is created", chain[missing])
	}
	return missing, nil
}

// checkListings checks the mirror's directories as listed and returns its
// regular files by relative path, and the publisher's leftover temporary
// files (full paths). Anything that is neither a regular file nor a
// directory, a directory where a file of the mirror goes, and a name no
// file could have stop the mirror.
func (p *publisher) checkListings(lists []listing, files []File) (map[string]transport.FileInfo, []string, error) {
	want := map[string]bool{InfoFile: true}
	for _, f := range files {
		want[f.Path] = true
	}
	remote := map[string]transport.FileInfo{}
	var leftovers []string
	for i, d := range dirs {
		l := lists[i]
		if errors.Is(l.err, transport.ErrNotExist) {
			continue
		}
		if l.err != nil {
			return nil, nil, fmt.Errorf("list %s: %w", path.Join(p.dir, d), l.err)
		}
		for _, e := range l.entries {
			if oddName(e.Name) {
				return nil, nil, fmt.Errorf("the host lists a name no file has in %s: %q", path.Join(p.dir, d), e.Name)
			}
			rel := path.Join(d, e.Name)
			full := path.Join(p.dir, rel)
			switch {
			case e.IsDir():
				if want[rel] {
					return nil, nil, fmt.Errorf("%s is a directory where the mirror keeps a file", full)
				}
			case !e.IsRegular():
				return nil, nil, fmt.Errorf("%s is a %s; a mirror holds only regular files and directories", full, transport.Kind(e.Mode))
			case slices.Contains(dirs, rel):
				return nil, nil, fmt.Errorf("%s is a file where the mirror keeps a directory", full)
			case ours(e.Name):
				leftovers = append(leftovers, full)
			default:
				remote[rel] = e
			}
		}
	}
	return remote, leftovers, nil
}

// unchanged is the quick check: the host lists a read-only regular file
// of the size and modification time the last publish of these bytes
// recorded.
func (p *publisher) unchanged(fi transport.FileInfo, f File) bool {
	st, ok := p.prev.Files[f.Path]
	return ok && p.prev.Dir == p.dir && fi.IsRegular() && fi.Mode.Perm() == fileMode &&
		st.SHA256 == f.SHA256 && st.Size == fi.Size && fi.Size == int64(len(f.Data)) && st.ModTime.Equal(fi.ModTime)
}

func (p *publisher) infoCurrent(fi transport.FileInfo) bool {
	st, ok := p.prev.Files[InfoFile]
	return ok && p.prev.Dir == p.dir && fi.IsRegular() && fi.Mode.Perm() == fileMode && st.Size == fi.Size && st.ModTime.Equal(fi.ModTime)
}

// mkdirs creates the mirror's subdirectories that files are sent to and
// the host did not list.
func (p *publisher) mkdirs(ctx context.Context, lists []listing, sends []File) error {
	need := map[string]bool{}
	for _, f := range sends {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			need[d] = true
		}
	}
	for i, d := range dirs {
		if d == "." || !need[d] || lists[i].err == nil {
			continue
		}
		if err := p.fsys.Mkdir(ctx, path.Join(p.dir, d)); err != nil && !errors.Is(err, transport.ErrExist) {
			return err
		}
	}
	return nil
}

// put writes data to rel: under a temporary name, then renamed over the
// old file. It returns the stamp of what it wrote.
func (p *publisher) put(ctx context.Context, rel string, data []byte) (Stamp, error) {
	full := path.Join(p.dir, rel)
	tmp := path.Join(path.Dir(full), tmpPrefix+token())
	fi, synced, err := p.w.WriteNew(ctx, tmp, data, fileMode)
	if err != nil {
		return Stamp{}, err
	}
	if !synced {
		p.o.Log.Debug("mirror: the server offers no fsync; written without it", "host", p.o.Host, "file", full)
	}
	failpoint.Inject("mirror.tmp-written")
	err = p.w.Replace(ctx, tmp, full)
	if errors.Is(err, transport.ErrUnsupported) {
		err = p.swap(ctx, tmp, full)
	}
	if err == nil {
		failpoint.Inject("mirror.replaced")
	}
	if err != nil {
		if rerr := p.fsys.Remove(ctx, tmp); rerr != nil {
			p.o.Log.Debug("mirror: remove a temporary file", "host", p.o.Host, "file", tmp, "err", rerr)
		}
		return Stamp{}, err
	}
	return Stamp{Size: fi.Size, ModTime: fi.ModTime}, nil
}

// swap puts tmp in full's place on a server that cannot replace in one
// step: full is moved aside, tmp renamed to full, the old one removed. In
// between, full is missing, never wrong.
func (p *publisher) swap(ctx context.Context, tmp, full string) error {
	err := p.fsys.Rename(ctx, tmp, full)
	if !errors.Is(err, transport.ErrExist) {
		return err
	}
	aside := path.Join(path.Dir(full), asidePrefix+token())
	if err := p.fsys.Rename(ctx, full, aside); err != nil && !errors.Is(err, transport.ErrNotExist) {
		return err
	}
	if err := p.fsys.Rename(ctx, tmp, full); err != nil {
		return err
	}
	if err := p.fsys.Remove(ctx, aside); err != nil && !errors.Is(err, transport.ErrNotExist) {
		p.o.Log.Warn("mirror: could not remove the old copy; the next run does", "host", p.o.Host, "file", aside, "err", err)
	}
	return nil
}

// putInfo writes MIRROR.json.
func (p *publisher) putInfo(ctx context.Context, info Info) (Stamp, error) {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return Stamp{}, err
	}
	f := NewFile(InfoFile, append(data, '\n'))
	s, err := p.put(ctx, InfoFile, f.Data)
	s.SHA256 = f.SHA256
	return s, err
}

// token is a random name part, so that two publishers (or a crashed one
// and the next) never pick the same temporary name.
func token() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
