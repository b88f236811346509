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

// TestGuideLeadsWithHooks: HANDOFF.md shows the hooks as the first way to
// set up a writer host's agents, before anything else it says, and the
// instruction block as the fallback for harnesses without hooks.
func TestGuideLeadsWithHooks(t *testing.T) {
	guide := string(Guide(GuideInput{Host: "laptop", Canonical: "canon", Dir: "/m", Repos: true}))
	hooks, reading := strings.Index(guide, "handoff hooks install --harness claude"), strings.Index(guide, "## Reading memory")
	if hooks < 0 || reading < 0 || hooks > reading {
		t.Errorf("the hooks do not lead HANDOFF.md (at %d, reading at %d)", hooks, reading)
	}
	for _, want := range []string{"handoff hooks install --harness codex", "/hooks", "Grok, Hermes", "`handoff hooks status`"} {
		if !strings.Contains(guide, want) {
			t.Errorf("HANDOFF.md lacks %q", want)
		}
	}
}
