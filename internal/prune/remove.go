package prune

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/handoff-sync/handoff/internal/durable"
)

// removeRegular removes from dir the regular files among names (none in a
// dry run), passing over a name that is gone or is not a regular file,
// and syncs dir once after. It returns the names it removed (or would)
// and their bytes; what names the store in error messages.
func removeRegular(ctx context.Context, dir string, names []string, dryRun bool, what string) ([]string, int64, error) {
	removed := []string{}
	var size int64
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return removed, 0, nil
	}
	if err != nil {
		return removed, 0, fmt.Errorf("%s: %w", what, err)
	}
	defer root.Close()
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return removed, size, err
		}
		fi, err := root.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned before, or never written
		}
		if err != nil {
			return removed, size, fmt.Errorf("%s: %w", what, err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if !dryRun {
			if err := root.Remove(name); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return removed, size, fmt.Errorf("%s: %w", what, err)
			}
		}
		removed = append(removed, name)
		size += fi.Size()
	}
	if len(removed) > 0 && !dryRun {
		if err := durable.SyncDir(root, "."); err != nil {
			return removed, size, fmt.Errorf("%s: %w", what, err)
		}
	}
	return removed, size, nil
}
