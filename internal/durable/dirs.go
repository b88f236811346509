package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"

	"golang.org/x/sys/unix"
)

// Dirs keeps the directories of a batch of new files open under a root,
// each opened through the root once. A file of the batch is then created,
// put in place (Swap, Rename) and its directory fsynced (Sync) by name in
// its directory's handle, where each of those steps otherwise walked the
// root's path to the directory again: an open and a close a level, three
// times a file.
//
// A directory is resolved once, when it is first used: the batch's files
// all go into the directory that was at the name then, which the root
// proved inside it. Close the Dirs once the batch is done with it.
type Dirs struct {
	root *os.Root
	mu   sync.Mutex
	open map[string]*os.File
	err  error // set once closed
}

var errDirsClosed = errors.New("durable: directories closed")

// NewDirs returns a Dirs under root.
func NewDirs(root *os.Root) *Dirs {
	return &Dirs{root: root, open: map[string]*os.File{}}
}

// dir returns dir (relative to the root) open.
func (d *Dirs) dir(dir string) (*os.File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return nil, d.err
	}
	if f, ok := d.open[dir]; ok {
		return f, nil
	}
	f, err := openDir(d.root, dir)
	if err != nil {
		return nil, fmt.Errorf("durable: open dir %s: %w", dir, err)
	}
	d.open[dir] = f
	return f, nil
}

// Close closes the directories. Temps created in them must be used up
// first.
func (d *Dirs) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.open {
		f.Close()
	}
	d.open, d.err = nil, errDirsClosed
}

// Sync fsyncs each of dirs once, at most n at once, in the handles the
// batch's files were put in place through, and returns every failure.
func (d *Dirs) Sync(dirs []string, n int) error {
	return eachDir(dirs, n, func(dir string) error {
		f, err := d.dir(dir)
		if err != nil {
			return err
		}
		syncs.Add(1)
		if err := f.Sync(); err != nil {
			return fmt.Errorf("durable: fsync dir %s: %w", dir, err)
		}
		return nil
	})
}

// OpenTempIn is OpenTemp with the temporary file created in its
// directory's handle in d; the Temp's Swap and Rename use that handle too.
func OpenTempIn(d *Dirs, name string, data []byte, perm fs.FileMode) (_ *Temp, err error) {
	tmp, err := tempName(name)
	if err != nil {
		return nil, err
	}
	dir, err := d.dir(path.Dir(name))
	if err != nil {
		return nil, err
	}
	// The base name holds no slash and O_NOFOLLOW with O_EXCL never
	// follows a link: the file is created in dir itself.
	fd, err := unix.Openat(int(dir.Fd()), path.Base(tmp), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC|noPoll, uint32(perm.Perm()))
	if err != nil {
		return nil, fmt.Errorf("durable: create temp for %s: %w", name, &fs.PathError{Op: "openat", Path: tmp, Err: err})
	}
	f := os.NewFile(uintptr(fd), tmp)
	t, err := fill(d.root, name, tmp, f, data)
	if err != nil {
		return nil, err
	}
	t.dir = dir
	return t, nil
}
