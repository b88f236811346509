package doctor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sync"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/transport"
)

// probePrefix starts the name of the directory probeArchive makes. It is a
// dot-name, so no pull ever takes it for a handoff, and it is not an
// archive name.
const probePrefix = ".handoff-doctor-probe-"

// probeArchive finds out whether the account may archive in an inbox: make
// an entry in it (as the first archive makes processed/) and remove one (as
// every rename out of it does), and the same in its processed/ and
// malformed/ where they exist (a rename adds an entry there). Each probe is
// an empty directory with a new random name, removed at once; permission
// bits alone cannot answer this over SFTP (see docs/design.md).
func probeArchive(ctx context.Context, fsys transport.FS, inbox string) error {
	dirs := []string{inbox, path.Join(inbox, claim.ProcessedDir), path.Join(inbox, claim.MalformedDir)}
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = probeDir(ctx, fsys, d, i == 0)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the inbox's first: where it fails, so do the others
		}
	}
	return nil
}

// probeDir makes and removes one probe directory in dir. A dir that does
// not exist passes unless must is set (the inbox itself).
func probeDir(ctx context.Context, fsys transport.FS, dir string, must bool) error {
	var b [8]byte
	rand.Read(b[:])
	name := path.Join(dir, probePrefix+hex.EncodeToString(b[:]))
	if err := fsys.Mkdir(ctx, name); err != nil {
		if !must && errors.Is(err, transport.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("cannot create an entry in %s: %w", displayName(dir), err)
	}
	if err := fsys.Remove(context.WithoutCancel(ctx), name); err != nil {
		return fmt.Errorf("created the probe %s but cannot remove it (remove it by hand): %w", displayName(name), err)
	}
	return nil
}
