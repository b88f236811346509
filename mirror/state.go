package mirror

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/handoff-sync/handoff/internal/durable"
)

// Stamp is what the host listed for a file just after the publisher
// wrote it: the quick check compares the next listing against it.
type Stamp struct {
	SHA256  string    `json:"sha256"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
}

// State is what the last publish left on one host's mirror. It lives on
// the canonical host, in .handoff/mirrors/<host>.json.
type State struct {
	Host        string           `json:"host"`
	Dir         string           `json:"dir"`
	Generation  int64            `json:"generation"`
	RunID       string           `json:"run_id"`
	PublishedAt time.Time        `json:"published_at"`
	Files       map[string]Stamp `json:"files"`
}

// LoadState reads a host's state; a missing file is an empty state.
func LoadState(file string) (*State, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Files: map[string]Stamp{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: read state: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("mirror: state %s is damaged (%v); remove it and the next run sends the whole mirror again", file, err)
	}
	if s.Files == nil {
		s.Files = map[string]Stamp{}
	}
	return &s, nil
}

// Save writes the state durably (a temporary file, fsync, rename).
func (s *State) Save(file string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := durable.MkdirAllPath(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("mirror: save state: %w", err)
	}
	root, err := os.OpenRoot(filepath.Dir(file))
	if err != nil {
		return fmt.Errorf("mirror: save state: %w", err)
	}
	defer root.Close()
	if err := durable.WriteFile(root, filepath.Base(file), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("mirror: save state: %w", err)
	}
	return nil
}

// StateFile is where host's state lives under a workspace's mirrors
// directory.
func StateFile(mirrorsDir, host string) string {
	return filepath.Join(mirrorsDir, host+".json")
}
