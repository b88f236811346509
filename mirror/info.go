package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/transport"
)

// ReadHostInfo reads the MIRROR.json of the mirror at dir on fsys, dir as
// the manifest gives it ("~" is the login's home), at most 64 KiB. A
// mirror without one (never published) is nil and no error. It writes
// nothing: doctor, init and import read whose a mirror is with it.
func ReadHostInfo(ctx context.Context, fsys transport.FS, dir string) (*Info, error) {
	if strings.HasPrefix(dir, "~") {
		home, err := fsys.Home(ctx)
		if err != nil {
			return nil, err
		}
		dir = manifest.ExpandHome(dir, home)
	}
	name := path.Join(dir, InfoFile)
	data, _, err := fsys.ReadFile(ctx, name, maxInfo)
	if errors.Is(err, transport.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &info, nil
}
