package claude

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/handoff-sync/handoff/internal/harness"
)

// Name is the harness's name on handoff's command line.
const Name = "claude"

// Dir is the harness's directory in a repository (its inbox is
// Dir/memory-handoffs).
const Dir = ".claude"

// Timeout is the time, in seconds, Claude Code gives each of handoff's
// hooks. The hooks themselves give up long before (see docs/hooks.md);
// this only stops a hung one from holding the session.
const Timeout = 10

// SessionStartMatcher makes the context hook run on every way a session
// starts: a new one, a resumed one, after /clear and after compaction
// (which may have dropped the notes from the context).
const SessionStartMatcher = "startup|resume|clear|compact"

// UserFile is the user's settings file: $CLAUDE_CONFIG_DIR/settings.json,
// else ~/.claude/settings.json.
func UserFile() (string, error) {
	if dir := os.Getenv("CLAUDE_CONFIG_DIR"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "settings.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, Dir, "settings.json"), nil
}

// ProjectFile is a repository's shared settings file.
func ProjectFile(repo string) string { return filepath.Join(repo, Dir, "settings.json") }

// Hooks are handoff's two hooks as Claude Code's settings hold them,
// running program (an absolute path) with extra arguments after each.
func Hooks(program string, extra ...string) []harness.Hook {
	return []harness.Hook{
		{Kind: harness.KindContext, Event: "SessionStart", Matcher: SessionStartMatcher,
			Command: harness.Command(program, append([]string{"context", "--hook", Name}, extra...)...), Program: program, Timeout: Timeout},
		{Kind: harness.KindStop, Event: "Stop",
			Command: harness.Command(program, append([]string{"hook", "stop", "--harness", Name}, extra...)...), Program: program, Timeout: Timeout},
	}
}

// Notes says what in a settings file keeps Claude Code from running the
// hooks it holds.
func Notes(data []byte) []string {
	var s struct {
		DisableAllHooks bool `json:"disableAllHooks"`
	}
	if json.Unmarshal(data, &s) == nil && s.DisableAllHooks {
		return []string{`"disableAllHooks": true in this file: Claude Code runs none of its hooks`}
	}
	return nil
}

// ContextAnswer is a SessionStart hook's answer adding text to the
// session's context (hookSpecificOutput.additionalContext).
func ContextAnswer(text string) []byte {
	return answer(map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "SessionStart", "additionalContext": text}})
}

// BlockAnswer is a Stop hook's answer that keeps the agent going with
// reason as what to do.
func BlockAnswer(reason string) []byte {
	return answer(map[string]any{"decision": "block", "reason": reason})
}

func answer(v any) []byte {
	data, _ := json.Marshal(v)
	return append(data, '\n')
}

// Target is Claude Code's settings file in scope (repo for the project
// scope), with handoff's hooks running program and extra arguments.
func Target(scope, repo, program string, extra ...string) (harness.Target, error) {
	t := harness.Target{Harness: Name, Scope: scope, Want: Hooks(program, extra...), Notes: Notes, Perm: 0o644}
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
	return t, nil
}
