package claim

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/handoff-sync/handoff/internal/durable"
)

// WalkHint is one host's record of what its last discovery asked and
// which git indexes it read (Config.Hint), as a file under the
// workspace's walks directory: loaded before the pull, saved after it
// when it changed.
type WalkHint struct {
	Hint Hint   // what the file held; empty for none
	file string // "" for none
	save bool   // false in a dry run
	data []byte // as loaded
}

// WalkHintPath is host's walk hint file in walksDir ("" for none when
// walksDir is "").
func WalkHintPath(walksDir, host string) string {
	if walksDir == "" {
		return ""
	}
	return filepath.Join(walksDir, host+".json")
}

// LoadWalkHint reads a host's hint; save false (a dry run) makes Save a
// no-op. A missing, oversized or damaged one is no hint: the walk then
// goes level by level, as on a first run.
func LoadWalkHint(file string, save bool, log *slog.Logger) *WalkHint {
	h := &WalkHint{file: file, save: save}
	if file == "" {
		return h
	}
	// O_NONBLOCK: a FIFO in its place must not hold the pull up.
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cannot read the last walk; walking level by level", "file", file, "err", err)
		}
		return h
	}
	defer f.Close()
	data, err := readHintFile(f)
	if err == nil {
		h.Hint, err = ParseHint(data)
	}
	if err != nil {
		log.Warn("the last walk's record is damaged; walking level by level (the next run rewrites it)", "file", file, "err", err)
		return h
	}
	h.data = data
	return h
}

// readHintFile reads a hint file in one go, sized by its length (a hint
// is up to MaxHintBytes: io.ReadAll would read it in a dozen and more
// growing pieces).
func readHintFile(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, errors.New("not a regular file")
	case st.Size() > MaxHintBytes:
		return nil, errors.New("larger than the limit")
	}
	var b bytes.Buffer
	b.Grow(int(st.Size()) + bytes.MinRead)
	if _, err := b.ReadFrom(io.LimitReader(f, MaxHintBytes+1)); err != nil {
		return nil, err
	}
	if b.Len() > MaxHintBytes {
		return nil, errors.New("larger than the limit")
	}
	return b.Bytes(), nil
}

// Save keeps walked for the next run, if it differs from what was
// loaded. The file is not fsynced: after a crash a torn or lost hint
// costs one walk level by level and one read of each git index, nothing
// else.
func (h *WalkHint) Save(walked Hint, log *slog.Logger) {
	if h.file == "" || !h.save {
		return
	}
	data, err := MarshalHint(walked)
	if err != nil || bytes.Equal(data, h.data) {
		return
	}
	if err = durable.MkdirAllPath(filepath.Dir(h.file), 0o700); err == nil {
		tmp := h.file + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, h.file)
		}
	}
	if err != nil {
		log.Warn("cannot keep this walk for the next run", "file", h.file, "err", err)
	}
}

// ForgetWalkHints removes the walk hints of hosts not in hosts (the
// manifest's names), so that walksDir holds one file per host at most.
// Only files named like a hint are touched; a failure is only logged.
func ForgetWalkHints(walksDir string, hosts []string, log *slog.Logger) {
	ents, err := os.ReadDir(walksDir)
	if err != nil {
		return // none yet
	}
	known := map[string]bool{}
	for _, h := range hosts {
		known[h+".json"] = true
		known[h+".json.tmp"] = true
	}
	for _, e := range ents {
		name := e.Name()
		if known[name] || !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".json.tmp") {
			continue
		}
		if err := os.Remove(filepath.Join(walksDir, name)); err != nil {
			log.Warn("cannot remove the walk hint of a host the manifest no longer names", "file", name, "err", err)
		}
	}
}
