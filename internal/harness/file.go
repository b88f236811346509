package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/diff"

	"github.com/handoff-sync/handoff/internal/durable"
)

// MaxFile bounds a hooks file handoff reads: settings files are small,
// and one this large is not one a person keeps.
const MaxFile = 4 << 20

// maxBackups bounds the backups kept in the state directory.
const maxBackups = 50

// ErrChanged means the file changed between handoff's read and its write;
// nothing was written.
var ErrChanged = errors.New("the file changed while handoff edited it; run the command again")

// Change is what an install or uninstall did, or would do, to one file.
type Change struct {
	Path    string `json:"path"`    // the file as named
	Target  string `json:"target"`  // where it was written (a symlink's target)
	Changed bool   `json:"changed"` // false: already as wanted
	Created bool   `json:"created"` // the file did not exist
	Removed bool   `json:"removed"` // the file was left empty and removed
	Backup  string `json:"backup,omitempty"`
	Diff    string `json:"diff,omitempty"`
	DryRun  bool   `json:"dry_run,omitempty"`
}

// ReadFile reads a hooks file (following a symlink to its target),
// bounded; a missing file is no error (existed false).
func ReadFile(name string) (data []byte, target string, existed bool, err error) {
	target = name
	if t, err := filepath.EvalSymlinks(name); err == nil {
		target = t
	}
	fi, err := os.Stat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, target, false, nil
	}
	if err != nil {
		return nil, target, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, target, false, fmt.Errorf("%s is not a regular file", target)
	}
	if fi.Size() > MaxFile {
		return nil, target, false, fmt.Errorf("%s is larger than %d MiB", target, MaxFile>>20)
	}
	data, err = os.ReadFile(target)
	return data, target, true, err
}

// Edit applies edit to the file at name: it reads the file, asks edit for
// the new content (remove: delete the file), and unless dryRun saves a
// backup of the old content in backups (a private directory) and
// replaces the file atomically, only if it still holds what was read.
// A new file gets perm; a replaced one keeps its mode.
func Edit(name, backups string, perm fs.FileMode, dryRun bool, edit func(old []byte, existed bool) (out []byte, changed, remove bool, err error)) (*Change, error) {
	old, target, existed, err := ReadFile(name)
	if err != nil {
		return nil, err
	}
	out, changed, remove, err := edit(old, existed)
	if err != nil {
		return nil, err
	}
	c := &Change{Path: name, Target: target, Changed: changed, Created: changed && !existed && !remove, Removed: changed && remove, DryRun: dryRun}
	if !changed {
		return c, nil
	}
	c.Diff = string(diff.Diff(target+" (before)", old, target+" (after)", out))
	if dryRun {
		return c, nil
	}
	dir := filepath.Dir(target)
	if existed {
		if c.Backup, err = backup(backups, target, old); err != nil {
			return c, err
		}
		if fi, err := os.Stat(target); err == nil {
			perm = fi.Mode().Perm()
		}
	} else if err := durable.MkdirAllPath(dir, 0o700); err != nil {
		return c, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return c, err
	}
	defer root.Close()
	base := filepath.Base(target)
	if remove {
		// Compare, then remove: a write in between is the harness's own
		// and is lost only if it lands in this instant.
		now, err := durable.ReadRegular(root, base, MaxFile+1)
		if err != nil || !bytes.Equal(now, old) {
			return c, ErrChanged
		}
		if err := root.Remove(base); err != nil {
			return c, err
		}
		return c, durable.SyncDir(root, ".")
	}
	_, err = durable.ReplaceIf(root, base, out, perm, func(now []byte, there bool) bool {
		return there == existed && bytes.Equal(now, old)
	})
	if errors.Is(err, durable.ErrConflict) {
		return c, ErrChanged
	}
	return c, err
}

// backup saves data, a file's prior content, in dir under a name that
// says which file and when, and keeps the newest maxBackups there.
func backup(dir, file string, data []byte) (string, error) {
	if err := durable.MkdirAllPath(dir, 0o700); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	defer root.Close()
	flat := strings.NewReplacer("/", "_", "\\", "_").Replace(strings.TrimPrefix(file, "/"))
	name := time.Now().UTC().Format("20060102T150405.000000000Z") + "-" + flat
	if len(name) > 200 {
		name = name[:200]
	}
	if err := durable.WriteFile(root, name, data, 0o600); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	if ents, err := os.ReadDir(dir); err == nil {
		var names []string
		for _, e := range ents {
			if e.Type().IsRegular() && !durable.IsTemp(e.Name()) {
				names = append(names, e.Name())
			}
		}
		slices.Sort(names)
		for len(names) > maxBackups {
			root.Remove(names[0])
			names = names[1:]
		}
	}
	return filepath.Join(dir, name), nil
}
