package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
)

// loadWiring loads the manifest and resolves the workspace (--workspace
// over the manifest's): how every command that works on a workspace
// starts.
func loadWiring(path, dir string) (*manifest.Manifest, string, error) {
	m, err := loadManifest(path)
	if err != nil {
		return nil, "", err
	}
	ws, err := setup.Workspace(m, dir)
	if err != nil {
		return nil, "", err
	}
	return m, ws, nil
}

// loadManifest loads the manifest at path, or the default one.
func loadManifest(path string) (*manifest.Manifest, error) {
	if path == "" {
		path = manifest.DefaultPath()
	}
	m, err := manifest.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("no manifest at %s", path),
			hint: "write one (see README.md, \"The writers manifest\") or pass --manifest FILE"}
	}
	if err != nil {
		return nil, manifestError(err)
	}
	return m, nil
}

// manifestError turns validation errors into one message per problem, each
// followed by its hint.
func manifestError(err error) error {
	fes := manifest.FieldErrors(err)
	if len(fes) == 0 {
		return &exitError{code: exitUsage, err: err, hint: "fix the manifest and check it with `handoff manifest check`"}
	}
	msg := ""
	for i, fe := range fes {
		if i > 0 {
			msg += "\nhandoff: "
		}
		msg += fe.Error()
		if fe.Hint != "" {
			msg += "\nhint: " + fe.Hint
		}
	}
	return &exitError{code: exitUsage, err: errors.New(msg)}
}
