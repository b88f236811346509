package codex

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"

	"github.com/handoff-sync/handoff/internal/harness"
)

// Name is the harness's name on handoff's command line.
const Name = "codex"

// Dir is the harness's directory in a repository and in the home
// directory.
const Dir = ".codex"

// Timeout is the time, in seconds, Codex gives each of handoff's hooks
// (Codex's own default is 600). The hooks give up long before.
const Timeout = 10

// SessionStartMatcher matches every start source Codex documents.
const SessionStartMatcher = "startup|resume|clear"

// Home is $CODEX_HOME, else ~/.codex.
func Home() (string, error) {
	if dir := os.Getenv("CODEX_HOME"); filepath.IsAbs(dir) {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, Dir), nil
}

// UserFile is the user's hooks.json.
func UserFile() (string, error) {
	h, err := Home()
	if err != nil {
		return "", err
	}
	return filepath.Join(h, "hooks.json"), nil
}

// ProjectFile is a repository's hooks.json.
func ProjectFile(repo string) string { return filepath.Join(repo, Dir, "hooks.json") }

// Hooks are handoff's two hooks as hooks.json holds them.
func Hooks(program string, extra ...string) []harness.Hook {
	return []harness.Hook{
		{Kind: harness.KindContext, Event: "SessionStart", Matcher: SessionStartMatcher,
			Command: harness.Command(program, append([]string{"context", "--hook", Name}, extra...)...), Program: program, Timeout: Timeout},
		{Kind: harness.KindStop, Event: "Stop",
			Command: harness.Command(program, append([]string{"hook", "stop", "--harness", Name}, extra...)...), Program: program, Timeout: Timeout},
	}
}

// maxConfig bounds the config.toml read.
const maxConfig = 1 << 20

// Config is what a config.toml says about hooks.
type Config struct {
	Path string `json:"path"`
	// Exists is false when there is no config.toml.
	Exists bool `json:"exists"`
	// Off is true when [features] hooks (or its older name codex_hooks)
	// is false: Codex runs no hook.
	Off bool `json:"off"`
	// Flag is the value of [features] hooks or codex_hooks, "" when
	// neither is set.
	Flag string `json:"flag,omitempty"`
	// Inline counts handoff's handlers in the file's own [hooks] tables.
	Inline int `json:"inline"`
	// Err is why the file could not be read, "" when it was.
	Err string `json:"error,omitempty"`
}

// ReadConfig reads what the config.toml at name says about hooks. It
// never writes the file: a person's TOML keeps its comments and layout,
// which no rewrite could promise.
func ReadConfig(name string) Config {
	c := Config{Path: name}
	data, err := readBounded(name)
	if errors.Is(err, fs.ErrNotExist) {
		return c
	}
	c.Exists = true
	if err != nil {
		c.Err = err.Error()
		return c
	}
	var doc struct {
		Features map[string]any `toml:"features"`
		Hooks    map[string]any `toml:"hooks"`
	}
	if err := toml.Unmarshal(data, &doc); err != nil {
		c.Err = err.Error()
		return c
	}
	for _, key := range []string{"codex_hooks", "hooks"} {
		if v, ok := doc.Features[key]; ok {
			c.Flag = fmt.Sprintf("%s = %v", key, v)
			if b, ok := v.(bool); ok && !b {
				c.Off = true
			}
		}
	}
	for event, v := range doc.Hooks {
		if event == "state" {
			continue
		}
		groups, _ := v.([]any)
		for _, g := range groups {
			gm, _ := g.(map[string]any)
			hs, _ := gm["hooks"].([]any)
			for _, h := range hs {
				hm, _ := h.(map[string]any)
				if cmd, ok := hm["command"].(string); ok {
					if kind, _ := harness.KindOf(cmd); kind != "" {
						c.Inline++
					}
				}
			}
		}
	}
	return c
}

func readBounded(name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxConfig {
		return nil, fmt.Errorf("%s is not a regular file of at most %d KiB", name, maxConfig>>10)
	}
	return os.ReadFile(name)
}

// Notes says what a person must do for Codex to run handoff's hooks from
// a hooks.json beside cfg.
func Notes(cfg Config, project bool) []string {
	var out []string
	switch {
	case cfg.Err != "":
		out = append(out, fmt.Sprintf("%s could not be read (%s): check [features] there yourself", cfg.Path, cfg.Err))
	case cfg.Off:
		out = append(out, fmt.Sprintf("%s sets [features] %s: Codex runs no hook until it is true (or removed)", cfg.Path, cfg.Flag))
	case cfg.Flag == "":
		out = append(out, "Codex releases that still keep hooks behind a feature flag need [features] codex_hooks = true in config.toml; current ones run hooks by default")
	}
	if cfg.Inline > 0 {
		out = append(out, fmt.Sprintf("%s also holds %d of handoff's hooks in its [hooks] tables: remove them there, or each runs twice", cfg.Path, cfg.Inline))
	}
	out = append(out, "Codex runs a new or changed hook only once you trust it: start codex, open /hooks and trust handoff's two hooks (again after each install that changed them)")
	if project {
		out = append(out, "Codex loads a repository's .codex/hooks.json only when that repository's .codex/ layer is trusted")
	}
	return out
}

// ContextAnswer is a SessionStart hook's answer adding text to the
// session's context.
func ContextAnswer(text string) []byte {
	return answer(map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "SessionStart", "additionalContext": text}})
}

// BlockAnswer is a Stop hook's answer that makes Codex continue with
// reason as its prompt.
func BlockAnswer(reason string) []byte {
	return answer(map[string]any{"decision": "block", "reason": reason})
}

func answer(v any) []byte {
	data, _ := json.Marshal(v)
	return append(data, '\n')
}

// Target is Codex's hooks.json in scope (repo for the project scope),
// with handoff's hooks running program and extra arguments. Its notes
// come from the config.toml beside it.
func Target(scope, repo, program string, extra ...string) (harness.Target, error) {
	t := harness.Target{Harness: Name, Scope: scope, Want: Hooks(program, extra...), Perm: 0o644}
	switch scope {
	case harness.ScopeUser:
		p, err := UserFile()
		if err != nil {
			return t, err
		}
		t.Path, t.Perm = p, 0o600
	case harness.ScopeProject:
		t.Path = ProjectFile(repo)
	}
	cfg := filepath.Join(filepath.Dir(t.Path), "config.toml")
	t.Notes = func([]byte) []string { return Notes(ReadConfig(cfg), scope == harness.ScopeProject) }
	return t, nil
}
