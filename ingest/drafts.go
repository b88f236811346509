package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/layout"
)

// moveLegacyDrafts moves the review drafts an earlier version left in
// layout.LegacyReviewDir, inside OpenClaw's memory, to layout.ReviewDir.
// It moves only the files the ledger names as drafts (migration 11 gave
// them their new names); anything else there is a person's and is left
// alone (doctor names it). Each draft is renamed without replacing
// anything, so a crash leaves it under one of its two names, never
// neither, and the next ingester finishes the move: a draft already at
// its new name with the same bytes loses its old copy. The emptied old
// directory is removed. It returns how many drafts it moved.
func (in *Ingester) moveLegacyDrafts(ctx context.Context) (int, error) {
	if in.opts.DryRun {
		return 0, nil
	}
	root := in.ws.root
	old, err := openDirNoFollow(root, layout.LegacyReviewDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		in.log.Warn("review drafts of an earlier version left in place", "dir", layout.LegacyReviewDir, "err", err)
		return 0, nil
	}
	defer old.Close()
	ents, err := old.ReadDir(-1)
	if err != nil {
		return 0, fmt.Errorf("ingest: list %s: %w", layout.LegacyReviewDir, err)
	}
	known, err := in.led.DraftNames(ctx, layout.ReviewDir)
	if err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	var dst *os.File
	moved := 0
	for _, e := range ents {
		name := e.Name()
		if !known[name] || !e.Type().IsRegular() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return moved, err
		}
		if dst == nil {
			if err := in.ws.markWriting(); err != nil {
				return moved, err
			}
			if err := in.ws.mkdirs(layout.ReviewDir); err != nil {
				return moved, fmt.Errorf("ingest: %s: %w", layout.ReviewDir, err)
			}
			if dst, err = openDirNoFollow(root, layout.ReviewDir); err != nil {
				return moved, fmt.Errorf("ingest: %s: %w", layout.ReviewDir, err)
			}
			defer dst.Close()
		}
		err := durable.RenameNoReplace(int(old.Fd()), name, int(dst.Fd()), name)
		if errors.Is(err, unix.EEXIST) {
			err = in.dropMovedCopy(name)
		}
		if err != nil {
			return moved, fmt.Errorf("ingest: move review draft %s to %s: %w", name, layout.ReviewDir, err)
		}
		moved++
		failpoint.Inject("drafts.moved")
	}
	if dst != nil {
		if err := durable.SyncDir(root, layout.ReviewDir); err != nil {
			return moved, err
		}
		if err := durable.SyncDir(root, layout.LegacyReviewDir); err != nil {
			return moved, err
		}
	}
	// The old directory goes once nothing is left in it; a person's file
	// keeps it.
	if err := root.Remove(layout.LegacyReviewDir); err == nil {
		if err := durable.SyncDir(root, path.Dir(layout.LegacyReviewDir)); err != nil {
			return moved, err
		}
	}
	if moved > 0 {
		in.log.Info("moved review drafts out of OpenClaw's memory", "from", layout.LegacyReviewDir, "to", layout.ReviewDir, "drafts", moved)
	}
	in.movedDrafts += moved
	return moved, nil
}

// dropMovedCopy removes the old copy of a draft whose new name already
// holds the same bytes. A new name with other bytes leaves both in place:
// the draft is moved when a person has resolved which is which.
func (in *Ingester) dropMovedCopy(name string) error {
	oldName := layout.LegacyReviewDir + "/" + name
	a, _, err := in.ws.read(oldName)
	if err != nil {
		return err
	}
	b, exists, err := in.ws.read(layout.ReviewDir + "/" + name)
	if err != nil {
		return err
	}
	if !exists || !bytes.Equal(a, b) {
		return fmt.Errorf("%s already holds other bytes; compare the two and remove one", layout.ReviewDir+"/"+name)
	}
	return in.ws.root.Remove(oldName)
}

// MovedDrafts is how many review drafts of an earlier version this
// ingester moved out of OpenClaw's memory (moveLegacyDrafts).
func (in *Ingester) MovedDrafts() int { return in.movedDrafts }

// openDirNoFollow opens the directory name in root for reading, refusing a
// symlink: os.Root follows a final symlink that stays inside the root
// even with O_NOFOLLOW, so the open handle is checked against an Lstat.
func openDirNoFollow(root *os.Root, name string) (*os.File, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (a symlink?); handoff never moves files through one", name)
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|nofollowNonblock, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !os.SameFile(fi, st) {
		f.Close()
		return nil, fmt.Errorf("%s changed while it was opened", name)
	}
	return f, nil
}
