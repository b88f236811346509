package handoff

import (
	"context"
	"path/filepath"
	"time"

	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
)

// Identity is a workspace's identity: a random id and when it was given
// (see Init). Receipts carry it as workspace_id.
type Identity = workspace.Identity

// NoWorkspaceError is a directory that is no workspace: it has no
// identity. Sync and every other command that writes a workspace refuse
// it and create nothing; its Near names the workspaces close to it (a
// typo's likely target), its Hint what to do.
type NoWorkspaceError = workspace.MissingError

// WorkspaceError is a workspace whose identity cannot be trusted (an
// unreadable identity file, or a ledger that belongs to another
// workspace); nothing was changed.
type WorkspaceError = workspace.Error

// Init makes dir a workspace and reports whether it did: a new directory,
// or an existing one adopted as it is (it gains only .handoff/), gets an
// identity recorded durably in .handoff/workspace.json and in the ledger.
// A workspace that has an identity is left as it is (made false). A
// workspace an earlier handoff made gets the identity its first run
// would give it.
func Init(ctx context.Context, dir string) (id Identity, made bool, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return Identity{}, false, err
	}
	return setup.Init(ctx, dir, time.Now())
}
