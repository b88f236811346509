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
	// WorkspaceID is the publishing workspace's identity: MIRROR.json
	// carries it, and a mirror whose MIRROR.json names another is not
	// written.
	WorkspaceID string
	// Adopt publishes over a MIRROR.json that names another workspace:
	// the mirror is handed over to this one (sync --adopt-mirror).
	Adopt    bool
	RunID    string
	Now      time.Time
	DryRun   bool // plan only: list, write nothing
	Log      *slog.Logger
	Parallel int // files written at once; 0 means 16
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
	WorkspaceID string    `json:"workspace_id,omitempty"`
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
	// A generation written to the host is this host's, finished or not:
	// the next publish never goes below it.
	p.next.Generation = max(p.next.Generation, p.wrote)
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
	root *transport.Root
	o    Options
	prev *State
	next *State
	dir  string // absolute
	home string
	dirs []string // the mirror's directories this publish lists, parents first (layoutDirs)

	mu      sync.Mutex
	sent    map[string]bool // written and renamed into place
	removed map[string]bool
	wrote   int64 // the generation a MIRROR.json this publish wrote names
	nextGen int64 // the generation of the MIRROR.json being written
}

// listing is one directory of the mirror as the host listed it.
type listing struct {
	entries []transport.FileInfo
	err     error
}

// maxInfo bounds the host's MIRROR.json as the publisher reads it.
const maxInfo = 64 << 10

func (p *publisher) run(ctx context.Context) (res Result, err error) {
	res = Result{Sent: []string{}, Removed: []string{}}
	p.sent, p.removed = map[string]bool{}, map[string]bool{}
	if _, ok := p.fsys.(transport.Writer); !ok {
		return res, errors.New("this transport cannot write files")
	}
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
	p.dirs = p.layoutDirs()
	if dir == "/" || dir == p.home || strings.HasPrefix(strings.TrimSuffix(p.home, "/")+"/", dir+"/") {
		return res, fmt.Errorf("%s is the login's home directory or above it; a mirror needs a directory of its own", dir)
	}
	files, err := p.fileSet()
	if err != nil {
		return res, err
	}

	// One wave: the proof of the mirror's path (transport.OpenRoot) and
	// every directory of the mirror, listed at once. The listings are
	// used only once the path is proved.
	ro := transport.RootOptions{Base: "/", CreateLast: true}
	if strings.HasPrefix(dir, strings.TrimSuffix(p.home, "/")+"/") {
		ro = transport.RootOptions{Base: p.home, Create: true}
	}
	// The path's parents are listed until a publish to it has finished.
	ro.ListParents = p.prev.Dir != dir || p.prev.Generation == 0
	var (
		wg        sync.WaitGroup
		lists     = make([]listing, len(p.dirs))
		maxListed = p.listingBound(len(files))
		rootErr   error
	)
	for i, d := range p.dirs {
		wg.Go(func() {
			ents, err := p.fsys.ReadDir(ctx, path.Join(dir, d), maxListed)
			lists[i] = listing{ents, err}
		})
	}
	if p.o.DryRun {
		// A dry run proves what exists and creates nothing.
		ro.Create, ro.CreateLast = false, false
	}
	wg.Go(func() { p.root, rootErr = transport.OpenRoot(ctx, p.fsys, dir, ro) })
	wg.Wait()
	fresh := false // the mirror directory does not exist yet
	if rootErr != nil {
		if !p.o.DryRun || !errors.Is(rootErr, transport.ErrNotExist) {
			return res, rootErr
		}
		fresh = true
	}
	if lists[0].err != nil && !errors.Is(lists[0].err, transport.ErrNotExist) {
		return res, fmt.Errorf("list %s: %w", dir, lists[0].err)
	}
	if errors.Is(lists[0].err, transport.ErrNotExist) {
		fresh = true // made just now, or in a dry run not at all
	}
	remote := map[string]transport.FileInfo{}
	leftovers := map[string]transport.FileInfo{}
	if !fresh {
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
	infoFI, hasInfo := remote[InfoFile]
	infoStale := !p.infoCurrent(infoFI)

	// The second wave, only where it is needed: the host's MIRROR.json
	// when it is not the one the last publish wrote, and, where the
	// host's LSTAT cannot be trusted, the proof of every entry that is
	// to be replaced or removed and of every directory written into.
	var (
		hostInfo *Info
		infoErr  error
		proofs   = map[string]error{}
		pmu      sync.Mutex
	)
	if hasInfo && infoStale {
		wg.Go(func() { hostInfo, infoErr = p.readInfo(ctx, infoFI) })
	}
	// Repository directories the host lists that this publish did not:
	// emptied by a publish that stopped before removing them, or left by
	// an older version. They are listed now, and removed when empty.
	var (
		strays    = p.strayDirs(lists)
		strayList = make([]listing, len(strays))
	)
	for i, d := range strays {
		wg.Go(func() {
			ents, err := p.fsys.ReadDir(ctx, path.Join(dir, d), maxListed)
			strayList[i] = listing{ents, err}
		})
	}
	if p.root != nil {
		// On a host whose LSTAT can be trusted, Prove asks nothing.
		prove := func(rel string, fi transport.FileInfo) {
			wg.Go(func() {
				err := p.root.Prove(ctx, rel, fi)
				pmu.Lock()
				proofs[rel] = err
				pmu.Unlock()
			})
		}
		// Only what is to be written into, replaced or removed: an idle
		// publish asks nothing more.
		into := map[string]bool{}
		for _, f := range sends {
			for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
				into[d] = true
			}
			if fi, ok := remote[f.Path]; ok {
				prove(f.Path, fi)
			}
		}
		for i, d := range p.dirs[1:] {
			if lists[i+1].err == nil && into[d] {
				prove(d, transport.FileInfo{Mode: fs.ModeDir})
			}
		}
		for _, rel := range removes {
			prove(rel, remote[rel])
		}
		if hasInfo && (infoStale || len(sends) > 0 || len(removes) > 0) {
			prove(InfoFile, infoFI)
		}
		for rel, fi := range leftovers {
			prove(rel, fi)
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	for _, rel := range slices.Sorted(maps.Keys(proofs)) {
		if err := proofs[rel]; err != nil {
			return res, fmt.Errorf("left alone, and nothing published: %w", err)
		}
	}
	foreign := hostInfo != nil && hostInfo.WorkspaceID != "" && p.o.WorkspaceID != "" && hostInfo.WorkspaceID != p.o.WorkspaceID
	if foreign && !p.o.Adopt {
		return res, &ForeignError{Dir: dir, Host: p.o.Host, Theirs: hostInfo.WorkspaceID, Ours: p.o.WorkspaceID}
	}
	// What the mirror holds is ours to remove only once this workspace
	// has published there (its MIRROR.json names this workspace, or the
	// last publish recorded was to this directory), or takes it over.
	ours := p.prev.Dir == dir && p.prev.Generation > 0 && !foreign ||
		hostInfo != nil && hostInfo.WorkspaceID != "" && hostInfo.WorkspaceID == p.o.WorkspaceID ||
		foreign && p.o.Adopt
	if !ours && len(removes) > 0 {
		p.o.Log.Info("mirror: not removing what this workspace has not published", "host", p.o.Host, "dir", dir, "files", len(removes))
		removes = nil
	}
	var rmdirs []string
	if ours {
		rmdirs = p.emptied(lists, strays, strayList, files, removes, leftovers)
	}

	changed := len(sends) > 0 || len(removes) > 0
	gen := p.prev.Generation
	if hostInfo != nil {
		gen = max(gen, hostInfo.Generation)
	}
	if changed {
		gen++
	}
	infoStale = infoStale || changed
	if p.o.DryRun {
		for _, f := range sends {
			res.Sent = append(res.Sent, f.Path)
			res.Bytes += int64(len(f.Data))
		}
		if infoStale {
			res.Sent = append(res.Sent, InfoFile)
		}
		res.Removed = append(res.Removed, removes...)
		for _, d := range rmdirs {
			res.Removed = append(res.Removed, d+"/")
		}
		res.Generation = gen
		return res, nil
	}
	if infoErr != nil {
		p.o.Log.Info("mirror: the host's MIRROR.json is not readable; it is rewritten", "host", p.o.Host, "err", infoErr)
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
	// report fills res with what was done so far, whatever happens next:
	// a receipt must not contradict the host.
	defer func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, f := range sends {
			if p.sent[f.Path] {
				res.Sent = append(res.Sent, f.Path)
				res.Bytes += int64(len(f.Data))
			}
		}
		if p.sent[InfoFile] {
			res.Sent = append(res.Sent, InfoFile)
		}
		for _, rel := range removes {
			if p.removed[rel] {
				res.Removed = append(res.Removed, rel)
			}
		}
		for _, d := range rmdirs {
			if p.removed[d+"/"] {
				res.Removed = append(res.Removed, d+"/")
			}
		}
		res.Generation = max(p.wrote, p.prev.Generation)
	}()

	info := Info{Format: 1, Canonical: p.o.Canonical, Host: p.o.Host, WorkspaceID: p.o.WorkspaceID, RunID: p.o.RunID,
		PublishedAt: p.o.Now.UTC(), Generation: gen, Files: len(files) - 1} // as SHA256SUMS lists them
	var infoOld *transport.FileInfo
	if hasInfo {
		infoOld = &infoFI
	}
	if changed {
		// Not stamped: should this publish stop before the complete one,
		// the next sees a MIRROR.json it did not leave complete, reads
		// its generation and completes it.
		s, err := p.putInfo(ctx, info, infoOld)
		if err != nil {
			return res, err
		}
		delete(next.Files, InfoFile)
		infoOld = &transport.FileInfo{Name: InfoFile, Size: s.Size, ModTime: s.ModTime, Mode: fileMode}
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
	oldOf := func(rel string) *transport.FileInfo {
		if fi, ok := remote[rel]; ok {
			return &fi
		}
		return nil
	}
	err = fanout.Each(ctx, len(body), p.o.Parallel, func(ctx context.Context, i int) error {
		f := body[i]
		s, err := p.put(ctx, f.Path, f.Data, oldOf(f.Path))
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
		s, err := p.put(ctx, sums.Path, sums.Data, oldOf(sums.Path))
		if err != nil {
			return res, err
		}
		s.SHA256 = sums.SHA256
		stamp(sums.Path, s)
		failpoint.Inject("mirror.sums-written")
	}
	for _, rel := range removes {
		if err := p.root.Remove(ctx, rel, remote[rel]); err != nil && !errors.Is(err, transport.ErrNotExist) {
			return res, err
		}
		p.mu.Lock()
		p.removed[rel] = true
		p.mu.Unlock()
		delete(next.Files, rel)
		failpoint.Inject("mirror.removed")
	}
	for _, rel := range slices.Sorted(maps.Keys(leftovers)) {
		if err := p.root.Remove(ctx, rel, leftovers[rel]); err != nil && !errors.Is(err, transport.ErrNotExist) {
			p.o.Log.Warn("mirror: could not remove a leftover temporary file", "host", p.o.Host, "file", p.root.Path(rel), "err", err)
		}
	}
	// Emptied directories, deepest first: each is proved inside the
	// root before it is removed, and the host removes only an empty one.
	for _, d := range rmdirs {
		err := p.root.Remove(ctx, d, transport.FileInfo{Name: path.Base(d), Mode: fs.ModeDir | 0o700})
		if err != nil && !errors.Is(err, transport.ErrNotExist) {
			if errors.Is(err, transport.ErrNotProven) {
				return res, fmt.Errorf("left alone: %w", err)
			}
			p.o.Log.Warn("mirror: could not remove an emptied directory; the next publish tries again", "host", p.o.Host, "dir", p.root.Path(d), "err", err)
			continue
		}
		p.mu.Lock()
		p.removed[d+"/"] = true
		p.mu.Unlock()
	}
	if infoStale {
		info.Complete = true
		s, err := p.putInfo(ctx, info, infoOld)
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

// ForeignError is a mirror whose MIRROR.json names another workspace:
// nothing is written there (docs/mirror.md, "One workspace per mirror").
type ForeignError struct {
	Dir, Host, Theirs, Ours string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("the manifest may name the wrong workspace: %s belongs to workspace %s, not to this workspace %s; nothing written or removed "+
		"(hint: if workspace: in the manifest has a typo, fix it to name the workspace that owns the mirror; only if this workspace is to take the mirror over, "+
		"run handoff sync --adopt-mirror %s once; see docs/mirror.md)",
		e.Dir, e.Theirs, e.Ours, e.Host)
}

// readInfo reads the host's MIRROR.json, listed as fi, bounded.
func (p *publisher) readInfo(ctx context.Context, fi transport.FileInfo) (*Info, error) {
	data, _, err := transport.ReadListed(ctx, p.fsys, path.Join(p.dir, InfoFile), fi, maxInfo)
	if err != nil {
		return nil, err
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", InfoFile, err)
	}
	return &info, nil
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
		if !slices.Contains(p.dirs, d) || oddName(base) || ours(base) || base == SumsFile || base == InfoFile {
			return nil, fmt.Errorf("internal error: %q is not a name a mirror holds", f.Path)
		}
		if i > 0 && files[i-1].Path == f.Path {
			return nil, fmt.Errorf("internal error: %q is given twice", f.Path)
		}
		fmt.Fprintf(&sums, "%s  %s\n", f.SHA256, f.Path)
	}
	return append(files, NewFile(SumsFile, sums.Bytes())), nil
}

// checkListings checks the mirror's directories as listed and returns its
// regular files by relative path, and the publisher's leftover temporary
// files, also by relative path. Anything that is neither a regular file nor a
// directory, a directory where a file of the mirror goes, and a name no
// file could have stop the mirror.
func (p *publisher) checkListings(lists []listing, files []File) (map[string]transport.FileInfo, map[string]transport.FileInfo, error) {
	want := map[string]bool{InfoFile: true}
	for _, f := range files {
		want[f.Path] = true
	}
	remote := map[string]transport.FileInfo{}
	leftovers := map[string]transport.FileInfo{}
	for i, d := range p.dirs {
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
			case slices.Contains(p.dirs, rel):
				return nil, nil, fmt.Errorf("%s is a file where the mirror keeps a directory", full)
			case ours(e.Name):
				leftovers[rel] = e
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
	for i, d := range p.dirs {
		if d == "." || !need[d] || lists[i].err == nil {
			continue
		}
		if err := p.root.Mkdir(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// put writes data to rel, which the host listed as old (nil: not there):
// under a temporary name, checked to hold every byte, then renamed over
// the old file (transport.Root.Replace). It returns the stamp of what it
// wrote.
func (p *publisher) put(ctx context.Context, rel string, data []byte, old *transport.FileInfo) (Stamp, error) {
	tmp := path.Join(path.Dir(rel), tmpPrefix+token())
	fi, synced, err := p.root.WriteNew(ctx, tmp, data, fileMode)
	if err != nil {
		return Stamp{}, err
	}
	if !synced {
		p.o.Log.Debug("mirror: the server offers no fsync; written without it", "host", p.o.Host, "file", p.root.Path(rel))
	}
	failpoint.Inject("mirror.tmp-written")
	if err := p.root.Replace(ctx, tmp, rel, old, path.Join(path.Dir(rel), asidePrefix+token())); err != nil {
		return Stamp{}, err
	}
	failpoint.Inject("mirror.replaced")
	p.mu.Lock()
	p.sent[rel] = true
	if rel == InfoFile {
		p.wrote = p.nextGen
	}
	p.mu.Unlock()
	return Stamp{Size: fi.Size, ModTime: fi.ModTime}, nil
}

// putInfo writes MIRROR.json over old (nil: not there).
func (p *publisher) putInfo(ctx context.Context, info Info, old *transport.FileInfo) (Stamp, error) {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return Stamp{}, err
	}
	f := NewFile(InfoFile, append(data, '\n'))
	p.mu.Lock()
	p.nextGen = info.Generation
	p.mu.Unlock()
	s, err := p.put(ctx, InfoFile, f.Data, old)
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

// minListing is the least number of entries a listing of the mirror may
// hold, whatever the sets of files: a mirror that shrank while the
// record of the last publish was lost, or that an older version left
// with emptied directories, is still read whole.
const minListing = 10_000

// maxStrays bounds the stray repository directories one publish lists
// and removes; the next publish takes the rest.
const maxStrays = 1000

// listingBound is how many entries a listing of the mirror may hold:
// twice the larger of the files this publish sends and those the last
// publish to this directory left, plus room, and never less than
// minListing. Sized from both, a mirror of any size shrinks.
func (p *publisher) listingBound(files int) int {
	held := files
	if p.prev.Dir == p.dir {
		held = max(held, len(p.prev.Files))
	}
	return max(2*held+1000, minListing)
}

// strayDirs are the directories the host lists in repos/ that this
// publish does not list (layoutDirs): repository directories that a
// publish emptied and did not get to remove, or that an older version
// left. Names no repository has are left alone.
func (p *publisher) strayDirs(lists []listing) []string {
	i := slices.Index(p.dirs, ReposDir)
	if i < 0 || lists[i].err != nil {
		return nil
	}
	var out []string
	for _, e := range lists[i].entries {
		rel := path.Join(ReposDir, e.Name)
		if e.IsDir() && manifest.IsRepoSlug(e.Name) && !slices.Contains(p.dirs, rel) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	if len(out) > maxStrays {
		out = out[:maxStrays]
	}
	return out
}

// emptied returns the directories of repos/ that this publish leaves
// empty, deepest first: a repository directory none of files is in,
// whose listing held only files this publish removes; a stray one
// listed empty; and repos/ itself once nothing of it is left.
func (p *publisher) emptied(lists []listing, strays []string, strayList []listing, files []File, removes []string, leftovers map[string]transport.FileInfo) []string {
	gone := map[string]bool{}
	for _, rel := range removes {
		gone[rel] = true
	}
	for rel := range leftovers {
		gone[rel] = true
	}
	kept := map[string]bool{} // directories a file of this publish is in
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			kept[d] = true
		}
	}
	allGone := func(d string, ents []transport.FileInfo, dirsGone map[string]bool) bool {
		for _, e := range ents {
			rel := path.Join(d, e.Name)
			if !gone[rel] && !dirsGone[rel] {
				return false
			}
		}
		return true
	}
	out := []string{}
	removed := map[string]bool{}
	for i, d := range p.dirs {
		if path.Dir(d) == ReposDir && !kept[d] && lists[i].err == nil && allGone(d, lists[i].entries, nil) {
			out = append(out, d)
			removed[d] = true
		}
	}
	for i, d := range strays {
		if strayList[i].err == nil && len(strayList[i].entries) == 0 {
			out = append(out, d)
			removed[d] = true
		}
	}
	slices.Sort(out)
	if i := slices.Index(p.dirs, ReposDir); i >= 0 && !kept[ReposDir] && lists[i].err == nil && allGone(ReposDir, lists[i].entries, removed) {
		out = append(out, ReposDir)
	}
	return out
}
