package claude

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNotesAndAnswers: a settings file that turns every hook off is
// reported; the answers are the JSON Claude Code reads from a hook.
func TestNotesAndAnswers(t *testing.T) {
	if n := Notes([]byte(`{"disableAllHooks": true}`)); len(n) != 1 || !strings.Contains(n[0], "runs none") {
		t.Errorf("disableAllHooks: %q", n)
	}
	if n := Notes([]byte(`{"model": "opus"}`)); n != nil {
		t.Errorf("a plain file: %q", n)
	}
	var ctx struct {
		Out struct{ HookEventName, AdditionalContext string } `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(ContextAnswer("notes <&>"), &ctx); err != nil || ctx.Out.HookEventName != "SessionStart" || ctx.Out.AdditionalContext != "notes <&>" {
		t.Errorf("context answer: %+v, %v", ctx, err)
	}
	var stop struct{ Decision, Reason string }
	if err := json.Unmarshal(BlockAnswer("write one"), &stop); err != nil || stop.Decision != "block" || stop.Reason != "write one" {
		t.Errorf("block answer: %+v, %v", stop, err)
	}
}

// TestUserFile: $CLAUDE_CONFIG_DIR wins over ~/.claude when absolute.
func TestUserFile(t *testing.T) {
	t.Setenv("HOME", "/home/me")
	for env, want := range map[string]string{"": "/home/me/.claude/settings.json", "/cfg": "/cfg/settings.json"} {
		t.Setenv("CLAUDE_CONFIG_DIR", env)
		if got, err := UserFile(); err != nil || got != want {
			t.Errorf("CLAUDE_CONFIG_DIR=%q: %s, %v", env, got, err)
		}
	}
}
