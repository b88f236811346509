package doctor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/harness/claude"
	"github.com/handoff-sync/handoff/mirror"
)

func writerCheck(rep *Report, name string) *Check {
	for i := range rep.Checks {
		if rep.Checks[i].Name == name {
			return &rep.Checks[i]
		}
	}
	return nil
}

// TestRunWriter: the writer checks judge the mirror by MIRROR.json (none
// is a failure, a publish under way a warning with no checksum check, an
// old one a warning), and hooks naming a program that no longer exists
// fail (the invariant: a writer host whose hooks silently do nothing is
// reported, not passed).
func TestRunWriter(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CODEX_HOME", "")
	m := filepath.Join(home, "mirror")
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	opts := WriterOptions{Mirror: m, Dir: home, Program: "/usr/bin/handoff", Now: func() time.Time { return now }}

	rep := RunWriter(context.Background(), opts)
	if c := writerCheck(rep, "mirror"); rep.OK || c == nil || c.Status != CheckFail {
		t.Errorf("no mirror: %+v", rep.Checks)
	}

	for _, tc := range []struct {
		info   mirror.Info
		status string
		sums   bool
	}{
		{mirror.Info{Canonical: "canon", Host: "laptop", PublishedAt: now.Add(-time.Hour), Complete: true}, CheckOK, true},
		{mirror.Info{Canonical: "canon", Host: "laptop", PublishedAt: now.Add(-time.Minute), Complete: false}, CheckWarn, false},
		{mirror.Info{Canonical: "canon", Host: "laptop", PublishedAt: now.Add(-MirrorStaleWarn - time.Hour), Complete: true}, CheckWarn, true},
	} {
		data, _ := json.Marshal(tc.info)
		if err := os.MkdirAll(m, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(m, mirror.InfoFile), data, 0o644)
		os.WriteFile(filepath.Join(m, mirror.SumsFile), nil, 0o644)
		rep := RunWriter(context.Background(), opts)
		if c := writerCheck(rep, "mirror"); c == nil || c.Status != tc.status {
			t.Errorf("%+v: mirror check %+v", tc.info, c)
		}
		if got := writerCheck(rep, "sums") != nil; got != tc.sums {
			t.Errorf("%+v: sums checked %v", tc.info, got)
		}
		if c := writerCheck(rep, "role"); c == nil || !strings.Contains(c.Message, "canonical host canon") {
			t.Errorf("role: %+v", c)
		}
	}

	// Hooks naming a program that is gone.
	settings := filepath.Join(home, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	os.WriteFile(settings, []byte(`{"hooks":{"SessionStart":[{"matcher":"`+claude.SessionStartMatcher+`","hooks":[{"type":"command","command":"/gone/handoff context --hook claude","timeout":10}]}]}}`), 0o644)
	rep = RunWriter(context.Background(), opts)
	if c := writerCheck(rep, "hooks"); rep.OK || c == nil || c.Status != CheckFail || !strings.Contains(c.Message, "/gone/handoff no longer exists") {
		t.Errorf("hooks naming a missing program: %+v", c)
	}
}
