package harness

import (
	"errors"
	"os"
	"path/filepath"
)

// StateDir is handoff's private per-user state directory on this host:
// $XDG_STATE_HOME/handoff, or ~/.local/state/handoff when XDG_STATE_HOME
// is unset or not absolute. The hooks keep their log and session records
// there, and install its backups.
func StateDir() (string, error) {
	if dir := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "handoff"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(home) {
		return "", errors.New("the home directory is not an absolute path")
	}
	return filepath.Join(home, ".local", "state", "handoff"), nil
}

// BackupsDir is where install and uninstall keep the prior content of
// the files they change.
func BackupsDir(state string) string { return filepath.Join(state, "backups") }
