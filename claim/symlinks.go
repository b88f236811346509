package claim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"sync"

	"github.com/handoff-sync/handoff/transport"
)

// Some SFTP servers (ProFTPD's mod_sftp) follow symlinks in LSTAT, RENAME
// and REMOVE, while their listings report each entry's true type. On such
// a server an LSTAT that says "directory" or "regular file" proves nothing,
// and a RENAME of a symlink moves what it points to. A type is trusted
// here only when two answers agree: a listing, and an LSTAT or a REALPATH.
// See docs/design.md, "Servers that follow symlinks".

// lstatResolve asks about lnames (LSTAT) and resolves rnames (REALPATH,
// where the transport can and its LSTAT needs checking) all at once, so
// that they cost one round trip together. The LSTATs go as one batch
// where the transport takes them so (lstatEach); only the REALPATHs get a
// goroutine each. reals[i] is "" where rnames[i] was not resolved. It
// returns an error only when ctx ended first.
func lstatResolve(ctx context.Context, fsys transport.FS, lnames, rnames []string) (fis []transport.FileInfo, errs []error, reals []string, err error) {
	reals = make([]string, len(rnames))
	res := transport.Checker(fsys)
	if res == nil {
		rnames = nil
	}
	var wg sync.WaitGroup
	var resolveErr error
	if len(rnames) > 0 {
		wg.Go(func() {
			resolveErr = inParallel(ctx, len(rnames), len(rnames), func(ctx context.Context, i int) error {
				if real, err := res.RealPath(ctx, rnames[i]); err == nil && path.IsAbs(real) {
					reals[i] = path.Clean(real)
				}
				return nil
			})
		})
	}
	if len(lnames) > 0 {
		fis, errs = lstatEach(ctx, fsys, lnames)
	}
	wg.Wait()
	return fis, errs, reals, cmp.Or(resolveErr, ctx.Err())
}

// throughSymlink is asked when a directory that LSTAT called a directory
// resolves (REALPATH) elsewhere than its path says: it lists the parent of
// each of steps and reports whether any shows that step as a symlink. That
// is a server whose LSTAT follows symlinks. A step its parent's listing
// shows as a directory is no symlink (the paths may differ in case only,
// or through a mount the server resolves). A listing that fails is an
// error: the caller cannot tell.
func throughSymlink(ctx context.Context, l *lister, steps ...string) (bool, error) {
	for _, step := range steps {
		ents, err := l.readDir(ctx, path.Dir(step))
		if err != nil {
			return false, fmt.Errorf("list %s to tell whether %s is a symlink: %w", Quote(path.Dir(step)), Quote(path.Base(step)), err)
		}
		var found *transport.FileInfo
		for i := range ents {
			if ents[i].Name == path.Base(step) {
				found = &ents[i]
				break
			}
		}
		switch {
		case found == nil:
			return false, fmt.Errorf("list %s: %w", Quote(step), transport.ErrNotExist)
		case found.IsSymlink():
			return true, nil
		case !found.IsDir():
			return false, fmt.Errorf("%s is not a directory", Quote(step))
		}
	}
	return false, nil
}

// symlinkedDir settles a directory LSTAT called a directory, given where
// the host resolved it (real) and where it would resolve with no symlink
// on the way (want), either "" when unknown. If they differ it asks the
// parents' listings (throughSymlink over steps). It reports whether dir is
// reached through a symlink; an error means it cannot tell.
func symlinkedDir(ctx context.Context, l *lister, real, want string, steps ...string) (bool, error) {
	if real == "" || want == "" || real == want {
		return false, nil
	}
	return throughSymlink(ctx, l, steps...)
}

// fatal reports whether err ends the host's discovery (the transport
// broke, or ctx ended) rather than one inbox's.
func fatal(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, transport.ErrBroken)
}
