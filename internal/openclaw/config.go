package openclaw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/titanous/json5"
)

// MaxConfigSize bounds how much of OpenClaw's config is read.
const MaxConfigSize = 4 << 20

// Config is what handoff reads of OpenClaw's own config file.
type Config struct {
	Path string `json:"path"`
	// Version is the OpenClaw version that last wrote the file
	// (meta.lastTouchedVersion), "" when it does not say.
	Version string `json:"version,omitempty"`
	// Workspace is agents.defaults.workspace as written, "" when unset
	// (OpenClaw then uses ~/.openclaw/workspace).
	Workspace string `json:"workspace,omitempty"`
	// ExtraPaths is memory.search.extraPaths: more paths OpenClaw's memory
	// search indexes, as untrusted.
	ExtraPaths []string `json:"extra_paths"`
	Caps       Caps     `json:"caps"`
}

// ConfigPath is the file OpenClaw reads its config from, found as
// OpenClaw finds it: $OPENCLAW_CONFIG_PATH, else openclaw.json in
// $OPENCLAW_STATE_DIR, else ~/.openclaw/openclaw.json. getenv is
// os.Getenv in production.
func ConfigPath(getenv func(string) string, home string) string {
	if p := strings.TrimSpace(getenv("OPENCLAW_CONFIG_PATH")); p != "" {
		return Expand(p, home)
	}
	if d := strings.TrimSpace(getenv("OPENCLAW_STATE_DIR")); d != "" {
		return filepath.Join(Expand(d, home), "openclaw.json")
	}
	return filepath.Join(home, ".openclaw", "openclaw.json")
}

// Expand replaces a leading "~" in p with home.
func Expand(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// ErrNoConfig: OpenClaw's config file does not exist.
var ErrNoConfig = errors.New("no OpenClaw config")

// ReadConfig reads OpenClaw's config at path (JSON5, as OpenClaw writes
// and reads it), at most MaxConfigSize bytes. A file that does not exist
// is ErrNoConfig.
func ReadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoConfig)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxConfigSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxConfigSize)
	}
	return ParseConfig(path, data)
}

// ParseConfig reads the fields handoff needs from a config's bytes.
func ParseConfig(path string, data []byte) (*Config, error) {
	var raw struct {
		Meta struct {
			LastTouchedVersion any `json:"lastTouchedVersion"`
		} `json:"meta"`
		Agents struct {
			Defaults struct {
				Workspace              any `json:"workspace"`
				BootstrapMaxChars      any `json:"bootstrapMaxChars"`
				BootstrapTotalMaxChars any `json:"bootstrapTotalMaxChars"`
			} `json:"defaults"`
		} `json:"agents"`
		Memory struct {
			Search struct {
				ExtraPaths any `json:"extraPaths"`
			} `json:"search"`
		} `json:"memory"`
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if err := json5.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: not a config OpenClaw can read: %w", path, err)
	}
	c := &Config{Path: path, ExtraPaths: []string{}}
	c.Version, _ = raw.Meta.LastTouchedVersion.(string)
	c.Workspace, _ = raw.Agents.Defaults.Workspace.(string)
	c.Caps.File = positive(raw.Agents.Defaults.BootstrapMaxChars)
	c.Caps.Total = positive(raw.Agents.Defaults.BootstrapTotalMaxChars)
	switch v := raw.Memory.Search.ExtraPaths.(type) {
	case string:
		c.ExtraPaths = append(c.ExtraPaths, v)
	case []any:
		for _, p := range v {
			if s, ok := p.(string); ok && strings.TrimSpace(s) != "" {
				c.ExtraPaths = append(c.ExtraPaths, strings.TrimSpace(s))
			}
		}
	}
	return c, nil
}

// positive is a JSON number above zero, floored, as OpenClaw takes a
// limit; anything else is 0 (the default).
func positive(v any) int {
	f, ok := v.(float64)
	if !ok || f <= 0 || f > 1e9 {
		return 0
	}
	return int(f)
}

// AtLeast reports whether version (YYYY.M.D, with any suffix) is at least
// YYYY.M; false when it cannot be read.
func AtLeast(version string, year, month int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	y, err1 := strconv.Atoi(parts[0])
	m, err2 := strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return y > year || y == year && m >= month
}

// Detection is a workspace's layout and what told it.
type Detection struct {
	Layout Layout `json:"layout"`
	// Why names the evidence, for doctor and the receipt.
	Why string `json:"why"`
	// Guess: nothing told, and the layout is the one handoff always
	// wrote for; doctor asks for a pin.
	Guess bool `json:"guess,omitempty"`
}

// Detect works out which layout the OpenClaw that reads a workspace
// has, from the strongest evidence down:
//  1. a layout the manifest pins (pin other than LayoutAuto);
//  2. sticky: handoff already saw LayoutAgents for this workspace
//     (OpenClaw never goes back to TOOLS.md);
//  3. the workspace's AGENTS.md holds MigratedHeading: OpenClaw's
//     doctor has retired TOOLS.md there;
//  4. OpenClaw's config names the version that last wrote it
//     (OpenClaw writes it on setup and on every doctor run);
//  5. nothing: LayoutTools, where handoff always put TOOLS.md notes,
//     marked as a guess. handoff moves notes to another file only on
//     evidence; doctor says when it has none.
//
// agents is the workspace's AGENTS.md; cfg may be nil.
func Detect(pin, sticky Layout, agents []byte, cfg *Config) Detection {
	switch {
	case pin != "" && pin != LayoutAuto:
		return Detection{Layout: pin, Why: "pinned by the manifest (openclaw.layout)"}
	case sticky == LayoutAgents:
		return Detection{Layout: LayoutAgents, Why: "seen before in this workspace (.handoff/openclaw.json)"}
	case bytes.Contains(agents, []byte(MigratedHeading)):
		return Detection{Layout: LayoutAgents, Why: "AGENTS.md holds OpenClaw's TOOLS.md migration"}
	case cfg != nil && cfg.Version != "" && AtLeast(cfg.Version, 2026, 9):
		return Detection{Layout: LayoutAgents, Why: fmt.Sprintf("%s was last written by OpenClaw %s", cfg.Path, cfg.Version)}
	case cfg != nil && cfg.Version != "":
		return Detection{Layout: LayoutTools, Why: fmt.Sprintf("%s was last written by OpenClaw %s", cfg.Path, cfg.Version)}
	}
	return Detection{Layout: LayoutTools, Guess: true,
		Why: "no OpenClaw config says its version and AGENTS.md holds no TOOLS.md migration: TOOLS.md, as before"}
}

// Sticky reads the layout handoff noted for a workspace in its state
// file (ingest.ReaderFile's "layout"); "" when there is none.
func Sticky(data []byte) Layout {
	var st struct {
		Layout Layout `json:"layout"`
	}
	if json.Unmarshal(data, &st) != nil || !st.Layout.Valid() {
		return ""
	}
	return st.Layout
}

// Find reads OpenClaw's config for a workspace: at path when the
// manifest names one ("~" expanded), else where OpenClaw looks. A config
// that does not exist is (nil, nil).
func Find(path string, getenv func(string) string, home string) (*Config, string, error) {
	p := Expand(path, home)
	if p == "" {
		p = ConfigPath(getenv, home)
	}
	c, err := ReadConfig(p)
	if errors.Is(err, ErrNoConfig) {
		return nil, p, nil
	}
	return c, p, err
}
