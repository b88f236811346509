package ingest

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/layout"
)

// errUnsafe is returned for a target that cannot be written safely; its
// Reason is the review code.
type errUnsafe struct {
	Reason string
	Msg    string
}

func (e *errUnsafe) Error() string { return e.Msg }

// workspace confines every read and write to one directory tree. Each
// operation first checks, component by component, that no part of the path
// is a symlink; the os.Root underneath guarantees that even a symlink swapped
// in after the check cannot lead outside the tree. The check walks from
// top, the tree's own directory, opening one component at a time with
// O_NOFOLLOW, so that a symlink is refused by the open itself (os.Root
// would follow one that stays inside), and reads a target through the
// directory that walk opened.
type workspace struct {
	dir     string
	root    *os.Root
	top     *os.File // root's directory, where check's walks start
	dryRun  bool
	cleanup func()

	// mark guards marked and found: whether this handle made
	// layout.IngestingFile durable (markWriting) or found it there
	// (leftMarked).
	mark          sync.Mutex
	marked, found bool
}

func openWorkspace(dir string, dryRun bool) (*workspace, error) {
	w := &workspace{dir: dir, dryRun: dryRun}
	if dryRun {
		// A dry run must not create the workspace; a missing one reads as
		// an empty one.
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			empty, err := os.MkdirTemp("", "handoff-dry-run-ws-")
			if err != nil {
				return nil, err
			}
			w.cleanup = func() { os.Remove(empty) }
			dir = empty
		}
	} else if err := durable.MkdirAllPath(dir, layout.SharedDir); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if w.cleanup != nil {
			w.cleanup()
		}
		return nil, err
	}
	w.root = root
	if w.top, err = root.OpenFile(".", os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0); err != nil {
		w.Close()
		return nil, err
	}
	if !dryRun {
		if err := w.narrow(); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// narrow takes group and other permissions away from the private trees'
// top directories (layout.PrivateTrees) when an earlier version left them
// wider. Closing the directory is enough: what is inside, made 0644 then,
// can no longer be reached by anyone else, and is left as it is. A tree
// that is missing, a symlink or not a directory is left to the steps
// that write into it, which refuse it. (os.Root follows a symlink in the
// last component even with O_NOFOLLOW, hence the Lstat and SameFile.)
func (w *workspace) narrow() error {
	for _, d := range layout.PrivateTrees {
		fi, err := w.root.Lstat(d)
		if err != nil || !fi.IsDir() {
			continue
		}
		f, err := w.root.OpenFile(d, os.O_RDONLY|syscall.O_DIRECTORY|nofollowNonblock, 0)
		if err != nil {
			return err
		}
		if st, serr := f.Stat(); serr == nil && os.SameFile(fi, st) {
			err = durable.Narrow(f)
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *workspace) Close() error {
	if w.top != nil {
		w.top.Close()
	}
	err := w.root.Close()
	if w.cleanup != nil {
		w.cleanup()
	}
	return err
}

// read returns a target's content. exists is false when it is absent. It
// fails with *errUnsafe when a component is a symlink or not a directory, or
// the target is not a regular file.
func (w *workspace) read(target string) (data []byte, exists bool, err error) {
	f, err := w.open(target, os.O_RDONLY)
	if f == nil || err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = readAllLimited(f, maxTargetSize)
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", target, err)
	}
	return data, true, nil
}

// open opens the existing regular file target with flag, after check,
// without following a symlink or blocking on a FIFO, and checks the open
// handle is a regular file. It returns nil and no error when target does
// not exist.
func (w *workspace) open(target string, flag int) (*os.File, error) {
	dir, base, exists, err := w.walk(target)
	if err != nil || !exists {
		return nil, err
	}
	defer dir.close()
	fd, err := unix.Openat(dir.fd, base, flag|nofollowNonblock|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, &errUnsafe{ReasonSymlink, fmt.Sprintf("%s is a symlink; handoff never writes through one", target)}
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: target, Err: err}
	}
	f := os.NewFile(uintptr(fd), path.Join(w.dir, target))
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, &errUnsafe{ReasonNotRegular, fmt.Sprintf("%s is not a regular file", target)}
	}
	return f, nil
}

// check reports whether target exists, failing with *errUnsafe when a
// component is a symlink or not a directory, or the target is not a
// regular file.
func (w *workspace) check(target string) (exists bool, err error) {
	dir, _, exists, err := w.walk(target)
	if err == nil && exists {
		dir.close()
	}
	return exists, err
}

// walkDir is a directory a walk opened: top, or one it closes.
type walkDir struct {
	fd  int
	own bool
}

func (d walkDir) close() {
	if d.own {
		unix.Close(d.fd)
	}
}

// walk opens the directories of target one component at a time from top
// (O_PATH where there is one, O_NOFOLLOW: a symlink is not opened), and
// looks target up in the last one: exists is false when a component or
// target is missing.
// It fails with *errUnsafe when a component is a symlink or not a
// directory, or target is not a regular file. With exists, the caller
// closes dir, in which base names target.
func (w *workspace) walk(target string) (dir walkDir, base string, exists bool, err error) {
	if err := checkRel(target); err != nil {
		return walkDir{}, "", false, err
	}
	parts := strings.Split(target, "/")
	dir = walkDir{fd: int(w.top.Fd())}
	fail := func(err error) (walkDir, string, bool, error) {
		dir.close()
		return walkDir{}, "", false, err
	}
	for i, name := range parts[:len(parts)-1] {
		fd, err := unix.Openat(dir.fd, name, openPath|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			// A symlink, or something else that is no directory.
			var st unix.Stat_t
			if serr := unix.Fstatat(dir.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return fail(&errUnsafe{ReasonSymlink, fmt.Sprintf("%s is a symlink; handoff never writes through one", strings.Join(parts[:i+1], "/"))})
			}
			return fail(&errUnsafe{ReasonUnsafeTarget, fmt.Sprintf("%s is not a directory", strings.Join(parts[:i+1], "/"))})
		}
		if errors.Is(err, unix.ENOENT) {
			return fail(nil)
		}
		if err != nil {
			return fail(&fs.PathError{Op: "lstat", Path: strings.Join(parts[:i+1], "/"), Err: err})
		}
		dir.close()
		dir = walkDir{fd: fd, own: true}
	}
	base = parts[len(parts)-1]
	var st unix.Stat_t
	err = unix.Fstatat(dir.fd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return fail(nil)
	case err != nil:
		return fail(&fs.PathError{Op: "lstat", Path: target, Err: err})
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fail(&errUnsafe{ReasonSymlink, fmt.Sprintf("%s is a symlink; handoff never writes through one", target)})
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fail(&errUnsafe{ReasonNotRegular, fmt.Sprintf("%s is not a regular file", target)})
	}
	return dir, base, true, nil
}

// write replaces target durably, creating missing parent directories. The
// caller has just checked the path with read. Backups and review drafts
// are private (layout.FileMode): 0600 in 0700 directories.
func (w *workspace) write(target string, data []byte) error {
	if w.dryRun {
		return nil
	}
	if err := w.markWriting(); err != nil {
		return err
	}
	if err := w.mkdirs(path.Dir(target)); err != nil {
		return err
	}
	return durable.WriteFile(w.root, target, data, layout.FileMode(target))
}

// replaceIf replaces target durably only if what it replaces passes ok
// (see durable.ReplaceIf), creating missing parent directories.
func (w *workspace) replaceIf(target string, data []byte, ok func(old []byte, existed bool) bool) ([]byte, error) {
	if w.dryRun {
		return nil, nil
	}
	if err := w.markWriting(); err != nil {
		return nil, err
	}
	if err := w.mkdirs(path.Dir(target)); err != nil {
		return nil, err
	}
	return durable.ReplaceIf(w.root, target, data, layout.FileMode(target), ok)
}

// appendTo appends data to the existing regular file target and fsyncs it.
// It writes in place, with O_APPEND: for bytes that belong at the end
// whatever else is appended meanwhile (another writer's late edit).
func (w *workspace) appendTo(target string, data []byte) error {
	if w.dryRun {
		return nil
	}
	f, err := w.open(target, os.O_WRONLY|os.O_APPEND)
	if f == nil || err != nil {
		return cmp.Or(err, fmt.Errorf("%s: %w", target, fs.ErrNotExist))
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// mkdirs creates dir and its parents, refusing symlinked components.
func (w *workspace) mkdirs(dir string) error {
	if dir == "." {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := 1; i <= len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		fi, err := w.root.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			if err := w.root.Mkdir(d, layout.DirMode(d)); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			// The new directory must survive power loss before a file
			// in it is counted as written.
			if err := durable.SyncDir(w.root, path.Dir(d)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return &errUnsafe{ReasonSymlink, fmt.Sprintf("%s is not a real directory", d)}
		}
	}
	return nil
}

// markWriting makes sure, before the handle's first temporary file,
// that layout.IngestingFile exists and survives power loss: from then
// on a crash leaves it for the next ingester to find (leftMarked). Once
// per handle: one create and one fsync for a run that writes, none for
// one that does not.
func (w *workspace) markWriting() error {
	if w.dryRun {
		return nil
	}
	w.mark.Lock()
	defer w.mark.Unlock()
	if w.marked {
		return nil
	}
	if err := w.mkdirs(layout.StateDir); err != nil {
		return err
	}
	f, err := w.root.OpenFile(layout.IngestingFile, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, layout.FileMode(layout.IngestingFile))
	if err != nil {
		return fmt.Errorf("mark %s: %w", layout.IngestingFile, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := durable.SyncDir(w.root, layout.StateDir); err != nil {
		return err
	}
	w.marked = true
	return nil
}

// leftMarked reports whether layout.IngestingFile is there: an earlier
// ingester wrote into the workspace and did not close cleanly.
func (w *workspace) leftMarked() (bool, error) {
	_, err := w.root.Lstat(layout.IngestingFile)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	w.mark.Lock()
	w.found = true
	w.mark.Unlock()
	return true, nil
}

// unmark removes layout.IngestingFile, when this handle made or found
// it, once nothing is left behind. Its removal need not be durable: a
// mark that comes back after a power loss costs the next ingester one
// listing of its directories.
func (w *workspace) unmark() error {
	w.mark.Lock()
	defer w.mark.Unlock()
	if !w.marked && !w.found {
		return nil
	}
	if err := w.root.Remove(layout.IngestingFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	w.marked, w.found = false, false
	return nil
}

// removeTemps deletes temporary files left by a crashed run in every
// directory the ingester writes.
func (w *workspace) removeTemps() error {
	if w.dryRun {
		return nil
	}
	dirs := []string{".", layout.CardsDir, layout.ReviewDir, "rules", ".learnings", layout.BackupsDir, layout.ReceiptsDir}
	for _, d := range dirs {
		if fi, err := w.root.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		if _, err := durable.RemoveTemps(w.root, d); err != nil {
			return err
		}
	}
	return nil
}

func checkRel(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." || strings.ContainsRune(p, 0) {
		return &errUnsafe{ReasonUnsafeTarget, fmt.Sprintf("%q is not a clean path inside the workspace", p)}
	}
	return nil
}
