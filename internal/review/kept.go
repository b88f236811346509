package review

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/handoff-sync/handoff/claim"
)

// keptPrefix starts the name of the private directory (in $TMPDIR) that
// holds the copy a person edits; a failed edit leaves it, with its text.
const keptPrefix = "handoff-edit-"

// Kept is the text a failed `handoff review edit` of item ID kept: Path,
// saved at Saved.
type Kept struct {
	ID    string
	Path  string
	Saved time.Time
}

// NoKeptError is a resume asked for an item no failed edit kept a text of.
type NoKeptError struct {
	Item Item
	Dir  string // where kept texts are looked for
}

func (e *NoKeptError) Error() string {
	return fmt.Sprintf("no edit of %s is kept in %s to resume", e.Item.ID, e.Dir)
}

// FindKept returns the newest text a failed edit of it kept, if any: the
// file named as the edit names its copy (<stem>.<sha12>.md) in a
// handoff-edit-* directory of $TMPDIR. Only a directory of this user's,
// open to no one else (as os.MkdirTemp makes it), and a regular file of
// this user's in it count: $TMPDIR is shared, and what another user put
// there is never taken for the person's text.
func FindKept(it Item) (Kept, bool) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), keptPrefix+"*"))
	name := claim.ArchiveName(it.Name, it.SHA256)
	var best Kept
	for _, d := range dirs {
		if !ownPrivate(d, true) {
			continue
		}
		p := filepath.Join(d, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || !ownPrivate(p, false) {
			continue
		}
		if best.Path == "" || fi.ModTime().After(best.Saved) {
			best = Kept{ID: it.ID, Path: p, Saved: fi.ModTime()}
		}
	}
	return best, best.Path != ""
}

// ownPrivate reports whether p (not a symlink) belongs to this user and,
// for a directory, is open to no one else.
func ownPrivate(p string, dir bool) bool {
	fi, err := os.Lstat(p)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Getuid() {
		return false
	}
	if dir {
		return fi.IsDir() && fi.Mode().Perm()&0o077 == 0
	}
	return true
}

// readKept reads a kept text, not following a symlink, bounded.
func readKept(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDraft+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDraft {
		return nil, fmt.Errorf("%s: over %d bytes", p, maxDraft)
	}
	return data, nil
}

// removeKept removes the directory of a kept text, once its text is
// applied or kept anew; only a handoff-edit-* directory of this user's.
func removeKept(p string) error {
	d := filepath.Dir(p)
	if !strings.HasPrefix(filepath.Base(d), keptPrefix) || !ownPrivate(d, true) {
		return errors.New("not a kept edit's directory: " + d)
	}
	return os.RemoveAll(d)
}
