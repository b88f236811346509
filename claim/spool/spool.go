// Package spool is the store step's interface (Store: exact bytes by
// SHA-256) and the directory format versions before the ledger's store
// wrote: one file a content, <dir>/<sha256>.md. A run reads such a
// directory (OpenReadOnly) beneath the ledger's store (ledger.Store) and
// never writes it; Dir keeps the whole format, writes included, for the
// tests that set up a workspace as those versions left it.
//
// Guarantees of a Dir: when Put returns nil every content of the batch
// is durable, its file and its directory entry fsynced; a content is
// never rewritten once stored; Has, Get and Put answer only from entries
// that are durable (a writable Dir fsyncs its directory once, before the
// first of them); Get returns only bytes that still hash to their name
// (ErrCorrupt otherwise); a crash leaves at most temporary files, which
// RemoveTemps deletes.
package spool

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/handoff-sync/handoff/internal/durable"
)

// Spool holds the exact bytes of every stored handoff, addressed by their
// SHA-256.
type Store interface {
	// Has reports whether the content is stored.
	Has(sha string) (bool, error)
	// Get returns stored content after checking it still hashes to sha.
	Get(sha string) ([]byte, error)
	// Put stores a batch of contents keyed by their SHA-256. When it returns
	// nil every one of them is durable, directory entries included.
	Put(batch map[string][]byte) error
}

// ErrCorrupt means a spool file no longer hashes to its name.
var ErrCorrupt = errors.New("spool file does not match its hash")

// Dir is the on-disk spool: <dir>/<sha256>.md, one file per content.
type Dir struct {
	root     *os.Root
	readOnly bool // OpenReadOnly: never synced, never written

	synced  sync.Once
	syncErr error
}

var _ Store = (*Dir)(nil)

// Open opens (creating if needed) the spool directory. Several
// processes may have the same spool open: a run's pull workers store into
// it at the same time.
func Open(dir string) (*Dir, error) {
	if err := durable.MkdirAllPath(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return &Dir{root: root}, nil
}

// ready fsyncs the directory the first time it is called. A run killed
// between renaming a spool file into place and syncing the directory
// leaves an entry that a later Put would find and trust, so every entry
// present must be durable before anything relies on it. Doing it here and
// not in Open keeps it off a run that never looks: an idle tick's workers
// and run open the spool and store nothing, and one fsync of the
// directory commits the file system's whole journal (92 ms in one bench
// run, before any worker could start).
func (s *Dir) ready() error {
	if s.readOnly {
		return nil
	}
	s.synced.Do(func() {
		if err := durable.SyncDir(s.root, "."); err != nil {
			s.syncErr = fmt.Errorf("spool: %w", err)
		}
	})
	return s.syncErr
}

// OpenReadOnly opens an existing spool without creating or cleaning
// anything; it returns nil, nil when the directory does not exist.
func OpenReadOnly(dir string) (*Dir, error) {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return &Dir{root: root, readOnly: true}, nil
}

// RemoveTemps deletes temporary files a crashed writer left behind. Only
// the run holding the workspace lock may call it, and only before it starts
// any pull: a live writer's temporary file looks the same.
func (s *Dir) RemoveTemps() (int, error) {
	n, err := durable.RemoveTemps(s.root, ".")
	if err != nil {
		return n, fmt.Errorf("spool: remove temporary files: %w", err)
	}
	return n, nil
}

// Close releases the directory handle.
func (s *Dir) Close() error { return s.root.Close() }

// Name is the file name of a content in the spool.
func Name(sha string) string { return sha + ".md" }

func (s *Dir) Has(sha string) (bool, error) {
	if err := s.ready(); err != nil {
		return false, err
	}
	fi, err := s.root.Lstat(Name(sha))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("spool: %s is not a regular file", Name(sha))
	}
	return true, nil
}

func (s *Dir) Get(sha string) ([]byte, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	data, err := s.root.ReadFile(Name(sha))
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	if Hash(data) != sha {
		return nil, fmt.Errorf("spool: %s: %w", Name(sha), ErrCorrupt)
	}
	return data, nil
}

// Put writes and fsyncs every new content of the batch under a temporary
// name, many at once (durable.Writer: the file system commits concurrent
// fsyncs together, so one batch costs about what one file did), then
// renames them into place and fsyncs the directory once. A crash before
// that last fsync leaves whole files, which a later Put trusts only after
// ready has synced the directory, and temporary files, which the next run
// removes.
func (s *Dir) Put(batch map[string][]byte) (err error) {
	fresh := make([]string, 0, len(batch))
	for sha := range batch {
		ok, err := s.Has(sha)
		if err != nil {
			return err
		}
		if !ok {
			fresh = append(fresh, sha)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	slices.Sort(fresh)
	w := durable.NewWriter(s.root, spoolSyncs)
	pending := make([]*durable.Pending, len(fresh))
	for i, sha := range fresh {
		pending[i] = w.Write(Name(sha), batch[sha], 0o600)
	}
	w.Close()
	temps := make([]*durable.Temp, 0, len(fresh))
	defer func() {
		if err != nil {
			for _, t := range temps {
				t.Remove()
			}
		}
	}()
	var werr error
	for _, p := range pending {
		t, err := p.Wait()
		if err != nil {
			werr = cmp.Or(werr, err)
			continue
		}
		temps = append(temps, t)
	}
	if werr != nil {
		return fmt.Errorf("spool: %w", werr)
	}
	for i, t := range temps {
		if err := t.Rename(); err != nil {
			temps = temps[i+1:]
			return fmt.Errorf("spool: %w", err)
		}
	}
	temps = nil
	if err := durable.SyncDir(s.root, "."); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

// spoolSyncs is how many spool files Put writes and fsyncs at once.
const spoolSyncs = 32

// Hash is the lower-case hex SHA-256 of data.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
