package mirror

import (
	"strings"
	"testing"
)

// TestGuideContinuity: HANDOFF.md and the closeout instruction tell an
// agent to run handoff context when a session starts (only where the
// mirror holds repos/, which it reads) and to fill Open questions and
// Next steps when it stops (always).
func TestGuideContinuity(t *testing.T) {
	for _, repos := range []bool{true, false} {
		g := GuideInput{Host: "laptop", Canonical: "canon", Dir: "/home/me/.openclaw/mirror", Cards: true, Repos: repos}
		guide, instr := string(Guide(g)), Instructions(g, "")
		for what, text := range map[string]string{"HANDOFF.md": guide, "instructions": instr} {
			if got := strings.Contains(text, "`handoff context`"); got != repos {
				t.Errorf("repos %v: %s names handoff context: %v", repos, what, got)
			}
			for _, s := range []string{"`## Open questions`", "`## Next steps`", "`## Continues`"} {
				if !strings.Contains(text, s) {
					t.Errorf("repos %v: %s does not name %s", repos, what, s)
				}
			}
		}
		if repos && !strings.Contains(guide, "repos/<slug>/RECENT.md") {
			t.Error("HANDOFF.md does not say where RECENT.md is")
		}
	}
}
