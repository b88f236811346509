// Package durable writes files so that after a crash or power loss a reader
// sees either the old content or the new content, never a torn mix, and once
// WriteFile returns the new content survives power loss.
//
// Every persistent write in handoff goes through this package: the spool,
// workspace targets, backups, review drafts and receipts. All writes happen
// through an *os.Root, so a name can never resolve outside its root; a
// batch's files may instead be created by base name in a directory that
// was opened through the root (Dirs).
//
// The protocol is the classic one: create a temporary file with O_EXCL in the
// target's directory, write, check the length, fsync, close, rename over the
// target, then fsync the directory. On any error the temporary file is
// removed. A crash may leave a temporary file behind; RemoveTemps deletes
// them and is called by the single ingester while it holds the lock.
//
// Reads (ReadRegular) open the last component with openat(2) and
// O_NOFOLLOW in its directory, because os.Root.OpenFile follows a final
// symlink that stays inside the root: a file swapped for a symlink after
// its caller's Lstat is refused, never read through.
//
// A new file gets the mode its caller asks for, less the umask. Narrow
// takes group and other permissions away from an existing file, for what
// an earlier version left wider than its callers now ask.
package durable

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// syncs counts fsync calls made by this package, for benchmarks.
var syncs atomic.Int64

// Syncs returns how many fsyncs (files and directories) this package has
// issued since the process started.
func Syncs() int64 { return syncs.Load() }

// TempPrefix starts the name of every temporary file this package creates.
const TempPrefix = ".handoff-tmp."

// WriteFile atomically replaces name (relative to root) with data and makes
// the result durable, directory entry included.
func WriteFile(root *os.Root, name string, data []byte, perm fs.FileMode) error {
	if err := WriteFileNoDirSync(root, name, data, perm); err != nil {
		return err
	}
	return SyncDir(root, path.Dir(name))
}

// WriteFileNoDirSync is WriteFile without the final directory fsync. Callers
// that write a batch into one directory use it and call SyncDir once: the
// batch is durable only after that SyncDir returns.
func WriteFileNoDirSync(root *os.Root, name string, data []byte, perm fs.FileMode) error {
	t, err := CreateTemp(root, name, data, perm)
	if err != nil {
		return err
	}
	return t.Rename()
}

// Temp is new content written and fsynced under a temporary name in the
// directory of the name it is meant for, and not yet in place. Rename or
// Swap puts it in place; Remove drops it. Either way the Temp is used up.
//
// CreateTemp, Rename and Swap are the steps of WriteFile and ReplaceIf taken
// apart, so that a caller with many files can write and fsync them
// concurrently and fsync each directory once: a file put in place is
// durable only once its directory has been synced (SyncDir).
type Temp struct {
	root *os.Root
	name string   // the name it is meant for
	tmp  string   // its temporary name, in the same directory
	f    *os.File // open until Sync, for a Temp from OpenTemp
	dir  *os.File // its directory, for one from OpenTempIn (the Dirs's)
	size int64
	sum  [sha256.Size]byte // of the content, to tell another writer's appends from it
}

// CreateTemp creates a temporary file with O_EXCL next to name (relative
// to root), writes data, checks the length, fsyncs and closes it. On any
// error the temporary file is removed.
func CreateTemp(root *os.Root, name string, data []byte, perm fs.FileMode) (*Temp, error) {
	t, err := OpenTemp(root, name, data, perm)
	if err != nil {
		return nil, err
	}
	if err := t.Sync(); err != nil {
		return nil, err
	}
	return t, nil
}

// OpenTemp is CreateTemp without the fsync: the file stays open until
// Sync fsyncs and closes it. A caller with many files writes them all
// first and then syncs them concurrently, so that the file system can
// commit the fsyncs together. On any error the temporary file is removed.
func OpenTemp(root *os.Root, name string, data []byte, perm fs.FileMode) (_ *Temp, err error) {
	tmp, err := tempName(name)
	if err != nil {
		return nil, err
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noPoll, perm)
	if err != nil {
		return nil, fmt.Errorf("durable: create temp for %s: %w", name, err)
	}
	return fill(root, name, tmp, f, data)
}

// fill writes data to f, a new temporary file tmp for name, and returns
// it as a Temp; on error f is closed and removed.
func fill(root *os.Root, name, tmp string, f *os.File, data []byte) (_ *Temp, err error) {
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	n, err := f.Write(data)
	if err != nil {
		return nil, fmt.Errorf("durable: write %s: %w", name, err)
	}
	if n != len(data) {
		return nil, fmt.Errorf("durable: write %s: short write (%d of %d bytes)", name, n, len(data))
	}
	return &Temp{root: root, name: name, tmp: tmp, f: f, size: int64(len(data)), sum: sha256.Sum256(data)}, nil
}

// Sync fsyncs and closes a Temp that OpenTemp returned; for one from
// CreateTemp it does nothing. On error the temporary file is removed and
// the Temp is used up.
func (t *Temp) Sync() (err error) {
	if t.f == nil {
		return nil
	}
	f := t.f
	t.f = nil
	syncs.Add(1)
	if err = f.Sync(); err != nil {
		f.Close()
		t.root.Remove(t.tmp)
		return fmt.Errorf("durable: fsync %s: %w", t.name, err)
	}
	if err = f.Close(); err != nil {
		t.root.Remove(t.tmp)
		return fmt.Errorf("durable: close %s: %w", t.name, err)
	}
	return nil
}

// Rename puts the content in place under its name, replacing whatever is
// there. The directory is not synced.
func (t *Temp) Rename() error {
	if t.f != nil {
		t.Remove()
		return fmt.Errorf("durable: %s put in place before it was synced", t.name)
	}
	var err error
	if t.dir != nil {
		dfd := int(t.dir.Fd())
		err = unix.Renameat(dfd, path.Base(t.tmp), dfd, path.Base(t.name))
	} else {
		err = t.root.Rename(t.tmp, t.name)
	}
	if err != nil {
		t.root.Remove(t.tmp)
		return fmt.Errorf("durable: rename into %s: %w", t.name, err)
	}
	return nil
}

// Remove deletes the temporary file.
func (t *Temp) Remove() error {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	if err := t.root.Remove(t.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// noPoll opens a regular file or a directory without os putting it into
// non-blocking mode for the runtime's poller, which refuses such files
// anyway: four fcntl calls fewer per open. Their reads, writes and fsyncs
// ignore the flag.
const noPoll = unix.O_NONBLOCK

// openDir opens a directory (relative to root) to fsync it or to name
// entries in it.
func openDir(root *os.Root, dir string) (*os.File, error) {
	return root.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|noPoll, 0)
}

// SyncDir fsyncs a directory (relative to root) so that entries created or
// renamed in it survive power loss.
func SyncDir(root *os.Root, dir string) error {
	d, err := openDir(root, dir)
	if err != nil {
		return fmt.Errorf("durable: open dir %s: %w", dir, err)
	}
	defer d.Close()
	syncs.Add(1)
	if err := d.Sync(); err != nil {
		return fmt.Errorf("durable: fsync dir %s: %w", dir, err)
	}
	return nil
}

// RemoveTemps deletes temporary files a crashed writer left in dir (relative
// to root). A missing directory is not an error.
func RemoveTemps(root *os.Root, dir string) (int, error) {
	d, err := openDir(root, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, n := range names {
		if !strings.HasPrefix(n, TempPrefix) {
			continue
		}
		if err := root.Remove(path.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// IsTemp reports whether a base name is one of this package's temporaries.
func IsTemp(name string) bool { return strings.HasPrefix(name, TempPrefix) }

func tempName(name string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	base := path.Base(name)
	if len(base) > 200 {
		base = base[:200]
	}
	return path.Join(path.Dir(name), TempPrefix+hex.EncodeToString(b[:])+"."+base), nil
}

// MkdirAll creates dir (relative to root) and any missing parents, and
// fsyncs each parent after creating a child in it, so that a new directory
// survives power loss before anything written into it is relied on.
func MkdirAll(root *os.Root, dir string, perm fs.FileMode) error {
	if dir == "." || dir == "" {
		return nil
	}
	parts := strings.Split(path.Clean(dir), "/")
	for i := range parts {
		d := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("durable: %s is not a directory", d)
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := root.Mkdir(d, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("durable: mkdir %s: %w", d, err)
		}
		if err := SyncDir(root, path.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// MkdirAllPath is MkdirAll for an absolute path outside any root: the
// workspace, its .handoff directory, the spool. Existing parents are left
// alone; each directory it creates is made durable in its parent.
func MkdirAllPath(dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("durable: %s is not a directory", d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("durable: mkdir %s: %w", d, err)
		}
		p, err := os.Open(filepath.Dir(d))
		if err != nil {
			return err
		}
		syncs.Add(1)
		err = p.Sync()
		p.Close()
		if err != nil {
			return fmt.Errorf("durable: fsync dir %s: %w", filepath.Dir(d), err)
		}
	}
	return nil
}

// ErrConflict means ReplaceIf found the file changed since the caller read
// it; the file was left as it was (apart from late bytes, see ReplaceIf).
var ErrConflict = errors.New("file changed by someone else")

// ReplaceIf durably replaces name with data, but only if what it replaces
// passes ok: a compare-and-swap against other writers. The new content is
// written and fsynced under a temporary name, then exchanged with the
// current file in one atomic step (renameat2's RENAME_EXCHANGE on Linux,
// renameatx_np's RENAME_SWAP on macOS), so the content that is checked is
// exactly the content taken out. If ok refuses it, it is exchanged back
// and ErrConflict returned. A missing file counts as absent (existed
// false) and is created only if nothing appears in the meantime. Where
// the file system cannot exchange, the content is checked, then renamed
// over, and a change in the instant between is not detected.
//
// A writer that opened the file before the exchange may still append to the
// replaced file after the check. ReplaceIf keeps the replaced file open
// until the directory is synced and returns what was appended to it in the
// meantime as late; the caller decides where those bytes go. (A writer that
// holds its descriptor longer than that cannot be protected by any
// replace-by-rename.)
func ReplaceIf(root *os.Root, name string, data []byte, perm fs.FileMode, ok func(old []byte, existed bool) bool) (late []byte, err error) {
	t, err := CreateTemp(root, name, data, perm)
	if err != nil {
		return nil, err
	}
	s, late, err := t.Swap(ok)
	if err != nil {
		return late, err
	}
	defer s.Close()
	if err := s.Remove(); err != nil {
		return nil, err
	}
	if err := SyncDir(root, path.Dir(name)); err != nil {
		return nil, err
	}
	return s.Late()
}

// Swap is the compare-and-swap of ReplaceIf with the content already
// written: it puts t in place only if what it replaces passes ok, else
// returns ErrConflict (with, as late, whatever another writer appended to
// t's content in the instant it stood at the name). The directory is not
// synced: the replacement is durable once the caller's SyncDir returns,
// and only then should it call Late on the result, which reads what
// reached the replaced file after the check and closes it. The replaced
// file stays under t's temporary name until Remove.
func (t *Temp) Swap(ok func(old []byte, existed bool) bool) (_ *Swapped, late []byte, err error) {
	if t.f != nil {
		t.Remove()
		return nil, nil, fmt.Errorf("durable: %s put in place before it was synced", t.name)
	}
	root, name, tmp := t.root, t.name, t.tmp
	dir, base := path.Dir(name), path.Base(name)
	defer func() {
		if err != nil {
			root.Remove(tmp)
		}
	}()
	d := t.dir
	if d == nil {
		if d, err = openDir(root, dir); err != nil {
			return nil, nil, fmt.Errorf("durable: open dir %s: %w", dir, err)
		}
		defer d.Close()
	}
	dfd := int(d.Fd())
	tbase := path.Base(tmp)

	// The name is looked up in the directory just opened, as the renames
	// below name it, not resolved from root again.
	var st unix.Stat_t
	if lerr := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(lerr, unix.ENOENT) {
		if !ok(nil, false) {
			return nil, nil, ErrConflict
		}
		err = RenameNoReplace(dfd, tbase, dfd, base)
		if errors.Is(err, unix.EEXIST) {
			return nil, nil, ErrConflict // created by someone else just now
		}
		if err != nil {
			return nil, nil, fmt.Errorf("durable: rename into %s: %w", name, err)
		}
		return &Swapped{}, nil, nil
	}
	err = exchange(dfd, tbase, base)
	if cannotRename(err) {
		// The file system cannot exchange: check, then rename. A change
		// in the instant between them is not detected.
		old, rerr := ReadRegular(root, name, 0)
		if rerr != nil || !ok(old, true) {
			return nil, nil, ErrConflict
		}
		if err = root.Rename(tmp, name); err != nil {
			return nil, nil, fmt.Errorf("durable: rename into %s: %w", name, err)
		}
		return &Swapped{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("durable: exchange %s: %w", name, err)
	}
	// tmp now names what name held a moment ago.
	oldf, rerr := openRegular(root, tmp)
	var old []byte
	if rerr == nil {
		old, rerr = io.ReadAll(oldf)
	}
	if rerr != nil || !ok(old, true) {
		if oldf != nil {
			oldf.Close()
		}
		if xerr := exchange(dfd, tbase, base); xerr != nil {
			return nil, nil, fmt.Errorf("durable: restore %s after a conflict: %w", name, xerr)
		}
		// For a moment name was our new file: whatever another writer
		// appended to it then is returned as late, with ErrConflict, once
		// that writer has closed it.
		mine, _ := readClosed(root, tmp, time.Now().Add(WritersWait))
		if int64(len(mine)) > t.size && sha256.Sum256(mine[:t.size]) == t.sum {
			return nil, mine[t.size:], ErrConflict
		}
		return nil, nil, ErrConflict
	}
	return &Swapped{root: root, name: name, tmp: tmp, old: oldf, size: int64(len(old)), at: time.Now()}, nil, nil
}

// Swapped is a replacement Swap made. Once the directory has been synced
// the caller reads Late (or calls Close), and removes the replaced file
// with Remove, now or later: it has a temporary name, so a crash leaves
// it to RemoveTemps.
type Swapped struct {
	root      *os.Root
	name, tmp string   // what was replaced, and the name the replaced file has now ("" once removed, or when nothing was replaced)
	old       *os.File // the replaced file, kept open for Late
	size      int64    // of the replaced file when it was checked
	at        time.Time
	stillOpen bool
}

// Size is the size of the replaced file when Swap checked it.
func (s *Swapped) Size() int64 { return s.size }

// Replaced reports whether a replaced file is still there to Remove.
func (s *Swapped) Replaced() bool { return s.tmp != "" }

// Remove deletes the replaced file.
func (s *Swapped) Remove() error {
	if s.tmp == "" {
		return nil
	}
	if err := s.root.Remove(s.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("durable: remove replaced %s: %w", s.name, err)
	}
	s.tmp = ""
	return nil
}

// Late returns what another writer appended to the replaced file since Swap
// checked it, and closes it. A writer that opened the file before the swap
// may not have written yet, so Late first waits for every writer to close
// it, up to WritersWait after the swap; if one still has it open then,
// Late reads what there is and WriterOpen reports it.
func (s *Swapped) Late() ([]byte, error) {
	if s.old == nil {
		return nil, nil
	}
	defer s.Close()
	if errors.Is(awaitWriters(s.old, s.at.Add(WritersWait)), errWritersOpen) {
		s.stillOpen = true
	}
	late, err := io.ReadAll(s.old)
	if err != nil {
		return nil, fmt.Errorf("durable: read replaced %s: %w", s.name, err)
	}
	return late, nil
}

// WriterOpen reports whether Late gave up waiting for another writer to
// close the replaced file: what that writer writes from then on is lost.
func (s *Swapped) WriterOpen() bool { return s.stillOpen }

// Close releases the replaced file without reading it.
func (s *Swapped) Close() {
	if s.old != nil {
		s.old.Close()
		s.old = nil
	}
}

// ErrTooLarge is ReadRegular's error for a file over its limit.
var ErrTooLarge = errors.New("file larger than the limit")

// ReadRegular reads a regular file without following a symlink (a final
// symlink is ErrSymlink, even one inside root) and without blocking on a
// FIFO. With limit > 0, a file holding more than
// limit bytes is ErrTooLarge, and no more than limit+1 bytes are read.
func ReadRegular(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := openRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if limit <= 0 {
		return io.ReadAll(f)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w of %d bytes", name, ErrTooLarge, limit)
	}
	return data, err
}

// openRegular opens a regular file for reading without following a
// symlink and without blocking on a FIFO. os.Root.OpenFile follows a
// final symlink that stays inside the root even with O_NOFOLLOW, so the
// last component is opened here with openat(2) and O_NOFOLLOW in its
// directory (opened through root): a name that an Lstat saw as a regular
// file and that was swapped for a symlink since is refused (ELOOP), never
// read through.
func openRegular(root *os.Root, name string) (*os.File, error) {
	if !fs.ValidPath(name) || name == "." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	dir, base := path.Split(name)
	if dir == "" {
		dir = "."
	}
	d, err := openDir(root, dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	fd, err := unix.Openat(int(d.Fd()), base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrSymlink}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", name)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ErrSymlink is the error of a read that found a symlink where a regular
// file should be: it is never followed.
var ErrSymlink = errors.New("a symlink, never followed")
