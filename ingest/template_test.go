package ingest

import (
	"strings"
	"testing"
)

// fills are what a writer puts in place of each placeholder.
var fills = map[string]string{
	"one of setup, workflow, bugfix, decision, security, preference, research, project-context": "workflow",
	"a short, specific title":                                            "Fuzz before a release",
	"what happened and why it matters, in a few sentences":               "A short fuzz run found a crash.",
	"the facts worth keeping, one per line; or delete this section":      "- make fuzz runs every target",
	"files changed, commands run, error strings; or delete this section": "- make fuzz",
	"the card's file name, such as go-fuzzing.md":                        "go-fuzzing.md",
	"what the card is about":                                             "Fuzzing Go parsers",
	"the card's category, such as workflow":                              "workflow",
	"one tag":                                                            "go",
	"the card's text, as it should be saved":                             "Run make fuzz for a minute per target.",
	"the card's SHA-256 as you last read it: its line in SHA256SUMS in this host's mirror (HANDOFF.md there says where)":     strings.Repeat("ab", 32),
	"one of TOOLS.md, USER.md, rules/NAME.md, .learnings/LEARNINGS.md, .learnings/ERRORS.md, .learnings/FEATURE_REQUESTS.md": "TOOLS.md",
	"the text to add; headings only ### or deeper": "### fuzz\n\nRun make fuzz.",
}

func fill(t *testing.T, tmpl string) string {
	t.Helper()
	return fillRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		v, ok := fills[strings.TrimSuffix(strings.TrimPrefix(m, "<FILL: "), ">")]
		if !ok {
			t.Fatalf("no fill for %s", m)
		}
		return v
	})
}

// TestTemplate: each template, unfilled, is flagged once per placeholder
// section as unfilled-template (first, so a review draft is filed under
// it); filled in, it lints clean as a handoff of its kind.
func TestTemplate(t *testing.T) {
	for _, tc := range []struct {
		kind, action string
		sections     int // sections holding a placeholder
		card, doc    bool
	}{
		{TemplateCard, ActionCreateCard, 7, true, false},
		{TemplateUpdate, ActionUpdateCard, 8, true, false},
		{TemplateDocument, ActionNoCard, 7, false, true},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			tmpl, err := Template(tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			ps := Lint([]byte(tmpl))
			n := 0
			for _, p := range ps {
				if p.Reason == ReasonUnfilledTemplate {
					n++
					if !strings.Contains(p.Message, "still holds the template's placeholder") {
						t.Errorf("message %q", p.Message)
					}
				}
			}
			if n != tc.sections || len(ps) == 0 || ps[0].Reason != ReasonUnfilledTemplate {
				t.Fatalf("unfilled template: %d unfilled-template problems of %v, want %d first", n, ps, tc.sections)
			}
			filled := fill(t, tmpl)
			if ps := Lint([]byte(filled)); len(ps) != 0 {
				t.Fatalf("filled template has problems: %v\n%s", ps, filled)
			}
			h, err := Parse([]byte(filled))
			if err != nil {
				t.Fatal(err)
			}
			if h.Action != tc.action || (h.Card != nil) != tc.card || (h.Document != nil) != tc.doc {
				t.Fatalf("filled %s template parsed as action %q card %v doc %v", tc.kind, h.Action, h.Card, h.Document)
			}
		})
	}
	if _, err := Template("memo"); err == nil {
		t.Fatal("an unknown kind gave a template")
	}
}

// TestUnfilledOneSection: a placeholder left in one section is named with
// its section, whatever else the handoff holds.
func TestUnfilledOneSection(t *testing.T) {
	tmpl, _ := Template(TemplateDocument)
	half := strings.Replace(fill(t, tmpl), "Fuzz before a release", "<FILL: a short, specific title>", 1)
	ps := Lint([]byte(half))
	if len(ps) != 1 || ps[0].Reason != ReasonUnfilledTemplate || ps[0].Field != SectionTitle {
		t.Fatalf("problems %v, want one unfilled-template in the title", ps)
	}
}
