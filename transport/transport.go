package transport

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Errors every implementation returns (possibly wrapped) so that callers can
// branch with errors.Is. They alias the io/fs sentinels where one exists, so
// os.IsNotExist-style checks keep working on the local transport.
var (
	// ErrNotExist: the named file or directory does not exist.
	ErrNotExist = fs.ErrNotExist
	// ErrExist: Rename or Mkdir found the destination already present. The
	// destination is left untouched.
	ErrExist = fs.ErrExist
	// ErrTooLarge: ReadFile would have had to read more than its limit. No
	// data is returned.
	ErrTooLarge = errors.New("file exceeds read limit")
	// ErrNotRegular: ReadFile opened something that is not a regular file
	// (the name was swapped after Lstat, or the server lied).
	ErrNotRegular = errors.New("not a regular file")
	// ErrChanged: ReadFile found the file different from what its stat said
	// (another size or time on the open handle, or more bytes than its size).
	// The file is worth another try later.
	ErrChanged = errors.New("file changed while being read")
	// ErrBroken: the connection to the host is gone; every later call fails.
	ErrBroken = errors.New("connection to the host is broken")
	// ErrUnsupported: the host cannot do what was asked (Writer.Replace on
	// a server without an atomic replacing rename). Nothing was changed.
	ErrUnsupported = errors.ErrUnsupported
)

// FileInfo is what the transport reports about one name, without following
// a symlink in the last component.
type FileInfo struct {
	Name    string      // base name as the host reported it (not validated)
	Size    int64       // bytes; meaningful for regular files only
	Mode    fs.FileMode // type bits and permissions, as io/fs defines them
	ModTime time.Time
}

// Kind names a file type for messages: "regular file", "directory",
// "symlink", "named pipe", "socket", "device" or "special file".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// IsRegular reports whether the entry is a plain file.
func (fi FileInfo) IsRegular() bool { return fi.Mode.IsRegular() }

// IsDir reports whether the entry is a directory (never a symlink to one).
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// IsSymlink reports whether the entry is a symbolic link.
func (fi FileInfo) IsSymlink() bool { return fi.Mode&fs.ModeSymlink != 0 }

// FS is the file-system surface that discovery, claim and acknowledgement
// need from a host. Paths are absolute, slash-separated and already cleaned
// by the caller; implementations never expand "~" themselves (use Home).
//
// Every method takes a context. An implementation must return promptly once
// the context is done, even if that means tearing down its connection; after
// that the FS may be unusable and every later call may fail.
//
// Every method may be called from many goroutines at once. Calls on
// distinct names do not affect each other, and bounds (ReadDir's
// maxEntries, ReadFile's limit) hold for each call on its own. Close may be
// called while other calls are in flight; they may then fail (ErrBroken).
type FS interface {
	// Home returns the absolute home directory of the account the transport
	// acts as. "~" in manifest paths is expanded against it.
	Home(ctx context.Context) (string, error)

	// Lstat describes name without following a final symlink.
	Lstat(ctx context.Context, name string) (FileInfo, error)

	// ReadDir lists a directory with lstat semantics: a symlink is reported
	// as a symlink, never as what it points to. Entry order is unspecified.
	// Implementations may stop and return an error after maxEntries entries
	// (maxEntries <= 0 means the implementation's own bound).
	ReadDir(ctx context.Context, name string, maxEntries int) ([]FileInfo, error)

	// ReadFile opens name without following a final symlink, checks that the
	// open handle is a regular file (ErrNotRegular otherwise) and reads at most
	// limit bytes. If the file holds more than limit bytes it returns
	// ErrTooLarge and no data: no reply from the host can make it read more
	// than limit+1 bytes. A file that turns out longer than its own stat
	// said, or whose handle describes another file, fails with ErrChanged. It returns the data and a stat of the open handle
	// taken after the read, so that the caller can detect a file that changed.
	ReadFile(ctx context.Context, name string, limit int64) ([]byte, FileInfo, error)

	// Rename moves oldname to newname and never replaces an existing
	// newname: if newname exists it returns ErrExist and changes nothing.
	Rename(ctx context.Context, oldname, newname string) error

	// Mkdir creates one directory (mode 0700 before umask). It returns
	// ErrExist if anything already has that name.
	Mkdir(ctx context.Context, name string) error

	// Remove deletes one file or empty directory. It never follows a symlink.
	Remove(ctx context.Context, name string) error

	// Close releases the connection, if any. It is safe to call twice.
	Close() error
}

// ContentReader is implemented by transports that can read a file whose
// bytes the caller only compares with bytes it already holds, or checks
// against a checksum they carry (a git index), more cheaply than ReadFile.
// ReadContent keeps ReadFile's bounds (it never opens what Lstat does not
// call a regular file, never returns or holds more than limit+1 bytes, and
// fails with ErrTooLarge when the file exceeds limit) but need not check
// the open handle against the name: a file that changed simply compares
// unequal (or fails its checksum).
type ContentReader interface {
	ReadContent(ctx context.Context, name string, limit int64) ([]byte, error)
}

// ListedReader is implemented by transports that can read a file the
// caller has just listed without asking for its lstat again: listed, the
// listing's entry, stands in for the lstat ReadFile takes before opening.
// ReadListed keeps ReadFile's other guarantees, checked against listed: the
// open handle must be a regular file of the listed size and modification
// time (ErrChanged otherwise, ErrNotRegular for another kind of file), a
// listed size over limit is ErrTooLarge with nothing read, and no reply can
// make it hold more than min(listed size, limit)+1 bytes.
type ListedReader interface {
	ReadListed(ctx context.Context, name string, listed FileInfo, limit int64) ([]byte, FileInfo, error)
}

// TailReader is implemented by transports that can read the last n bytes
// of a regular file without the rest: a git index ends with a SHA-1 of
// everything before it, so its last 20 bytes say whether it is the index
// a previous run read. listed, an lstat of name the caller has just taken,
// gives the size the tail is read at. ReadTail never opens what listed
// does not call a regular file (ErrNotRegular), fails with ErrChanged when
// the file holds fewer than n bytes at that size, and never holds more
// than n bytes whatever the server sends. A file replaced since listed
// gives other bytes, which the caller's comparison rejects.
type TailReader interface {
	ReadTail(ctx context.Context, name string, listed FileInfo, n int64) ([]byte, error)
}

// Resolver is implemented by transports whose host can resolve a path
// (SFTP's REALPATH, realpath(3) on the host): the absolute path with
// every symlink followed. Discovery uses it to notice a server whose LSTAT
// follows symlinks, which its other answers cannot show: where a path
// resolves elsewhere than it should, a symlink is on the way.
type Resolver interface {
	RealPath(ctx context.Context, name string) (string, error)
}

// Batcher is implemented by transports that can ask about many names at
// once more cheaply than with one Lstat call each. LstatAll returns, for
// each name, what Lstat would: a description or an error.
type Batcher interface {
	LstatAll(ctx context.Context, names []string) ([]FileInfo, []error)
}

// LinkSafe is implemented by transports that can vouch for their LSTAT:
// where LstatNoFollow reports true, LSTAT never follows a symlink (it is
// lstat(2) on the host, or OpenSSH's sftp-server). Its type is then to be
// trusted on its own, and discovery asks no REALPATH beside it.
type LinkSafe interface {
	LstatNoFollow() bool
}

// Writer is implemented by transports that can publish files, as the
// mirror does: each file is written under a new name and then renamed
// over the old one, so that a reader sees the old bytes or the new, never
// a mix.
type Writer interface {
	// WriteNew creates name, which must not exist: anything already there,
	// a symlink included, fails with ErrExist and is left as it was. It
	// writes data, flushes it to stable storage where the host offers that
	// (the result says whether it did), sets the permission bits to perm,
	// and returns the stat of the written file.
	WriteNew(ctx context.Context, name string, data []byte, perm fs.FileMode) (fi FileInfo, synced bool, err error)

	// Replace renames oldname to newname in one atomic step, replacing a
	// file newname names. A host that cannot replace atomically gives
	// ErrUnsupported and changes nothing; the caller then moves newname
	// aside first.
	Replace(ctx context.Context, oldname, newname string) error
}

// ReadContent reads name for comparison with bytes the caller holds (or
// with a checksum the content carries): with fsys's ReadContent when it
// has one, else with ReadFile.
func ReadContent(ctx context.Context, fsys FS, name string, limit int64) ([]byte, error) {
	if cr, ok := fsys.(ContentReader); ok {
		return cr.ReadContent(ctx, name, limit)
	}
	data, _, err := fsys.ReadFile(ctx, name, limit)
	return data, err
}

// ReadTail reads the last n bytes of a file listed as a regular file of
// listed.Size bytes: with fsys's ReadTail when it has one, else by
// reading the whole file (at most listed.Size bytes) with ReadContent.
func ReadTail(ctx context.Context, fsys FS, name string, listed FileInfo, n int64) ([]byte, error) {
	if !listed.IsRegular() {
		return nil, fmt.Errorf("%w (a %s)", ErrNotRegular, Kind(listed.Mode))
	}
	if n < 0 || listed.Size < n {
		return nil, fmt.Errorf("%w: %d bytes, fewer than the %d asked for at the end", ErrChanged, listed.Size, n)
	}
	if tr, ok := fsys.(TailReader); ok {
		return tr.ReadTail(ctx, name, listed, n)
	}
	data, err := ReadContent(ctx, fsys, name, listed.Size)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != listed.Size {
		return nil, fmt.Errorf("%w: %d bytes read, %d listed", ErrChanged, len(data), listed.Size)
	}
	return data[len(data)-int(n):], nil
}

// ReadListed reads a file the caller has just listed: with fsys's
// ReadListed when it has one, else with ReadFile.
func ReadListed(ctx context.Context, fsys FS, name string, listed FileInfo, limit int64) ([]byte, FileInfo, error) {
	if lr, ok := fsys.(ListedReader); ok {
		return lr.ReadListed(ctx, name, listed, limit)
	}
	return fsys.ReadFile(ctx, name, limit)
}
