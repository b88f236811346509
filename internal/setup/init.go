package setup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/workspace"
)

// Init makes dir (absolute) a workspace, and reports whether it did: a
// directory that does not exist is made (0700, with its missing parents),
// one that exists is adopted as it is, gaining only .handoff/; either way
// it gets a new identity, recorded in the ledger and in the identity file
// (see workspace.Establish). A workspace an earlier handoff made gets its
// identity as its first run would give it. A workspace that has an
// identity is left exactly as it is: made is false and nothing is written.
// It takes the workspace lock while it writes (ErrLocked when a run holds
// it).
func Init(ctx context.Context, dir string, now time.Time) (id workspace.Identity, made bool, err error) {
	if id, err := workspace.Read(dir); err == nil || !errors.Is(err, workspace.ErrNoIdentity) {
		return id, false, err
	}
	// A workspace inside another one would be a second memory in the
	// first one's tree (a typo such as ~/ws/ws): refused.
	for d := filepath.Dir(dir); d != filepath.Dir(d); d = filepath.Dir(d) {
		if workspace.Has(d) {
			return workspace.Identity{}, false, &workspace.Error{Path: dir, Err: fmt.Errorf("it is inside the workspace %s", workspace.Tilde(d)),
				Fix: fmt.Sprintf("a workspace holds one memory: use %s itself (handoff init --workspace %s says so), or a directory outside it", workspace.Tilde(d), workspace.Tilde(d))}
		}
	}
	origin := workspace.OriginAdopted
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		origin = workspace.OriginNew
		if err := durable.MkdirAllPath(dir, 0o700); err != nil {
			return workspace.Identity{}, false, fmt.Errorf("workspace %s: %w", dir, err)
		}
	case err != nil:
		return workspace.Identity{}, false, fmt.Errorf("workspace %s: %w", dir, err)
	case !fi.IsDir():
		_, _, err := workspace.Check(dir) // not a directory
		return workspace.Identity{}, false, err
	case workspace.Has(dir):
		origin = workspace.OriginUpgraded
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return workspace.Identity{}, false, fmt.Errorf("workspace %s: %w", dir, err)
	}
	err = durable.MkdirAll(root, layout.StateDir, 0o700)
	root.Close()
	if err != nil {
		return workspace.Identity{}, false, fmt.Errorf("workspace %s: %w", dir, err)
	}
	unlock, err := lock(dir, false, "init")
	if err != nil {
		return workspace.Identity{}, false, err
	}
	defer unlock()
	return workspace.Establish(ctx, dir, origin, now)
}
