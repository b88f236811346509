package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/internal/durable"
)

// DefaultMaxEntries bounds ReadDir when the caller passes no bound: a
// directory holding more names than this is an error, not a memory spike.
const DefaultMaxEntries = 100_000

// Local is the FS of the machine handoff runs on. It holds no state: every
// method is a few system calls on the names it is given, so any number of
// goroutines may call it at once.
type Local struct{}

var (
	_ FS         = Local{}
	_ TailReader = Local{}
	_ Resolver   = Local{}
)

// NewLocal returns the local transport.
func NewLocal() Local { return Local{} }

// Home is $HOME, or the account's home directory.
func (Local) Home(ctx context.Context) (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("local: home: %w", err)
	}
	return home, nil
}

// RealPath is realpath(3): name with every symlink followed. A root's
// temporary files are checked with it before they are renamed into place.
func (Local) RealPath(ctx context.Context, name string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(name)
}

// LstatNoFollow reports true: Lstat is lstat(2).
func (Local) LstatNoFollow() bool { return true }

// Lstat is lstat(2).
func (Local) Lstat(ctx context.Context, name string) (FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return FileInfo{}, err
	}
	fi, err := os.Lstat(name)
	if err != nil {
		return FileInfo{}, err
	}
	return fromOS(fi), nil
}

// ReadDir opens name with O_NOFOLLOW (a symlink to a directory is not
// listed: ENOTDIR) and lstats each entry, 1024 names at a time, failing
// once more than maxEntries have been read.
func (Local) ReadDir(ctx context.Context, name string, maxEntries int) ([]FileInfo, error) {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
			return nil, &os.PathError{Op: "readdir", Path: name, Err: syscall.ENOTDIR}
		}
		return nil, err
	}
	defer f.Close()
	var out []FileInfo
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ents, err := f.ReadDir(1024)
		for _, e := range ents {
			fi, ierr := e.Info() // lstat; the entry may vanish in between
			if ierr != nil {
				if errors.Is(ierr, os.ErrNotExist) {
					continue
				}
				return nil, ierr
			}
			out = append(out, fromOS(fi))
		}
		if len(out) > maxEntries {
			return nil, fmt.Errorf("readdir %s: more than %d entries", name, maxEntries)
		}
		if err == io.EOF || len(ents) == 0 {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// ReadFile opens name with O_NOFOLLOW and O_NONBLOCK, checks the handle is a
// regular file of at most limit bytes, and reads at most its size plus one
// byte.
func (Local) ReadFile(ctx context.Context, name string, limit int64) ([]byte, FileInfo, error) {
	f, before, err := openRegular(ctx, name)
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer f.Close()
	if before.Size() > limit {
		return nil, FileInfo{}, fmt.Errorf("read %s: %w (%d bytes, limit %d)", name, ErrTooLarge, before.Size(), limit)
	}
	// Never read more than the handle's own size says, plus one byte to
	// notice a file still growing.
	data, err := io.ReadAll(io.LimitReader(f, before.Size()+1))
	if err != nil {
		return nil, FileInfo{}, err
	}
	if int64(len(data)) > before.Size() {
		return nil, FileInfo{}, fmt.Errorf("read %s: %w (grew past %d bytes)", name, ErrChanged, before.Size())
	}
	after, err := f.Stat()
	if err != nil {
		return nil, FileInfo{}, err
	}
	return data, fromOS(after), nil
}

// ReadTail reads the n bytes that end at listed.Size, from a handle opened
// as ReadFile opens one.
func (Local) ReadTail(ctx context.Context, name string, listed FileInfo, n int64) ([]byte, error) {
	if !listed.IsRegular() {
		return nil, fmt.Errorf("read %s: %w", name, ErrNotRegular)
	}
	if n < 0 || listed.Size < n {
		return nil, fmt.Errorf("read %s: %w (%d bytes, fewer than %d)", name, ErrChanged, listed.Size, n)
	}
	f, _, err := openRegular(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, listed.Size-n)
	switch {
	case int64(got) == n:
		return buf, nil // io.ReaderAt may say EOF with the last byte
	case err == nil || errors.Is(err, io.EOF):
		return nil, fmt.Errorf("read %s: %w (shorter than %d bytes)", name, ErrChanged, listed.Size)
	}
	return nil, err
}

// openRegular opens name for reading without following a symlink or
// waiting on a FIFO, and checks the handle is a regular file.
func openRegular(ctx context.Context, name string) (*os.File, fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOFOLLOW: a
	// symlink swapped in after Lstat fails with ELOOP instead of being read.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("read %s: %w", name, ErrNotRegular)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("read %s: %w", name, ErrNotRegular)
	}
	return f, fi, nil
}

// Rename renames without ever replacing newname (durable.RenameNoReplace:
// renameat2's RENAME_NOREPLACE, or a link and an unlink on file systems
// without it). An interruption between the link and the unlink leaves
// both names holding the same bytes, which callers treat as an archive
// already done.
func (Local) Rename(ctx context.Context, oldname, newname string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := durable.RenameNoReplace(unix.AT_FDCWD, oldname, unix.AT_FDCWD, newname); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}

// Mkdir is mkdir(2), mode 0700.
func (Local) Mkdir(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Mkdir(name, 0o700)
}

// Remove is unlink(2), or rmdir(2) for a directory; neither follows a
// symlink.
func (Local) Remove(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Remove(name)
}

// WriteNew creates name with O_EXCL (which never follows a symlink),
// writes and fsyncs it, and sets its mode. A failed write removes it.
func (Local) WriteNew(ctx context.Context, name string, data []byte, perm fs.FileMode) (FileInfo, bool, error) {
	if err := ctx.Err(); err != nil {
		return FileInfo{}, false, err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return FileInfo{}, false, err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return FileInfo{}, false, err
	}
	return fromOS(fi), true, nil
}

// Replace is rename(2), which replaces atomically, followed by an fsync
// of the directory so that the new name survives a crash.
func (Local) Replace(ctx context.Context, oldname, newname string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(oldname, newname); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(newname))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Close does nothing: there is no connection.
func (Local) Close() error { return nil }

func fromOS(fi os.FileInfo) FileInfo {
	return FileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}
