package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
)

// ErrNotProven: the host's answers do not show that a name is what the
// caller needs it to be, inside the root (a listing, an LSTAT and a
// REALPATH disagree, or the name resolves outside). Nothing was changed.
var ErrNotProven = errors.New("not proven inside the root")

// ErrNotStored: the host acknowledged a write but the handle's size
// afterwards is not the size sent. The file is removed, never renamed
// into place.
var ErrNotStored = errors.New("the host did not store what was written")

// Root is a directory on a host that the client has proved to be a real
// directory, reached through no symlink, and the only way handoff
// creates, renames or removes anything on a host (the pull's archive
// moves and the mirror's publish). The model is Go's os.Root: every name
// given to its methods is relative to the root, and what cannot be proved
// inside it is left alone (ErrNotProven).
//
// What it trusts depends on the server. Where the transport vouches for
// its LSTAT (LinkSafe: OpenSSH's sftp-server, the local file system), a
// listing or an LSTAT that says "regular file" or "directory" is taken as
// true. Elsewhere (servers whose LSTAT, READDIR, RENAME or REMOVE follow
// symlinks), an existing entry is renamed over or removed only when its
// listing, its LSTAT and its REALPATH agree that it is that kind of file
// at its own place inside the root. Before a file written under a
// temporary name is renamed into place, REALPATH of the temporary name
// must be its place inside the root, on every server: a directory swapped
// for a symlink after the root was proved is caught there (docs/design.md,
// "One confined remote root").
type Root struct {
	fsys FS
	res  Resolver // nil where the host cannot resolve
	safe bool     // LSTAT follows no symlink
	dir  string

	mu     sync.Mutex
	real   string          // where the host resolves dir; "" until asked
	proved map[string]bool // directories below dir known to be real, by relative name
}

// IsLinkSafe reports whether fsys vouches that its LSTAT follows no
// symlink.
func IsLinkSafe(fsys FS) bool {
	ls, ok := fsys.(LinkSafe)
	return ok && ls.LstatNoFollow()
}

// Checker returns what checks fsys's LSTAT with REALPATH: nil where fsys
// cannot resolve, or vouches that its LSTAT follows no symlink (a
// REALPATH there could only agree with the LSTAT's type).
func Checker(fsys FS) Resolver {
	if IsLinkSafe(fsys) {
		return nil
	}
	res, _ := fsys.(Resolver)
	return res
}

// NewRoot returns the root at dir, which the caller has proved itself (as
// discovery proves an inbox: its parent's listing typed it a directory,
// and REALPATH agreed where LSTAT cannot be trusted). real is where the
// host resolved dir, or "" when it was not asked; it is then asked the
// first time it is needed.
func NewRoot(fsys FS, dir, real string) *Root {
	res, _ := fsys.(Resolver)
	return &Root{fsys: fsys, res: res, safe: IsLinkSafe(fsys), dir: path.Clean(dir), real: real, proved: map[string]bool{".": true}}
}

// RootOptions say how OpenRoot may reach its directory.
type RootOptions struct {
	// Base is a directory the caller vouches for (the login's home, or
	// "/"); every component from below it down to the root is checked.
	Base string
	// Create makes the missing components below Base; CreateLast makes
	// only the root itself, when its parent exists. Without either a
	// missing root is ErrNotExist.
	Create, CreateLast bool
	// ListParents lists each component's parent where LSTAT cannot be
	// trusted, so that a listing that says symlink outweighs an LSTAT
	// that says directory even on a server whose REALPATH does not
	// resolve. It costs a listing of every parent (a home, /tmp), so a
	// caller asks for it when it first proves a path; REALPATH carries
	// the proof after that.
	ListParents bool
	// ListMax bounds each of those listings; 0 means 10,000 entries.
	ListMax int
}

// OpenRoot proves dir and returns its root. Every existing component
// below o.Base must be a directory by LSTAT, by its parent's listing
// where LSTAT cannot be trusted and o.ListParents asks (a listing that
// says symlink outweighs an LSTAT that says directory), and by REALPATH: it resolves to where the
// base resolves joined with its own name. A path whose deepest
// components are missing is proved from its deepest existing ancestor,
// and every component it creates is created by this call (a MKDIR that
// finds a name taken fails). The checks go out together, one round trip
// on most servers.
func OpenRoot(ctx context.Context, fsys FS, dir string, o RootOptions) (*Root, error) {
	dir, base := path.Clean(dir), path.Clean(cmp.Or(o.Base, "/"))
	if !path.IsAbs(dir) || !path.IsAbs(base) {
		return nil, fmt.Errorf("root %s: not an absolute path", dir)
	}
	rel, ok := below(base, dir)
	if !ok || rel == "." {
		return nil, fmt.Errorf("root %s: not below %s", dir, base)
	}
	var chain []string // base's child, ..., dir
	for d := dir; d != base; d = path.Dir(d) {
		chain = append([]string{d}, chain...)
	}
	r := NewRoot(fsys, dir, "")
	listMax := cmp.Or(o.ListMax, 10_000)
	list := !r.safe && o.ListParents

	var (
		wg       sync.WaitGroup
		infos    = make([]FileInfo, len(chain))
		errs     = make([]error, len(chain))
		reals    = make([]string, len(chain))
		realErrs = make([]error, len(chain))
		listed   = make([]*FileInfo, len(chain))
		listErrs = make([]error, len(chain))
		realBase string
		baseErr  error
	)
	for i, c := range chain {
		wg.Go(func() { infos[i], errs[i] = fsys.Lstat(ctx, c) })
		if r.res != nil {
			wg.Go(func() { reals[i], realErrs[i] = r.res.RealPath(ctx, c) })
		}
		if list {
			wg.Go(func() { listed[i], listErrs[i] = listEntry(ctx, fsys, c, listMax) })
		}
	}
	if r.res != nil {
		wg.Go(func() { realBase, baseErr = r.res.RealPath(ctx, base) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.res != nil && baseErr != nil {
		return nil, fmt.Errorf("resolve %s: %w", base, baseErr)
	}
	realBase = path.Clean(realBase)

	missing := len(chain)
	for i, c := range chain {
		err := errs[i]
		if list && listErrs[i] == nil && listed[i] == nil && err == nil {
			// LSTAT found what the parent's listing does not hold.
			return nil, fmt.Errorf("%s: the host's LSTAT finds it but its parent's listing does not: %w", c, ErrNotProven)
		}
		switch {
		case errors.Is(err, ErrNotExist):
			if missing == len(chain) {
				missing = i
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("lstat %s: %w", c, err)
		case missing < i:
			return nil, fmt.Errorf("%s exists below the missing %s: the host's answers disagree: %w", c, chain[missing], ErrNotProven)
		case infos[i].IsSymlink():
			return nil, fmt.Errorf("%s is a symlink; the path must be real directories", c)
		case !infos[i].IsDir():
			return nil, fmt.Errorf("%s is a %s, not a directory", c, Kind(infos[i].Mode))
		}
		if list {
			switch {
			case listErrs[i] != nil:
				return nil, fmt.Errorf("list %s to tell whether %s is a symlink: %w", path.Dir(c), path.Base(c), listErrs[i])
			case listed[i].IsSymlink():
				return nil, fmt.Errorf("%s is a symlink (its parent's listing says so; the server's LSTAT follows symlinks); the path must be real directories", c)
			case !listed[i].IsDir():
				return nil, fmt.Errorf("%s is listed as a %s, not a directory", c, Kind(listed[i].Mode))
			}
		}
		if r.res != nil {
			crel, _ := below(base, c)
			want := path.Join(realBase, crel)
			if realErrs[i] != nil {
				return nil, fmt.Errorf("resolve %s: %w", c, realErrs[i])
			}
			if got := path.Clean(reals[i]); got != want {
				return nil, fmt.Errorf("%s resolves to %s, not %s: a symlink is on the path: %w", c, got, want, ErrNotProven)
			}
		}
	}
	if missing < len(chain) {
		switch {
		case !o.Create && !(o.CreateLast && missing == len(chain)-1):
			if o.CreateLast {
				return nil, fmt.Errorf("%s does not exist; only %s itself is created here: %w", chain[missing], dir, ErrNotExist)
			}
			return nil, fmt.Errorf("%s: %w", chain[missing], ErrNotExist)
		}
		for _, c := range chain[missing:] {
			if err := fsys.Mkdir(ctx, c); err != nil {
				return nil, fmt.Errorf("mkdir %s: %w", c, err)
			}
		}
	}
	if r.res != nil {
		want := path.Join(realBase, rel)
		if missing < len(chain) {
			// What was just made must resolve where it was made.
			got, err := r.res.RealPath(ctx, dir)
			if err != nil {
				return nil, fmt.Errorf("resolve %s: %w", dir, err)
			}
			if path.Clean(got) != want {
				return nil, fmt.Errorf("%s resolves to %s once made, not %s: %w", dir, got, want, ErrNotProven)
			}
		}
		r.real = want
	}
	return r, nil
}

// listEntry lists name's parent and returns name's entry, nil when the
// listing does not hold it. A listing that fails is asked again, twice:
// some servers (AsyncSSH) stat every entry they list and fail the whole
// listing when one vanishes in between, as happens in a busy /tmp or home.
func listEntry(ctx context.Context, fsys FS, name string, max int) (*FileInfo, error) {
	var ents []FileInfo
	var err error
	for range 3 {
		if ents, err = fsys.ReadDir(ctx, path.Dir(name), max); err == nil || ctx.Err() != nil || errors.Is(err, ErrBroken) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	for i := range ents {
		if ents[i].Name == path.Base(name) {
			return &ents[i], nil
		}
	}
	return nil, nil
}

// below reports whether p is base or below it, and p relative to base.
func below(base, p string) (string, bool) {
	if p == base {
		return ".", true
	}
	prefix := strings.TrimSuffix(base, "/") + "/"
	rest, ok := strings.CutPrefix(p, prefix)
	return rest, ok && rest != ""
}

// Dir is the root's absolute path as the client names it.
func (r *Root) Dir() string { return r.dir }

// FS is the transport the root acts through.
func (r *Root) FS() FS { return r.fsys }

// LinkSafe reports whether the root's host vouches for its LSTAT.
func (r *Root) LinkSafe() bool { return r.safe }

// Path is rel's absolute path on the host.
func (r *Root) Path(rel string) string { return path.Join(r.dir, rel) }

// clean checks rel: relative, clean, and not climbing out.
func clean(rel string) (string, error) {
	c := path.Clean(rel)
	if rel == "" || path.IsAbs(rel) || c != rel || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q is not a plain name inside the root: %w", rel, ErrNotProven)
	}
	return c, nil
}

// realDir returns where the host resolves the root, asking once.
func (r *Root) realDir(ctx context.Context) (string, error) {
	r.mu.Lock()
	real := r.real
	r.mu.Unlock()
	if real != "" || r.res == nil {
		return real, nil
	}
	got, err := r.res.RealPath(ctx, r.dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", r.dir, err)
	}
	r.mu.Lock()
	r.real = path.Clean(got)
	real = r.real
	r.mu.Unlock()
	return real, nil
}

// placed checks that the host resolves rel to its own place inside the
// root. A transport that cannot resolve (no REALPATH, or it answers
// ErrUnsupported) is not asked: what its LSTAT and listings say is all
// there is to go by.
func (r *Root) placed(ctx context.Context, rel string) error {
	if r.res == nil {
		return nil
	}
	real, err := r.realDir(ctx)
	if errors.Is(err, ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	got, err := r.res.RealPath(ctx, r.Path(rel))
	if errors.Is(err, ErrUnsupported) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("resolve %s: %w", r.Path(rel), err)
	}
	if want := path.Join(real, rel); path.Clean(got) != want {
		return fmt.Errorf("%s resolves to %s, not %s (a symlink is on its way): %w", r.Path(rel), got, want, ErrNotProven)
	}
	return nil
}

// Prove checks that rel, which a listing of its directory described as
// listed, is that kind of file at its own place inside the root. On a
// LinkSafe host the listing says so. Elsewhere a directory must resolve
// (REALPATH) to its own place; a regular file must too, and its LSTAT
// must agree with the listing (both asked at once); any other kind of
// file is proved only where LSTAT says the same, so that the server is
// not one that follows it. A directory proved is remembered.
func (r *Root) Prove(ctx context.Context, rel string, listed FileInfo) error {
	rel, err := clean(rel)
	if err != nil {
		return err
	}
	if r.safe {
		return r.provedKind(rel, listed)
	}
	var (
		wg        sync.WaitGroup
		fi        FileInfo
		lerr, rer error
	)
	if !listed.IsDir() {
		wg.Go(func() { fi, lerr = r.fsys.Lstat(ctx, r.Path(rel)) })
	}
	if listed.IsRegular() || listed.IsDir() {
		wg.Go(func() { rer = r.placed(ctx, rel) })
	}
	wg.Wait()
	switch {
	case lerr != nil:
		return fmt.Errorf("lstat %s: %w", r.Path(rel), lerr)
	case !listed.IsDir() && fi.Mode.Type() != listed.Mode.Type():
		return fmt.Errorf("%s: the host lists a %s and its LSTAT says %s (it follows symlinks): %w", r.Path(rel), Kind(listed.Mode), Kind(fi.Mode), ErrNotProven)
	case rer != nil:
		return rer
	}
	return r.provedKind(rel, listed)
}

func (r *Root) provedKind(rel string, listed FileInfo) error {
	if listed.IsDir() {
		r.mu.Lock()
		r.proved[rel] = true
		r.mu.Unlock()
	}
	return nil
}

// dirProved reports whether rel's directory is the root or a directory
// this root made or proved.
func (r *Root) dirProved(rel string) error {
	d := path.Dir(rel)
	r.mu.Lock()
	ok := r.proved[d]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: its directory %s is not proved inside the root: %w", r.Path(rel), r.Path(d), ErrNotProven)
	}
	return nil
}

// Lstat describes rel (what the host says; not a proof).
func (r *Root) Lstat(ctx context.Context, rel string) (FileInfo, error) {
	rel, err := clean(rel)
	if err != nil {
		return FileInfo{}, err
	}
	return r.fsys.Lstat(ctx, r.Path(rel))
}

// ReadDir lists rel (what the host says; not a proof).
func (r *Root) ReadDir(ctx context.Context, rel string, max int) ([]FileInfo, error) {
	if rel != "." {
		var err error
		if rel, err = clean(rel); err != nil {
			return nil, err
		}
	}
	return r.fsys.ReadDir(ctx, r.Path(rel), max)
}

// Mkdir creates the directory rel in a proved directory. A directory made
// here is proved: this client made it, where nothing was.
func (r *Root) Mkdir(ctx context.Context, rel string) error {
	rel, err := clean(rel)
	if err != nil {
		return err
	}
	if err := r.dirProved(rel); err != nil {
		return err
	}
	if err := r.fsys.Mkdir(ctx, r.Path(rel)); err != nil {
		return err
	}
	r.mu.Lock()
	r.proved[rel] = true
	r.mu.Unlock()
	return nil
}

// Rename moves rel, listed as its directory's listing described it, to
// the new name to in a proved directory, never replacing anything there
// (ErrExist). rel is proved first (Prove).
func (r *Root) Rename(ctx context.Context, rel string, listed FileInfo, to string) error {
	rel, err := clean(rel)
	if err != nil {
		return err
	}
	if to, err = clean(to); err != nil {
		return err
	}
	if err := r.dirProved(to); err != nil {
		return err
	}
	if err := r.Prove(ctx, rel, listed); err != nil {
		return err
	}
	return r.fsys.Rename(ctx, r.Path(rel), r.Path(to))
}

// Remove deletes rel, a file listed as listed, once proved (Prove). A
// name already gone is ErrNotExist.
func (r *Root) Remove(ctx context.Context, rel string, listed FileInfo) error {
	if err := r.Prove(ctx, rel, listed); err != nil {
		return err
	}
	return r.fsys.Remove(ctx, r.Path(rel))
}

// WriteNew creates rel, which must not exist, in a proved directory,
// with data and permission bits perm (Writer.WriteNew). The handle's
// size after the last write must be exactly len(data): a host that
// acknowledges writes it did not store fails with ErrNotStored, and what
// it created is removed.
func (r *Root) WriteNew(ctx context.Context, rel string, data []byte, perm fs.FileMode) (FileInfo, bool, error) {
	rel, err := clean(rel)
	if err != nil {
		return FileInfo{}, false, err
	}
	w, ok := r.fsys.(Writer)
	if !ok {
		return FileInfo{}, false, fmt.Errorf("write %s: this transport cannot write files: %w", r.Path(rel), ErrUnsupported)
	}
	if err := r.dirProved(rel); err != nil {
		return FileInfo{}, false, err
	}
	fi, synced, err := w.WriteNew(ctx, r.Path(rel), data, perm)
	if err != nil {
		return FileInfo{}, false, err
	}
	if !fi.IsRegular() || fi.Size != int64(len(data)) {
		r.fsys.Remove(ctx, r.Path(rel)) // ours: created with O_EXCL just now
		return FileInfo{}, false, fmt.Errorf("write %s: %d bytes sent, the handle then held %d (a %s): %w", r.Path(rel), len(data), fi.Size, Kind(fi.Mode), ErrNotStored)
	}
	return fi, synced, nil
}

// Replace puts tmp, a file this client wrote with WriteNew, in the place
// of rel. old is rel as its directory's listing described it, nil when it
// was not there; an existing rel is proved first, and tmp's real place is
// checked again just before the rename. A host with an atomic replacing
// rename (posix-rename) replaces in one step; elsewhere rel is moved
// aside under aside (a fresh name in its directory), tmp renamed in, and
// the old copy removed: for that moment the name is missing, never
// wrong. On any error tmp is removed.
func (r *Root) Replace(ctx context.Context, tmp, rel string, old *FileInfo, aside string) (err error) {
	defer func() {
		if err != nil {
			if ctx.Err() == nil {
				r.fsys.Remove(ctx, r.Path(tmp))
			}
		}
	}()
	if tmp, err = clean(tmp); err != nil {
		return err
	}
	if rel, err = clean(rel); err != nil {
		return err
	}
	w, ok := r.fsys.(Writer)
	if !ok {
		return fmt.Errorf("replace %s: this transport cannot write files: %w", r.Path(rel), ErrUnsupported)
	}
	if err := r.dirProved(rel); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var perr, oerr error
	wg.Go(func() { perr = r.placed(ctx, tmp) })
	if old != nil {
		wg.Go(func() { oerr = r.Prove(ctx, rel, *old) })
	}
	wg.Wait()
	if err := cmp.Or(perr, oerr); err != nil {
		return err
	}
	err = w.Replace(ctx, r.Path(tmp), r.Path(rel))
	if !errors.Is(err, ErrUnsupported) {
		return err
	}
	err = r.fsys.Rename(ctx, r.Path(tmp), r.Path(rel))
	if !errors.Is(err, ErrExist) {
		return err
	}
	if old == nil {
		return fmt.Errorf("replace %s: it appeared since it was listed: %w", r.Path(rel), ErrExist)
	}
	if err := r.fsys.Rename(ctx, r.Path(rel), r.Path(aside)); err != nil && !errors.Is(err, ErrNotExist) {
		return err
	}
	if err := r.fsys.Rename(ctx, r.Path(tmp), r.Path(rel)); err != nil {
		return err
	}
	// The old copy, now under a name of ours, goes; one left behind is
	// removed by the caller's next pass.
	r.fsys.Remove(ctx, r.Path(aside))
	return nil
}
