package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
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
		if w := writerHost(); w != nil && w.info.Canonical == mirror.CanonicalName() {
			// The canonical host mirrors to itself: its manifest is elsewhere.
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("no manifest at %s", path),
				hint: fmt.Sprintf("this host is the canonical host %s (its mirror at %s says so): pass --manifest FILE with its manifest", w.info.Canonical, w.mirror)}
		} else if w != nil {
			// An agent told to write a manifest here would start a second
			// canonical host: say where syncs run instead.
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("no manifest at %s: this is a writer host %s; syncs run there", path, w.of()),
				hint: "run `handoff doctor` here to check this host's side (its mirror, hooks and inbox); pass --manifest FILE only on the canonical host"}
		}
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

// writer is what a writer host's mirror says about the host.
type writer struct {
	mirror string
	info   mirror.Info
}

// of names the canonical host this host writes for, as MIRROR.json does.
func (w *writer) of() string {
	switch {
	case w.info.Canonical != "":
		return "of canonical host " + w.info.Canonical
	case w.info.Host != "":
		return fmt.Sprintf("(%q in its canonical host's manifest, as %s says; it names no canonical host)", w.info.Host, filepath.Join(w.mirror, mirror.InfoFile))
	}
	return "(its " + filepath.Join(w.mirror, mirror.InfoFile) + " names no canonical host)"
}

// writerHost returns this host's writer side when it has a mirror at the
// default place (a host with a mirror and no manifest is a writer host);
// nil when it has none.
func writerHost() *writer { return writerAt("") }

func writerAt(dir string) *writer {
	m, err := resolveMirror(dir)
	if err != nil {
		return nil
	}
	f, err := os.Open(filepath.Join(m, mirror.InfoFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	w := &writer{mirror: m}
	if json.NewDecoder(io.LimitReader(f, 64<<10)).Decode(&w.info) != nil {
		return nil
	}
	return w
}
