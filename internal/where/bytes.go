package where

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/internal/layout"
)

// ErrPruned means the ledger knows a content whose bytes are no longer
// stored: `handoff prune` removed them once its handoff was done with.
var ErrPruned = errors.New("its bytes were pruned")

// Bytes returns the exact bytes stored for sha, a full SHA-256, from the
// ledger's store or a spool directory an earlier version wrote, only
// when they still hash to sha (spool.ErrCorrupt otherwise). It writes
// nothing: the ledger is opened as Lookup opens it.
func Bytes(ctx context.Context, ws, sha string) ([]byte, error) {
	ws, err := filepath.Abs(ws)
	if err != nil {
		return nil, err
	}
	v, _, done, err := open(ws)
	if err != nil {
		return nil, err
	}
	defer done()
	legacy, err := spool.OpenReadOnly(filepath.Join(ws, layout.SpoolDir))
	if err != nil {
		return nil, err
	}
	if legacy != nil {
		defer legacy.Close()
	}
	st := v.Store(legacy)
	defer st.Close()
	data, err := st.Get(sha)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%.12s: %w", sha, ErrPruned)
	}
	return data, err
}
